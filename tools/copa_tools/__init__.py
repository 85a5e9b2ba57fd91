# SPDX-License-Identifier: GPL-2.0
"""copa-tools: copa-diag, copa-eval and copa-bpf, and what they share.

At the top level the modules several programs use (the inet_diag decoder
``netlink``, the parameter table ``params``, ``mechanisms``, ``bpf``,
``files``, ``kernel_log``, and ``paths``, which finds the headers and data
they read); one module per program, ``diag_cli`` and ``bpf_cli``, and the
evaluation harness, ``eval``.
"""
