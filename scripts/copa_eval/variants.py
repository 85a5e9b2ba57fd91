# SPDX-License-Identifier: GPL-2.0
"""Variants: a congestion control plus the parameters it runs with.

Syntax: ``NAME[:KEY=VALUE[:KEY=VALUE...]]``, for example ``cubic``,
``copa:delta=0.2`` or ``copa:delta=0.04:competitive=0``. Parameters become
per-namespace sysctls of the flow's sender namespace:

- copa, copa_policer: delta, competitive, loss_reaction
  -> net.ipv4.tcp_copa.<key>
- copa_policer only: detect, loss_thresh, rate_tol, hold_rounds
  -> net.ipv4.tcp_copa_policer.<key>

The built-in algorithms (cubic, bbr, vegas, reno) take no parameters.
"""

from dataclasses import dataclass

ALGORITHMS = ("cubic", "bbr", "vegas", "reno", "copa", "copa_policer")


def _delta(value):
    whole, _, frac = value.partition(".")
    ok = whole.isdigit() and (frac == "" or (frac.isdigit()
                                             and len(frac) <= 3))
    return ok and 0 < float(value) <= 1


def _flag(value):
    return value in ("0", "1")


def _percent(value):
    return value.isdigit() and 0 <= int(value) <= 100


def _positive(value):
    return value.isdigit() and int(value) > 0


COPA_PARAMS = {
    "delta": (_delta, "a decimal in (0, 1] with up to 3 decimals"),
    "competitive": (_flag, "0 or 1"),
    "loss_reaction": (_percent, "an integer percentage 0..100"),
}
POLICER_PARAMS = {
    "detect": (_flag, "0 or 1"),
    "loss_thresh": (_percent, "an integer percentage 0..100"),
    "rate_tol": (_percent, "an integer percentage 0..100"),
    "hold_rounds": (_positive, "an integer > 0"),
}
PARAMS = {"copa": {"tcp_copa": COPA_PARAMS},
          "copa_policer": {"tcp_copa": COPA_PARAMS,
                           "tcp_copa_policer": POLICER_PARAMS}}


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
    groups = PARAMS.get(name, {})
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
