# SPDX-License-Identifier: GPL-2.0
# Sphinx configuration for make htmldocs (scripts/htmldocs), which builds
# with warnings as errors.
import os

project = "Copa for Linux"
copyright = "2026, Copa for Linux developers"
with open(os.path.join(os.path.dirname(__file__), "..", "VERSION")) as f:
    version = release = f.read().strip()
root_doc = master_doc = "index"
exclude_patterns = ["_build"]
html_theme = "alabaster"
# Man pages from man/*.rst (Debian's copa-tools builds them with rst2man;
# "make -C Documentation man" style builds work too).
man_pages = [
    ("man/copa-diag", "copa-diag", "show the state of TCP Copa sockets",
     ["Copa for Linux developers"], 1),
    ("man/copa-eval", "copa-eval",
     "compare congestion controls over emulated links",
     ["Copa for Linux developers"], 1),
    ("man/copa-bpf", "copa-bpf",
     "build, load and configure the BPF struct_ops build of TCP Copa",
     ["Copa for Linux developers"], 8),
]
