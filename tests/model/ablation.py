#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""The model's ablation table (Documentation/copa.rst, "Ablation").

    make -C tests/model ablation

Builds the model once per mechanism compiled out (COPA_ABLATE, the
COPA_MECH_* of tcp_copa_algo.h, copa_tools.mechanisms), runs each over the
loss links ("model losses") and the test cases, and prints one Markdown
table: utilisation / retransmitted per link for default copa, and the
cases each build fails.
"""

import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "tools"))
from copa_tools import mechanisms  # noqa: E402

MECHS = [(0, "all")] + [(m.mask, f"no {m.name}") for m in mechanisms.load()]
LINE = re.compile(r"(.*?)\s+copa\s+util ([\d.]+).*retrans\s+([\d.]+)%")


def build(mask):
    subprocess.run(["make", "-s", "-C", HERE, f"model-ablate-{mask}"],
                   check=True)


def run(mask, *args):
    out = subprocess.run([os.path.join(HERE, f"model-ablate-{mask}"), *args],
                         check=False,
                         capture_output=True, text=True).stdout
    return out.splitlines()


def main():
    rows = {}
    failing = {}
    for mask, _ in MECHS:
        build(mask)
        for line in run(mask, "losses"):
            m = LINE.match(line)
            if m:
                rows.setdefault(m.group(1).strip(), {})[mask] = \
                    f"{m.group(2)} / {m.group(3)} %"
        failing[mask] = [line.split()[3] for line in run(mask, "check")
                         if line.startswith("not ok")]
    print("| link | " + " | ".join(name for _, name in MECHS) + " |")
    print("|---" * (len(MECHS) + 1) + "|")
    for link, cells in rows.items():
        print(f"| {link} | " +
              " | ".join(cells.get(mask, "-") for mask, _ in MECHS) + " |")
    print()
    for mask, name in MECHS:
        print(f"- {name}: failing cases: "
              f"{', '.join(failing[mask]) or 'none'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
