# SPDX-License-Identifier: GPL-2.0
"""Variants: a congestion control plus the parameters it runs with.

Syntax: ``NAME[:KEY=VALUE[:KEY=VALUE...]]``, for example ``cubic``,
``copa:delta=0.2`` or ``copa:delta=0.04:competitive=0``. Parameters become
per-namespace sysctls of the flow's sender namespace, and are the
tunables of tcp_copa_params.h (copa_tools.params), with their ranges:

- copa, copa_policer: COPA_TUNABLES (delta, ...) -> net.ipv4.tcp_copa.<key>
- copa_policer only: COPA_POLICER_TUNABLES (detect, ...)
  -> net.ipv4.tcp_copa_policer.<key>

The built-in algorithms (cubic, bbr, vegas, reno) take no parameters,
nor does the BPF build (bpf_copa, bpf_copa_pol), which the lab builds and
registers on first use and which runs with its global defaults
(``copa-bpf set``; Documentation/bpf.rst).
"""

from dataclasses import dataclass

from .. import params as copa_params

ALGORITHMS = ("cubic", "bbr", "vegas", "reno", "copa", "copa_policer",
              "bpf_copa", "bpf_copa_pol")


# Values are parsed as the kernel parses them (copa_tunable_parse() in
# tcp_copa.c), but in ASCII digits only (str.isdigit() takes "²" and "٣").
_DIGITS = frozenset("0123456789")


def _digits(text):
    return bool(text) and set(text) <= _DIGITS


def _milli(value):
    """ "0.04" -> 40, as copa_tunable_parse() reads a milli value; None if
    it is not a decimal with up to three decimals."""
    whole, dot, frac = value.partition(".")
    if not (_digits(whole) or (dot and not whole and _digits(frac))) or \
            (dot and not _digits(frac)) or len(frac) > 3:
        return None
    return int(whole or "0") * 1000 + int(frac.ljust(3, "0") or "0")


def _ranged(lo, hi, milli=False):
    def check(value):
        number = _milli(value) if milli else \
            (int(value) if _digits(value) else None)
        return number is not None and lo <= number <= hi
    return check


def _describe(lo, hi, milli=False):
    if milli:
        return (f"a decimal from {lo / 1000:g} to {hi / 1000:g} with up to "
                f"3 decimals (ASCII digits)")
    if (lo, hi) == (0, 1):
        return "0 or 1"
    return f"an integer from {lo} to {hi} (ASCII digits)"


# The modules whose sysctls each algorithm's parameters are.
SYSCTL_GROUPS = {"copa": ("tcp_copa",),
                 "copa_policer": ("tcp_copa", "tcp_copa_policer")}


def algorithm_params(name):
    """{sysctl group: {key: (check, expected)}} of algorithm @name, from
    tcp_copa_params.h; empty for one without parameters."""
    tunables = copa_params.load().tunables
    return {group: {key: (_ranged(t.min, t.max, t.milli),
                          _describe(t.min, t.max, t.milli))
                    for key, t in tunables[group].items()}
            for group in SYSCTL_GROUPS.get(name, ())}


class VariantError(ValueError):
    """A variant string is malformed; the message names the culprit."""


@dataclass(frozen=True)
class Variant:
    """A parsed variant: ``spec`` as written, ``cc`` and sysctls."""
    spec: str
    cc: str
    params: tuple          # ((key, value), ...) in the order written
    sysctls: tuple         # ((sysctl name, value), ...)

    @property
    def slug(self):
        """A file-name-safe form of ``spec``."""
        return self.spec.replace(":", "_").replace("=", "-")


def parse_variant(spec):
    """Parse ``spec``; VariantError names the bad variant or parameter."""
    if not isinstance(spec, str) or not spec:
        raise VariantError(f"variant: expected a string like 'copa:delta=0.2',"
                           f" got {spec!r}")
    name, *items = spec.split(":")
    if name not in ALGORITHMS:
        raise VariantError(f"variant {spec!r}: unknown algorithm {name!r} "
                           f"(known: {', '.join(ALGORITHMS)})")
    groups = algorithm_params(name)
    params, sysctls, seen = [], [], set()
    for item in items:
        key, eq, value = item.partition("=")
        group = next((g for g, table in groups.items() if key in table), None)
        if not eq or group is None:
            known = sorted(k for table in groups.values() for k in table)
            raise VariantError(
                f"variant {spec!r}: unknown parameter {item!r} for {name} "
                f"(known: {', '.join(known) or 'none'})")
        check, expected = groups[group][key]
        if not check(value):
            raise VariantError(f"variant {spec!r}: {key} must be {expected}, "
                               f"got {value!r}")
        if key in seen:
            raise VariantError(f"variant {spec!r}: {key} given twice")
        seen.add(key)
        params.append((key, value))
        sysctls.append((f"net.ipv4.{group}.{key}", value))
    return Variant(spec=spec, cc=name, params=tuple(params),
                   sysctls=tuple(sysctls))


def parse_variants(specs):
    """Parse a list of specs (or one comma-separated string)."""
    if isinstance(specs, str):
        specs = [s.strip() for s in specs.split(",") if s.strip()]
    variants = [parse_variant(s) for s in specs]
    if not variants:
        raise VariantError("variants: at least one variant is needed")
    dups = {v.spec for v in variants if
            sum(w.spec == v.spec for w in variants) > 1}
    if dups:
        raise VariantError(f"variants: listed twice: "
                           f"{', '.join(sorted(dups))}")
    return variants
