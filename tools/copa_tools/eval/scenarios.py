# SPDX-License-Identifier: GPL-2.0
"""Scenario files: loading, overriding, validating and expanding into runs.

A scenario is a TOML file in scenario_files/ here (or any path). Every key
can be overridden from the command line with ``--set PATH=VALUE``, where
VALUE is a TOML value (``--set link.rate_mbit=20``,
``--set sweep.buffer_bdp=[1,4]``, ``--set flows.1.count=2``). The format
is documented in Documentation/evaluation.rst; in short:

    name = "bufferbloat"            # default: the file name
    description = "..."             # required
    kind = "sweep"                  # sweep | random_links | households
    variants = ["cubic", "bbr", "copa"]
    repeats = 1
    duration_s = 20
    measure_from_s = 0              # figures leave out the first seconds
    sample_ms = 100
    max_rate_mbit = 50              # faster links are refused (or capped)

    [link]                          # lab.Link keyword arguments
    rate_mbit = 12
    rtt_ms = 40

    [sweep]                         # every combination of these values
    buffer_bdp = [0.5, 1, 2]        # a Link field ...
    "flows.1.extra_rtt_ms" = [0, 40] # ... or a field of one flow template

    [[flows]]                       # flow templates
    cc = "variant"                  # the variant under test, or a fixed
    count = 1                       # algorithm such as "cubic"
    start_s = 0                     # optional: duration_s, extra_rtt_ms,
    stagger_s = 0                   # select, sysctls; copy k of a template
                                    # starts at start_s + k * stagger_s

    [[events]]                      # optional live changes
    t_s = 30
    action = "remove_policer"       # set_rate, set_rtt, set_loss,
    value = 0                       # set_buffer (bytes), set_policer (Mbit/s)

kind = "random_links" adds ``[random_links]`` (count, seed and [low, high]
ranges for rate_mbit, rtt_ms, buffer_bdp and optionally a policer:
policer_frac, its rate as a share of rate_mbit, and policer_burst in
bytes); kind = "households" adds
``[households]`` (csv, units or per_group + seed [+ groups], directions,
buffer_bdp).
"""

import copy
import itertools
import os
import random
import re
import tomllib
from dataclasses import dataclass, fields

from .. import paths
from . import households as hh
from .lab import FRAME_BYTES, Flow, Link, LinkError, SELECTS
from .lab.config import is_number
from .variants import ALGORITHMS, VariantError, parse_variants

SCENARIO_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                            "scenario_files")
KINDS = ("sweep", "random_links", "households")
LINK_FIELDS = tuple(f.name for f in fields(Link))
FLOW_FIELDS = {"cc", "count", "start_s", "stagger_s", "duration_s",
               "extra_rtt_ms", "select", "sysctls"}
EVENT_ACTIONS = ("set_rate", "set_rtt", "set_loss", "set_buffer",
                 "set_policer", "remove_policer")
# [random_links]: the [low, high] ranges, in the order each link draws
# them (a new range goes last, so that a seed keeps drawing the links it
# drew before), with the lowest allowed low and whether low may equal it,
# and the highest allowed high (None: none; "max_rate": max_rate_mbit).
# policer_frac is the policed rate's share of the link's drawn rate_mbit;
# the others are Link fields in the Link's units.
RANDOM_RANGES = {"rate_mbit": (0, False, "max_rate"),
                 "rtt_ms": (0, True, None),
                 "buffer_bdp": (0, False, None),
                 "policer_frac": (0, False, 1),
                 "policer_burst": (FRAME_BYTES, True, None)}
RANDOM_REQUIRED = ("rate_mbit", "rtt_ms", "buffer_bdp")
TOP_FIELDS = {"name", "description", "kind", "variants", "repeats",
              "duration_s", "measure_from_s", "sample_ms", "max_rate_mbit",
              "link", "sweep", "flows", "events", "random_links",
              "households"}


class ScenarioError(ValueError):
    """A scenario is invalid; the message names the scenario and field."""


@dataclass
class FlowTemplate:
    cc: str
    count: int = 1
    start_s: float = 0
    stagger_s: float = 0
    duration_s: float = None
    extra_rtt_ms: float = 0
    select: str = "setsockopt"
    sysctls: dict = None


@dataclass
class Case:
    """One link configuration (one point of a sweep, one household...)."""
    id: str
    params: dict        # what sets this case apart, for tables
    link: dict          # lab.Link keyword arguments
    flows: list         # FlowTemplates
    meta: dict          # e.g. household group, whether rates were capped


@dataclass
class Scenario:
    name: str
    description: str
    kind: str
    variants: list
    repeats: int
    duration_s: float
    sample_ms: int
    max_rate_mbit: float
    events: list
    cases: list
    raw: dict           # the resolved scenario, as recorded with results
    measure_from_s: float = 0   # warm-up left out of every figure


def scenario_path(name_or_path):
    """Resolve a scenario name (SCENARIO_DIR/NAME.toml) or a path."""
    if os.sep in name_or_path or name_or_path.endswith(".toml"):
        return name_or_path
    return os.path.join(SCENARIO_DIR, f"{name_or_path}.toml")


def available():
    """[(name, description)] of the scenarios shipped in SCENARIO_DIR
    (less the bench's sets, bench.toml and ablation.toml: [[runs]])."""
    out = []
    for entry in sorted(os.listdir(SCENARIO_DIR)):
        if entry.endswith(".toml"):
            with open(os.path.join(SCENARIO_DIR, entry), "rb") as f:
                data = tomllib.load(f)
            if "runs" not in data:
                out.append((entry[:-5], data.get("description", "")))
    return out


def parse_value(text):
    """A --set value: a TOML value if it parses as one, else a string."""
    try:
        return tomllib.loads(f"v = {text}")["v"]
    except tomllib.TOMLDecodeError:
        return text


def apply_override(data, assignment):
    """Apply one ``PATH=VALUE`` to the raw scenario dict ``data``."""
    path, eq, text = assignment.partition("=")
    if not eq or not path:
        raise ScenarioError(f"--set {assignment!r}: expected PATH=VALUE")
    parts = path.split(".")
    node = data
    for i, part in enumerate(parts[:-1]):
        if node is data.get("sweep") and node is not None:
            parts = parts[:i] + [".".join(parts[i:])]
            break
        if isinstance(node, list):
            if not part.isdigit() or int(part) >= len(node):
                raise ScenarioError(f"--set {path}: no list element {part}")
            node = node[int(part)]
        else:
            node = node.setdefault(part, {})
            if not isinstance(node, (dict, list)):
                raise ScenarioError(f"--set {path}: {part} is not a table")
    last = parts[-1]
    if isinstance(node, list):
        if not last.isdigit() or int(last) >= len(node):
            raise ScenarioError(f"--set {path}: no list element {last}")
        node[int(last)] = parse_value(text)
    else:
        node[last] = parse_value(text)


def load(name_or_path, overrides=(), variants=None, repeats=None):
    """Load, override and validate a scenario; ScenarioError if invalid."""
    path = scenario_path(name_or_path)
    try:
        with open(path, "rb") as f:
            data = tomllib.load(f)
    except FileNotFoundError:
        known = ", ".join(n for n, _ in available())
        raise ScenarioError(f"scenario {name_or_path!r}: no such file {path} "
                            f"(shipped scenarios: {known})") from None
    except tomllib.TOMLDecodeError as exc:
        raise ScenarioError(f"scenario {path}: not valid TOML: {exc}") \
            from None
    data.setdefault("name", os.path.basename(path).rsplit(".", 1)[0])
    for assignment in overrides:
        apply_override(data, assignment)
    if variants is not None:
        data["variants"] = list(variants)
    if repeats is not None:
        data["repeats"] = repeats
    return validate(data)


class _Checker:
    """Helpers that raise ScenarioError naming scenario and field."""

    def __init__(self, name):
        self.name = name

    def fail(self, where, message):
        raise ScenarioError(f"scenario {self.name}: {where}: {message}")

    def number(self, where, value, low=None, high=None, integer=False):
        kinds = (int,) if integer else (int, float)
        if isinstance(value, bool) or not isinstance(value, kinds):
            expected = "an integer" if integer else "a number"
            self.fail(where, f"expected {expected}, got {value!r}")
        if low is not None and value < low:
            self.fail(where, f"must be >= {low}, got {value}")
        if high is not None and value > high:
            self.fail(where, f"must be <= {high}, got {value}")
        return value

    def table(self, where, value):
        if not isinstance(value, dict):
            self.fail(where, f"expected a table, got {value!r}")
        return value

    def unknown(self, where, table, allowed):
        extra = sorted(set(table) - set(allowed))
        if extra:
            self.fail(f"{where}{extra[0]}", f"unknown field (allowed: "
                      f"{', '.join(sorted(allowed))})")

    def link(self, where, kwargs, max_rate):
        self.unknown(where, kwargs, LINK_FIELDS)
        try:
            link = Link(**kwargs)
        except LinkError as exc:
            self.fail(f"{where}{exc.field}", str(exc).split(": ", 1)[1])
        except TypeError as exc:
            self.fail(where.rstrip("."), str(exc))
        for field in ("rate_mbit", "up_rate_mbit", "policer_mbit"):
            value = getattr(link, field)
            if value is not None and value > max_rate:
                self.fail(f"{where}{field}", f"{value} Mbit/s is above "
                          f"max_rate_mbit = {max_rate}, the fastest link the "
                          f"emulation reproduces faithfully")
        return link


def validate(data):
    """Check a raw scenario dict and expand it into a Scenario."""
    name = data.get("name")
    if not isinstance(name, str) or not re.fullmatch(r"[A-Za-z0-9_.-]+",
                                                     name):
        raise ScenarioError(f"scenario: name must be letters, digits, '_', "
                            f"'-' or '.', got {name!r}")
    chk = _Checker(name)
    chk.unknown("", data, TOP_FIELDS)
    if not isinstance(data.get("description"), str) or \
            not data["description"].strip():
        chk.fail("description", "a one-line description is required")
    kind = data.get("kind", "sweep")
    if kind not in KINDS:
        chk.fail("kind", f"must be one of {', '.join(KINDS)}, got {kind!r}")
    try:
        variants = parse_variants(data.get("variants",
                                           ["cubic", "bbr", "copa"]))
    except VariantError as exc:
        chk.fail("variants", str(exc))
    repeats = chk.number("repeats", data.get("repeats", 1), 1, 100, True)
    duration = chk.number("duration_s", data.get("duration_s", 20), 1, 3600)
    measure_from = chk.number("measure_from_s", data.get("measure_from_s", 0),
                              0)
    if measure_from >= duration:
        chk.fail("measure_from_s", f"must be below duration_s = {duration} "
                 f"(it leaves out the first seconds of each run), got "
                 f"{measure_from}")
    sample_ms = chk.number("sample_ms", data.get("sample_ms", 100), 10,
                           10000, True)
    max_rate = chk.number("max_rate_mbit", data.get("max_rate_mbit", 50),
                          0.001)
    templates = _flow_templates(chk, data.get("flows", [{"cc": "variant"}]),
                                duration)
    events = _events(chk, data.get("events", []), duration)
    base = dict(chk.table("link", data.get("link", {})))
    builders = {"sweep": _sweep_cases, "random_links": _random_cases,
                "households": _household_cases}
    cases = builders[kind](chk, data, base, templates, max_rate)
    for case in cases:
        chk.link(f"case {case.id}: link.", case.link, max_rate)
        _check_flows(chk, case, duration, measure_from)
    return Scenario(name=name, description=data["description"].strip(),
                    kind=kind, variants=variants, repeats=repeats,
                    duration_s=duration, sample_ms=sample_ms,
                    max_rate_mbit=max_rate, events=events, cases=cases,
                    raw=data, measure_from_s=measure_from)


def _flow_templates(chk, raw, duration):
    if not isinstance(raw, list) or not raw:
        chk.fail("flows", "expected a non-empty list of [[flows]] tables")
    templates = []
    for i, entry in enumerate(raw):
        where = f"flows.{i}."
        chk.table(where.rstrip("."), entry)
        chk.unknown(where, entry, FLOW_FIELDS)
        cc = entry.get("cc")
        if cc != "variant" and cc not in ALGORITHMS:
            chk.fail(f"{where}cc", f"must be 'variant' or one of "
                     f"{', '.join(ALGORITHMS)}, got {cc!r}")
        chk.number(f"{where}count", entry.get("count", 1), 1, 64, True)
        for key in ("start_s", "stagger_s", "extra_rtt_ms"):
            chk.number(f"{where}{key}", entry.get(key, 0), 0)
        if entry.get("duration_s") is not None:
            chk.number(f"{where}duration_s", entry["duration_s"], 0.001)
        if entry.get("select", "setsockopt") not in SELECTS:
            chk.fail(f"{where}select", f"must be one of {', '.join(SELECTS)}"
                     f", got {entry['select']!r}")
        chk.table(f"{where}sysctls", entry.get("sysctls", {}))
        templates.append(FlowTemplate(**entry))
    return templates


def _events(chk, raw, duration):
    if not isinstance(raw, list):
        chk.fail("events", "expected a list of [[events]] tables")
    for i, event in enumerate(raw):
        where = f"events.{i}."
        chk.table(where.rstrip("."), event)
        chk.unknown(where, event, {"t_s", "action", "value"})
        chk.number(f"{where}t_s", event.get("t_s"), 0, duration)
        if event.get("action") not in EVENT_ACTIONS:
            chk.fail(f"{where}action", f"must be one of "
                     f"{', '.join(EVENT_ACTIONS)}, got "
                     f"{event.get('action')!r}")
        if event["action"] != "remove_policer":
            chk.number(f"{where}value", event.get("value"), 0)
    return raw


def _sweep_cases(chk, data, base, templates, max_rate):
    sweep = chk.table("sweep", data.get("sweep", {}))
    keys = list(sweep)
    for key in keys:
        if not isinstance(sweep[key], list) or not sweep[key]:
            chk.fail(f"sweep.{key}", "expected a non-empty list of values")
        flow_key = re.fullmatch(r"flows\.(\d+)\.(\w+)", key)
        if flow_key:
            if int(flow_key[1]) >= len(templates) or flow_key[2] not in \
                    FLOW_FIELDS - {"cc", "sysctls"}:
                chk.fail(f"sweep.{key}", "no such flow template field")
        elif key not in LINK_FIELDS:
            chk.fail(f"sweep.{key}", "neither a link field ("
                     + ", ".join(LINK_FIELDS) + ") nor flows.N.FIELD")
    cases = []
    for values in itertools.product(*(sweep[k] for k in keys)):
        params = dict(zip(keys, values))
        link = dict(base)
        flows = copy.deepcopy(templates)
        for key, value in params.items():
            if key.startswith("flows."):
                _, index, field = key.split(".")
                setattr(flows[int(index)], field, value)
            else:
                link[key] = value
        case_id = ",".join(f"{k}={v}" for k, v in params.items()) or "base"
        cases.append(Case(id=case_id, params=params, link=link, flows=flows,
                          meta={}))
    return cases


def _random_cases(chk, data, base, templates, max_rate):
    spec = chk.table("random_links", data.get("random_links", {}))
    chk.unknown("random_links.", spec, {"count", "seed", *RANDOM_RANGES})
    count = chk.number("random_links.count", spec.get("count", 3), 1, 1000,
                       True)
    seed = chk.number("random_links.seed", spec.get("seed", 1),
                      integer=True)
    rng = random.Random(seed)
    ranges = {key: _random_range(chk, key, spec.get(key), max_rate)
              for key in RANDOM_RANGES
              if key in RANDOM_REQUIRED or key in spec}
    if "policer_frac" in ranges and base.get("policer_mbit") is not None:
        chk.fail("random_links.policer_frac", f"link.policer_mbit fixes the "
                 f"policer at {base['policer_mbit']} Mbit/s: draw it or fix "
                 f"it, not both")
    if "policer_burst" in ranges and "policer_frac" not in ranges and \
            base.get("policer_mbit") is None:
        chk.fail("random_links.policer_burst", "a burst without a policer: "
                 "give policer_frac (or link.policer_mbit) too")
    cases = []
    for k in range(count):
        drawn = {key: round(rng.uniform(*pair), 2)
                 for key, pair in ranges.items()}
        if "policer_burst" in drawn:
            drawn["policer_burst"] = int(round(drawn["policer_burst"]))
        link = dict(base, **drawn)
        if "policer_frac" in drawn:
            link["policer_mbit"] = drawn["policer_mbit"] = round(
                link.pop("policer_frac") * drawn["rate_mbit"], 2)
        cases.append(Case(id=f"link{k}", params=drawn, link=link,
                          flows=copy.deepcopy(templates),
                          meta={"seed": seed}))
    return cases


def _random_range(chk, key, pair, max_rate):
    """One [low, high] of [random_links], checked against RANDOM_RANGES."""
    where = f"random_links.{key}"
    floor, floor_allowed, ceiling = RANDOM_RANGES[key]
    if ceiling == "max_rate":
        ceiling = max_rate
    if not (isinstance(pair, list) and len(pair) == 2
            and all(is_number(v) for v in pair)):
        chk.fail(where, f"expected [low, high], two numbers, got {pair!r}")
    low, high = pair
    if low > high:
        chk.fail(where, f"low {low} is above high {high}")
    if low < floor or (low == floor and not floor_allowed):
        chk.fail(where, f"low must be {'>=' if floor_allowed else '>'} "
                 f"{floor}, got {low}")
    if ceiling is not None and high > ceiling:
        why = {"rate_mbit": " (max_rate_mbit, the fastest link the "
               "emulation reproduces faithfully)",
               "policer_frac": " (a share of the link's rate_mbit)"}
        chk.fail(where, f"high must be <= {ceiling}{why.get(key, '')}, "
                 f"got {high}")
    return pair


def _household_cases(chk, data, base, templates, max_rate):
    spec = chk.table("households", data.get("households", {}))
    chk.unknown("households.", spec, {"csv", "units", "per_group", "seed",
                                      "groups", "directions", "buffer_bdp"})
    csv_path = spec.get("csv", "data/digitaldivide/"
                        "household-internet-data.csv")
    if not os.path.isabs(csv_path):
        csv_path = os.path.normpath(paths.data(csv_path))
    directions = spec.get("directions", list(hh.DIRECTIONS))
    if not isinstance(directions, list) or not directions or any(
            d not in hh.DIRECTIONS for d in directions):
        chk.fail("households.directions", f"expected a list of "
                 f"{' and '.join(hh.DIRECTIONS)}, got {directions!r}")
    buffer_bdp = chk.number("households.buffer_bdp",
                            spec.get("buffer_bdp", 2), 0.01)
    units = spec.get("units", [])
    if not isinstance(units, list) or any(
            isinstance(u, bool) or not isinstance(u, (int, str))
            for u in units):
        chk.fail("households.units", f"expected a list of unit ids, got "
                 f"{units!r}")
    groups = _household_groups(chk, spec.get("groups"))
    if units and "groups" in spec:
        chk.fail("households.groups", "select households either by units "
                 "or by groups (with per_group and seed), not both; set "
                 "units = [] to sample from groups")
    per_group = chk.number("households.per_group", spec.get("per_group", 2),
                           1, 100, True)
    seed = chk.number("households.seed", spec.get("seed", 1),
                      integer=True)
    try:
        table = hh.load(csv_path)
        if units:
            chosen = hh.select_units(table, units)
        else:
            chosen = hh.sample_per_group(table, per_group, seed, groups)
    except hh.HouseholdError as exc:
        chk.fail("households", str(exc))
    cases = []
    for house in chosen:
        for direction in directions:
            link = dict(base, **hh.link_profile(house, direction, buffer_bdp,
                                                max_rate))
            raw_rate = house.down_mbit if direction == "down" \
                else house.up_mbit
            cases.append(Case(
                id=f"unit{house.unit_id}-{direction}",
                params={"unit_id": house.unit_id, "direction": direction},
                link=link, flows=copy.deepcopy(templates),
                meta={"group": house.group, "direction": direction,
                      "measured_rate_mbit": round(raw_rate, 3),
                      "capped": raw_rate > max_rate,
                      "monthly_charge": house.monthly_charge,
                      "technology": house.technology, "isp": house.isp}))
    return cases


def _household_groups(chk, groups):
    """The price groups to sample from: every group by default."""
    labels = [label for label, _, _ in hh.PRICE_GROUPS]
    if groups is None:
        return labels
    if not isinstance(groups, list) or not groups:
        chk.fail("households.groups", f"expected a non-empty list of price "
                 f"groups ({', '.join(map(repr, labels))}), got {groups!r}")
    for group in groups:
        if group not in labels:
            chk.fail("households.groups", f"unknown price group {group!r} "
                     f"(the groups: {', '.join(map(repr, labels))})")
        if groups.count(group) > 1:
            chk.fail("households.groups", f"{group!r} is listed twice")
    return list(groups)


def _check_flows(chk, case, duration, measure_from=0):
    for i, tpl in enumerate(case.flows):
        last_start = tpl.start_s + (tpl.count - 1) * tpl.stagger_s
        if last_start >= duration:
            chk.fail(f"case {case.id}: flows.{i}.start_s", f"the last copy "
                     f"starts at {last_start} s, not before duration_s = "
                     f"{duration}")
        if tpl.duration_s is not None and \
                last_start + tpl.duration_s > duration:
            chk.fail(f"case {case.id}: flows.{i}.duration_s", f"the last "
                     f"copy ends at {last_start + tpl.duration_s} s, after "
                     f"duration_s = {duration}")
        first_end = tpl.start_s + (tpl.duration_s if tpl.duration_s
                                   is not None else duration - tpl.start_s)
        if measure_from and first_end <= measure_from:
            chk.fail(f"case {case.id}: flows.{i}.duration_s", f"the first "
                     f"copy ends at {first_end} s, before measure_from_s = "
                     f"{measure_from}: nothing of it would be measured")
    if sum(t.count for t in case.flows) > 16:
        chk.fail(f"case {case.id}: flows", "more than 16 flows do not run "
                 "faithfully in the 2-vCPU VM")


def build_flows(templates, variant):
    """lab.Flow list and roles ("variant"/"competitor") for one variant."""
    flows, roles = [], []
    for tpl in templates:
        for k in range(tpl.count):
            if tpl.cc == "variant":
                cc, sysctls, role = variant.cc, dict(variant.sysctls), \
                    "variant"
            else:
                cc, sysctls, role = tpl.cc, {}, "competitor"
            sysctls.update(tpl.sysctls or {})
            flows.append(Flow(cc, start_s=tpl.start_s + k * tpl.stagger_s,
                              duration_s=tpl.duration_s,
                              extra_rtt_ms=tpl.extra_rtt_ms,
                              sysctls=sysctls, select=tpl.select))
            roles.append(role)
    return flows, roles
