# SPDX-License-Identifier: GPL-2.0
"""copa-eval: evaluation harness and emulated-link lab for Copa."""
