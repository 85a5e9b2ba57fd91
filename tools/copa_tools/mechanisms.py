# SPDX-License-Identifier: GPL-2.0
"""The mechanisms beyond the paper that a build can compile out, read from
the COPA_MECH_* defines of tcp_copa_algo.h (its "Mechanisms beyond the
paper" block): the model's ablation (tests/model/ablation.py) and the
bench's (scripts/bench-ablation) take them from there."""

import re
from dataclasses import dataclass

from . import paths

HEADER = paths.data("tcp_copa_algo.h")
_DEFINE = re.compile(r"^#define\s+COPA_MECH_([A-Z_]+)\s+(0x[0-9a-fA-F]+)"
                     r"\s+/\*\s*(.*?)\s*\*/", re.M)


@dataclass(frozen=True)
class Mechanism:
    """``name`` as in "no <name>", ``mask`` for COPA_ABLATE, ``what`` it
    does (the define's comment)."""
    name: str
    mask: int
    what: str


def load(path=HEADER):
    """The Mechanisms in the header's order; ValueError without any or
    with two on one bit."""
    with open(path) as f:
        found = [Mechanism(m.group(1).lower().replace("_", " "),
                           int(m.group(2), 16), m.group(3))
                 for m in _DEFINE.finditer(f.read())]
    if not found:
        raise ValueError(f"{path}: no COPA_MECH_* defines")
    masks = [m.mask for m in found]
    if any(bin(k).count("1") != 1 for k in masks) or \
            len(set(masks)) != len(masks):
        raise ValueError(f"{path}: COPA_MECH_* must be distinct bits")
    return found
