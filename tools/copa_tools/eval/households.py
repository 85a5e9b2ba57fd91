# SPDX-License-Identifier: GPL-2.0
"""Household link profiles from the FCC Measuring Broadband America data.

The CSV (data/digitaldivide/household-internet-data.csv, MIT
licensed) has one row per measured household. Units: medianDown and
medianUp in bytes/s, medianLatency in microseconds, monthly.charge in USD.
A unit_id that repeats (several years) is taken from its last row.

A profile is the household's median down and up rates and median RTT;
the bottleneck FIFO is sized by the scenario (2 x BDP of the household's
own rate and RTT, as the latency-divide study did). Rates are capped at
what the emulation reproduces faithfully, and the cap is recorded.
"""

import csv
import math
import random
from dataclasses import dataclass

PRICE_GROUPS = (("$0-30", 0.0, 30.0), ("$30-40", 30.0, 40.0),
                ("$40-50", 40.0, 50.0), ("$50+", 50.0, math.inf))
DIRECTIONS = ("down", "up")


class HouseholdError(ValueError):
    """Bad household data or selection."""


@dataclass(frozen=True)
class Household:
    unit_id: str
    down_mbit: float
    up_mbit: float
    rtt_ms: float
    monthly_charge: float
    group: str
    technology: str
    isp: str
    weight: float


def bytes_per_s_to_mbit(value):
    """bytes/s -> Mbit/s (10^6 bit/s)."""
    return value * 8 / 1e6


def us_to_ms(value):
    """microseconds -> milliseconds."""
    return value / 1000.0


def price_group(charge):
    """The price group label of a monthly charge in USD, or None."""
    if charge is None or charge < 0:
        return None
    return next(label for label, low, high in PRICE_GROUPS
                if low <= charge < high)


def _number(row, column):
    try:
        value = float(row[column])
    except (KeyError, TypeError, ValueError):
        return None
    return value if math.isfinite(value) else None


def parse_row(row):
    """A Household from one CSV row, or None if a needed field is missing."""
    down, up = _number(row, "medianDown"), _number(row, "medianUp")
    latency = _number(row, "medianLatency")
    unit = (row.get("unit_id") or "").strip()
    if not unit or not down or not up or not latency or min(
            down, up, latency) <= 0:
        return None
    charge = _number(row, "monthly.charge")
    return Household(
        unit_id=unit, down_mbit=bytes_per_s_to_mbit(down),
        up_mbit=bytes_per_s_to_mbit(up), rtt_ms=us_to_ms(latency),
        monthly_charge=charge, group=price_group(charge),
        technology=row.get("technology", ""), isp=row.get("isp", ""),
        weight=_number(row, "weight") or 1.0)


def load(path):
    """{unit_id: Household}; a repeated unit_id keeps its last usable row."""
    try:
        with open(path, newline="") as f:
            reader = csv.DictReader(f)
            missing = {"unit_id", "medianDown", "medianUp", "medianLatency",
                       "monthly.charge"} - set(reader.fieldnames or ())
            if missing:
                raise HouseholdError(f"{path}: missing columns "
                                     f"{', '.join(sorted(missing))}")
            out = {}
            for row in reader:
                household = parse_row(row)
                if household:
                    out[household.unit_id] = household
            return out
    except OSError as exc:
        raise HouseholdError(f"households.csv: cannot read {path}: "
                             f"{exc.strerror}") from None


def select_units(households, unit_ids):
    """The households with these unit ids, in the order given."""
    missing = [str(u) for u in unit_ids if str(u) not in households]
    if missing:
        raise HouseholdError(f"households.units: no usable row for unit_id "
                             f"{', '.join(missing)}")
    return [households[str(u)] for u in unit_ids]


def sample_per_group(households, per_group, seed, groups=None):
    """``per_group`` households from each price group in ``groups`` (label
    list, default all, in PRICE_GROUPS order), drawn without replacement
    with probability proportional to their sampling weight
    (Efraimidis-Spirakis keys), reproducibly from ``seed``. Each group
    draws from its own generator, seeded by ``seed`` and its label, so a
    group's households do not depend on which other groups are chosen.
    """
    labels = [label for label, _, _ in PRICE_GROUPS]
    wanted = labels if groups is None else list(groups)
    unknown = [g for g in wanted if g not in labels]
    if unknown:
        raise HouseholdError(f"households.groups: unknown price group "
                             f"{unknown[0]!r} (the groups: "
                             f"{', '.join(labels)})")
    chosen = []
    for label in (g for g in labels if g in wanted):
        rng = random.Random(f"{seed}:{label}")
        members = sorted((h for h in households.values() if h.group == label),
                         key=lambda h: h.unit_id)
        if len(members) < per_group:
            raise HouseholdError(f"households.per_group: group {label} has "
                                 f"only {len(members)} households")
        keyed = sorted(members, key=lambda h: rng.random() ** (
            1.0 / max(h.weight, 1e-9)), reverse=True)
        chosen += keyed[:per_group]
    return chosen


def link_profile(household, direction, buffer_bdp, cap_mbit):
    """Link keyword arguments for one direction of ``household``.

    "down" sends data towards the household (rate = down, ACKs at up);
    "up" the other way. Rates above ``cap_mbit`` are capped.
    """
    if direction not in DIRECTIONS:
        raise HouseholdError(f"households.directions: {direction!r} is not "
                             f"one of {', '.join(DIRECTIONS)}")
    data, acks = ((household.down_mbit, household.up_mbit)
                  if direction == "down"
                  else (household.up_mbit, household.down_mbit))
    return {"rate_mbit": round(min(data, cap_mbit), 3),
            "up_rate_mbit": round(min(acks, cap_mbit), 3),
            "rtt_ms": round(household.rtt_ms, 3), "buffer_bdp": buffer_bdp}
