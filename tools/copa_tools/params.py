# SPDX-License-Identifier: GPL-2.0
"""Copa's tunables and modes, read from tcp_copa_params.h, the one table
the modules, the BPF build and these tools share.

``load()`` parses the header's tables strictly: a table is
``#define NAME(X)`` followed by ``X(...)`` entries only, each argument of
its kind (see the header), and anything else in a table is an error that
names the file and line, not something skipped. A tunable's default may
name a constant of tcp_copa_algo.h or tcp_copa_limit.h, the files beside
the header, which between them must define it once as a decimal number.
"""

import os
import re
from dataclasses import dataclass

from . import paths

HEADER = paths.data("tcp_copa_params.h")
# The headers whose constants a default may name.
CONSTANT_HEADERS = ("tcp_copa_algo.h", "tcp_copa_limit.h")

# Table macro -> group: the module whose sysctls the tunables are
# (net.ipv4.<group>.<name>), or "bpf" for the BPF build's own.
TUNABLE_TABLES = {"COPA_TUNABLES": "tcp_copa",
                  "COPA_POLICER_TUNABLES": "tcp_copa_policer",
                  "COPA_BPF_TUNABLES": "bpf"}
MODE_TABLE = "COPA_MODES"

_ID = r"[A-Z][A-Z0-9_]*"
_NAME = r"[a-z][a-z0-9_]*"
_NUM = r"[0-9]+"
_ARG_SEP = r"\s*,\s*"
_ENTRY = {
    "tunable": re.compile(r"\s*X\(\s*" + _ARG_SEP.join([
        f"({_ID})", f"({_NAME})", f"({_NUM})", f"({_NUM})", "(true|false)",
        f"({_NUM}|{_ID})", r'"([^"\\]*)"']) + r"\s*\)"),
    "mode": re.compile(r"\s*X\(\s*" + _ARG_SEP.join([
        f"({_ID})", f"({_NUM})", f"({_NAME})"]) + r"\s*\)"),
}


class ParamsError(ValueError):
    """tcp_copa_params.h (or a constant it names) is not as expected."""


@dataclass(frozen=True)
class Tunable:
    """One tunable; min, max and default in thousandths if milli."""
    name: str
    min: int
    max: int
    milli: bool
    default: int
    description: str


@dataclass(frozen=True)
class Params:
    """``tunables``: {group: {name: Tunable}} in the header's order, the
    groups tcp_copa, tcp_copa_policer and bpf; ``modes``: {number: name}."""
    tunables: dict
    modes: dict

    def mode(self, name):
        """The number of the mode called @name."""
        return next(n for n, m in self.modes.items() if m == name)


def load(path=None):
    """Parse the header at @path (default HEADER) into a Params. Not
    cached: it takes well under a millisecond, and a test may point
    HEADER elsewhere."""
    path = path or HEADER
    with open(path) as f:
        text = f.read()
    # Logical lines: a line ending in a backslash continues on the next.
    logical, start = [], None
    for number, line in enumerate(text.splitlines(), 1):
        if start is None:
            start, joined = number, ""
        joined += line[:-1] + " " if line.endswith("\\") else line
        if not line.endswith("\\"):
            logical.append((start, joined))
            start = None
    defines = {}
    for number, line in logical:
        m = re.match(r"\s*#\s*define\s+(\w+)\(X\)(.*)", line)
        if not m or m.group(1) not in (*TUNABLE_TABLES, MODE_TABLE):
            continue
        name, body = m.groups()
        where = f"{path}:{number}"
        if name in defines:
            raise ParamsError(f"{where}: {name} is defined twice")
        kind = "mode" if name == MODE_TABLE else "tunable"
        entries, pos = [], 0
        while pos < len(body.rstrip()):
            e = _ENTRY[kind].match(body, pos)
            if not e:
                raise ParamsError(f"{where}: {name}: not a {kind} entry: "
                                  f"{body[pos:].strip()[:60]!r}")
            entries.append(e.groups())
            pos = e.end()
        if not entries:
            raise ParamsError(f"{where}: {name} has no entries")
        defines[name] = (where, entries)
    missing = [t for t in (*TUNABLE_TABLES, MODE_TABLE) if t not in defines]
    if missing:
        raise ParamsError(f"{path}: no {', '.join(missing)}")

    constants = {}
    tunables, ids, names = {}, set(), set()
    for table, group in TUNABLE_TABLES.items():
        where, entries = defines[table]
        tunables[group] = {}
        for ident, name, lo, hi, milli, default, desc in entries:
            if ident in ids or name in names:
                raise ParamsError(f"{where}: {ident}/{name} is listed twice")
            ids.add(ident)
            names.add(name)
            if not default.isdigit():
                if not constants:
                    for header in CONSTANT_HEADERS:
                        with open(os.path.join(os.path.dirname(path),
                                               header)) as f:
                            text = f.read()
                        for d in re.finditer(r"^#define\s+(\w+)\s+([0-9]+)\b",
                                             text, re.M):
                            constants.setdefault(d.group(1), []).append(
                                int(d.group(2)))
                found = constants.get(default, [])
                if len(found) != 1:
                    raise ParamsError(f"{where}: {name}: default {default} "
                                      f"is not one number in "
                                      f"{' or '.join(CONSTANT_HEADERS)}")
                default = found[0]
            t = Tunable(name, int(lo), int(hi), milli == "true",
                        int(default), desc)
            if not t.min <= t.default <= t.max < 2 ** 32:
                raise ParamsError(f"{where}: {name}: needs min <= default "
                                  f"<= max < 2^32")
            tunables[group][name] = t
    where, entries = defines[MODE_TABLE]
    modes = {}
    for ident, number, name in entries:
        if int(number) in modes or name in modes.values():
            raise ParamsError(f"{where}: mode {ident} is listed twice")
        modes[int(number)] = name
    return Params(tunables=tunables, modes=modes)
