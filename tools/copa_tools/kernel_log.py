# SPDX-License-Identifier: GPL-2.0
"""The kernel log lines that fail a test, in one place: tests/run-vm (the
VM suite, its boot and every test), the native tests of the BPF build
(tests/native) and the tests that say what they check (tests/smoke,
Documentation) all mean this pattern.

The words of the test policy, WARNING, BUG, Oops and refcount (a
refcount_t saturating or underflowing), and what every oops, panic and
stack dump prints: 6.1 heads a divide error "divide error: 0000 [#1]
...", with no Oops in it, and a general protection fault reads "general
protection fault, ...: 0000 [#1]".
"""
import re

BAD = re.compile(r"\b(WARNING|BUG|Oops|refcount)|\[#\d+\]|Call Trace|"
                 r"Kernel panic|general protection")


def bad_lines(lines):
    """The lines of @lines that fail a test."""
    return [line for line in lines if BAD.search(line)]
