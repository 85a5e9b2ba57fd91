#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""The model's ablation table (Documentation/copa.rst, "Ablation").

    make -C tests/model ablation

Builds the model once per mechanism compiled out (COPA_ABLATE, see
tcp_copa_algo.h), runs each over the loss links ("model losses") and the
test cases, and prints one Markdown table: utilisation / retransmitted
per link for default copa, and the cases each build fails.
"""

import re
import subprocess
import sys

MECHS = [
    (0, "all"),
    (0x01, "no loss class"),
    (0x02, "no rate limit"),
    (0x04, "no short buffer"),
    (0x08, "no start train"),
    (0x10, "no idle"),
]
LINE = re.compile(r"(.*?)\s+copa\s+util ([\d.]+).*retrans\s+([\d.]+)%")


def run(mask, *args):
    out = subprocess.run([f"./model-ablate-{mask}", *args], check=False,
                         capture_output=True, text=True).stdout
    return out.splitlines()


def main():
    rows = {}
    failing = {}
    for mask, _ in MECHS:
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
