# SPDX-License-Identifier: GPL-2.0
"""Make scripts/ importable: the harness lives in scripts/copa_eval."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..",
                                "scripts"))
