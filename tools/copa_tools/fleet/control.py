# SPDX-License-Identifier: GPL-2.0
"""copa-fleet control: the congestion control and Copa's delta per client
prefix, chosen every round from the records (issue 35).

    copa-fleet control [--dry-run | --once] [--state-dir DIR] ...
    copa-fleet control --reset [PREFIX...]      # the kill switch
    copa-fleet control --resume

A round reads the last hours of records through queries.py (chDB over
the state directory's files, or a ClickHouse server), measures each
prefix on the connections that acked at least --min-bytes, applies its
rules (enter_rule, leave_rule) with hysteresis (decide), validates the
plan and applies it one prefix at a time through a Backend: the
copa_prefix LPM map of the sock_ops program (copa-bpf's code) or routes
with ``congctl``. Every
change is written to the audit log (JSON lines, fsync'd) before it is
applied, and the state after it (written whole, renamed). One controller
runs per state directory (flock). Documentation/fleet.rst, "Controller",
is the operator's guide; it explains each rule and threshold.
"""

import argparse
import fcntl
import ipaddress
import json
import math
import os
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field

from .. import params as copa_params
from ..files import write_atomic
from . import ab, queries, schema, store

DEFAULT = "default"             # the host's congestion control
CCS = ("copa", "copa_policer", "bbr", "cubic")
STATE = "control-state.json"
AUDIT = "control-audit.jsonl"
REPORT = "control-report.md"
LOCK = "control.lock"           # held by the controller for its life
ROUND_LOCK = "control-round.lock"   # held while a round or a reset applies
PAUSED = "control-paused"       # written by --reset, removed by --resume
DELTA = copa_params.load().tunables["tcp_copa"]["delta"]


class ControlError(RuntimeError):
    """The controller cannot run or apply: said once, nothing changed."""


@dataclass(frozen=True)
class Policy:
    """What a prefix runs: cc one of DEFAULT or CCS; delta in thousandths
    (Copa's), None for the host's."""
    cc: str = DEFAULT
    delta: int = None

    def __str__(self):
        if self.delta is None:
            return self.cc
        return f"{self.cc} delta={self.delta / 1000:g}"


HOST_DEFAULT = Policy()


@dataclass
class Config:
    """The thresholds; Documentation/fleet.rst explains each."""
    hours: float = 3.0
    interval_s: float = 300.0
    min_bytes: int = 100_000
    min_connections: int = 20
    max_age_s: float = 600.0
    duty_metric: str = "delivery_rate"
    duty_percentile: float = 0.2
    bloat_enter: float = 1.0        # queueing delay / base RTT
    bloat_min_ms: float = 10.0      # ... and at least this many ms
    low_delay: float = 0.2          # queueing delay / base RTT
    policed_enter: float = 0.03     # retransmission overhead
    lossy_enter: float = 0.005
    slow_mbps: float = 10.0
    deltas: tuple = (100, 200, 500, 800)
    delta_slow: int = 500
    delta_fast: int = 100
    max_rate_loss: float = 0.05
    min_rtt_gain: float = 0.1
    leave_alpha: float = 0.1        # a leave needs a 1 - alpha/2 bound
    confirm_rounds: int = 2
    min_hold_s: float = 900.0
    cooldown_s: float = 86400.0
    max_changes: int = 20

    def check(self):
        for name in ("delta_slow", "delta_fast"):
            if getattr(self, name) not in self.deltas:
                raise ControlError(f"{name} {getattr(self, name) / 1000:g} "
                                   f"is not one of --deltas")
        for d in self.deltas:
            if not DELTA.min <= d <= DELTA.max:
                raise ControlError(
                    f"delta {d / 1000:g} outside tcp_copa_params.h's "
                    f"{DELTA.min / 1000:g} to {DELTA.max / 1000:g}")
        if self.duty_metric not in queries.DUTY_METRICS:
            raise ControlError(f"duty metric {self.duty_metric!r}: one of "
                               f"{sorted(queries.DUTY_METRICS)}")
        if list(self.deltas) != sorted(set(self.deltas)):
            raise ControlError("--deltas must increase")
        if not 0 < self.leave_alpha < 1:
            raise ControlError(f"--leave-alpha {self.leave_alpha:g}: "
                               "between 0 and 1")


# ---------------------------------------------------------------------------
# Measuring

@dataclass
class Numbers:
    """One prefix under one cc and delta, over the lookback."""
    connections: int = 0
    rate_p50: float = None          # bit/s
    rate_p10: float = None
    srtt_p50: float = None          # us
    srtt_p90: float = None
    base_rtt: float = None          # min_rtt at p10, us
    retrans: float = None           # bytes retransmitted / acked
    cc: str = None                  # the group: its cc as recorded ...
    delta: int = None               # ... and delta, thousandths

    @property
    def qdelay_ms(self):
        if self.srtt_p50 is None or self.base_rtt is None:
            return None
        return max(self.srtt_p50 - self.base_rtt, 0) / 1000

    @property
    def qdelay_ratio(self):
        q = self.qdelay_ms
        return None if q is None or not self.base_rtt \
            else q * 1000 / self.base_rtt

    def brief(self):
        """The numbers a rule reads, rounded for the report and audit."""
        def r(v, scale=1, digits=3):
            return None if v is None else float(f"{v / scale:.{digits}g}")
        return {"connections": self.connections,
                "rate_p50_mbps": r(self.rate_p50, 1e6),
                "rate_p10_mbps": r(self.rate_p10, 1e6),
                "srtt_p90_ms": r(self.srtt_p90, 1e3),
                "qdelay_ms": r(self.qdelay_ms),
                "qdelay_ratio": r(self.qdelay_ratio),
                "retrans": r(self.retrans)}


@dataclass
class Prefix:
    """What a round knows of one prefix: Numbers per (cc, delta), the
    duty cycle and flap rate of its windows."""
    groups: dict = field(default_factory=dict)
    duty: float = 0.0
    flap: float = 0.0
    windows: int = 0

    def under(self, cc, delta=None):
        """The Numbers of ``cc`` (at ``delta``; any delta for None: the
        group with the most connections), or an empty one."""
        cands = [n for (c, d), n in self.groups.items()
                 if c == cc and (delta is None or d == delta)]
        return max(cands, key=lambda n: n.connections, default=Numbers())


def _num(v):
    if v is None:
        return None
    v = float(v)
    return None if math.isnan(v) else v


def measure(engine, source, now, cfg):
    """({prefix: Prefix}, newest record's time) from the records of the
    last cfg.hours."""
    start = now - cfg.hours * 3600
    prefixes = {}
    newest = 0
    for r in engine.rows(queries.control_groups(source, start, now + 1,
                                                cfg.min_bytes)):
        d = _num(r["delta_key"])
        key = (r["cc"], None if d < 0 else round(d * 1000))
        rate = [_num(x) for x in r["rate_q"]] if int(r["rate_records"]) \
            else [None, None]
        srtt = [_num(x) for x in r["srtt_q"]]
        prefixes.setdefault(r["peer_prefix"], Prefix()).groups[key] = \
            Numbers(int(r["connections"]), rate[0], rate[1], srtt[0],
                    srtt[1], _num(r["base_rtt_q"][0]), cc=key[0],
                    delta=key[1])
    for r in engine.rows(queries.control_retrans(source, start, now + 1,
                                                 cfg.min_bytes)):
        d = _num(r["delta_key"])
        key = (r["cc"], None if d < 0 else round(d * 1000))
        p = prefixes.get(r["peer_prefix"])
        if p and key in p.groups:
            p.groups[key].retrans = _num(r["retrans_overhead"])
    rows = engine.rows(queries.control_windows(
        source, cfg.interval_s, start, now + 1, cfg.min_bytes,
        cfg.duty_metric))
    for r in rows:
        newest = max(newest, int(r["newest"]))
    for prefix, (duty, flap, n) in duty_cycles(rows, cfg).items():
        if prefix in prefixes:
            p = prefixes[prefix]
            p.duty, p.flap, p.windows = duty, flap, n
    return prefixes, newest


def duty_cycles(rows, cfg):
    """Edgio's scores, {prefix: (duty cycle, flap rate, windows)}: per
    window, the prefixes at or past the cfg.duty_percentile of the
    metric (the low end of delivery rate, the high end of srtt) are in
    the poor group; the duty cycle is the share of a prefix's windows in
    it, the flap rate the share of its window changes that entered or
    left it."""
    low_is_poor = queries.DUTY_METRICS[cfg.duty_metric][2]
    by_window = {}
    for r in rows:
        if int(r["samples"]) and _num(r["value"]) is not None:
            by_window.setdefault(int(r["window_start"]), {})[
                r["peer_prefix"]] = _num(r["value"])
    marks = {}
    for w in sorted(by_window):
        vals = sorted(by_window[w].values(), reverse=not low_is_poor)
        cut = vals[max(math.ceil(cfg.duty_percentile * len(vals)) - 1, 0)]
        for prefix, v in by_window[w].items():
            poor = v <= cut if low_is_poor else v >= cut
            marks.setdefault(prefix, []).append(poor)
    out = {}
    for prefix, m in marks.items():
        flips = sum(a != b for a, b in zip(m, m[1:]))
        out[prefix] = (sum(m) / len(m), flips / max(len(m) - 1, 1), len(m))
    return out


# ---------------------------------------------------------------------------
# Deciding

@dataclass
class Decision:
    prefix: str
    current: Policy
    target: Policy
    rule: str
    why: str
    numbers: dict
    note: str = ""
    priority: float = 0.0

    @property
    def change(self):
        return self.target != self.current


def _pct(v):
    return "-" if v is None else f"{100 * v:.2g}%"


PATH_SIGNS = ("policed", "bloated", "lossy")     # enter_rule's order


def path_signs(n, cfg):
    """The entry rules whose condition on the path holds for ``n``
    (Numbers), in PATH_SIGNS' order: [(rule, why)]. None without the
    numbers the rules read."""
    ratio, q, retrans = n.qdelay_ratio, n.qdelay_ms, n.retrans
    if ratio is None or retrans is None or n.rate_p50 is None:
        return None
    low = f"at queueing delay {ratio:.2f} <= {cfg.low_delay:g} x base RTT"
    signs = []
    if retrans >= cfg.policed_enter and ratio <= cfg.low_delay:
        signs.append(("policed", f"retransmitted {_pct(retrans)} >= "
                      f"{_pct(cfg.policed_enter)} {low}"))
    if ratio >= cfg.bloat_enter and q >= cfg.bloat_min_ms:
        signs.append(("bloated", f"queueing delay {q:.3g} ms = "
                      f"{ratio:.2f} >= {cfg.bloat_enter:g} x base RTT"))
    if retrans >= cfg.lossy_enter and ratio <= cfg.low_delay:
        signs.append(("lossy", f"retransmitted {_pct(retrans)} >= "
                      f"{_pct(cfg.lossy_enter)} {low}"))
    return signs


def enter_rule(n, cfg, available):
    """The first rule of path_signs() that holds for ``n`` (Numbers under
    the host default) and whose cc the host has (``available``): (rule,
    Policy, why), or None."""
    for rule, why in path_signs(n, cfg) or ():
        if rule == "policed":
            cc = next((c for c in ("copa_policer", "bbr")
                       if c in available), None)
            if cc:
                return (rule, Policy(cc), why)
        elif "copa" in available:
            slow = n.rate_p50 < cfg.slow_mbps * 1e6
            delta = cfg.delta_slow if slow else cfg.delta_fast
            return (rule, Policy("copa", delta),
                    f"{why}; median rate {n.rate_p50 / 1e6:.3g} Mbit/s "
                    f"{'<' if slow else '>='} {cfg.slow_mbps:g}")
    return None


class Evidence:
    """The records of one prefix's group (Numbers ``n``) over the
    lookback, for the leave rules: the far end of a metric's 1 -
    cfg.leave_alpha bootstrap interval that resamples the group's
    connections (stats.interval), queried only when a rule asks."""

    METRICS = {"rate_p50": ("rate", 0.5), "srtt_p90": ("srtt", 0.9)}

    def __init__(self, engine, source, prefix, n, start, end, cfg):
        self.query = (source, prefix, n.cc, n.delta, start, end,
                      cfg.min_bytes)
        self.engine, self.alpha = engine, cfg.leave_alpha
        self.recs = self.conns = None
        self.bounds = {}

    def _rows(self, make):
        rows = self.engine.rows(make(*self.query))
        return rows, [(r["host"], int(r["cookie"])) for r in rows]

    def _statistic(self, stats, metric):
        if metric == "retrans":
            if self.conns is None:
                self.conns = self._rows(queries.group_connections)
            rows, clusters = self.conns
            return stats.Ratio([float(r["retrans"]) for r in rows],
                               [float(r["acked"]) for r in rows], clusters)
        if self.recs is None:
            self.recs = self._rows(queries.group_records)
        rows, clusters = self.recs
        column, q = self.METRICS[metric]
        ok = [i for i, r in enumerate(rows) if int(r[f"{column}_ok"])]
        return stats.Quantiles([float(rows[i][column]) for i in ok],
                               [clusters[i] for i in ok], (q,))

    def bound(self, metric, side):
        """The ``side`` ("low" or "high") end of ``metric``'s interval
        (rate_p50 and srtt_p90 in Numbers' units, retrans), or None
        where fewer than two connections have a value."""
        # stats needs scipy's bootstrap (the fleet extra), imported only
        # by a round that has a leave to judge.
        from . import stats
        if (metric, side) not in self.bounds:
            statistic = self._statistic(stats, metric)
            self.bounds[metric, side] = None if statistic.n_clusters < 2 \
                else float(stats.interval(statistic, self.alpha,
                                          rng=0)[side][0])
        return self.bounds[metric, side]


def leave_rule(rule, n, base, cfg, evidence):
    """Why a prefix under ``rule``'s policy should leave it, from its
    Numbers ``n`` against ``base`` (the host default's at entry), or
    None: the policy costs delivery rate, or does not deliver what it
    was chosen for. A rule that holds on the point estimate acts only if
    it also holds at the far end of the estimate's interval
    (``evidence``, an Evidence): a few connections' median moves by more
    than --max-rate-loss from round to round."""
    def mbps(v):
        return f"{v / 1e6:.3g} Mbit/s"

    def ms(v):
        return f"{v / 1e3:.3g} ms"

    checks = []     # (kind, metric, side, name, value, limit, fmt, entry)
    if base.get("rate_p50"):
        keep = 1 - cfg.max_rate_loss
        checks.append(("rate", "rate_p50", "high", "median rate",
                       n.rate_p50, keep * base["rate_p50"], mbps,
                       f"{keep:g} x {mbps(base['rate_p50'])}"))
    if rule == "bloated" and base.get("srtt_p90"):
        keep = 1 - cfg.min_rtt_gain
        checks.append(("useless", "srtt_p90", "low", "srtt p90",
                       n.srtt_p90, keep * base["srtt_p90"], ms,
                       f"{keep:g} x {ms(base['srtt_p90'])}"))
    if rule == "policed" and base.get("retrans") is not None:
        checks.append(("useless", "retrans", "low", "retransmitted",
                       n.retrans, base["retrans"], _pct,
                       _pct(base["retrans"])))
    conf = f"{100 * (1 - cfg.leave_alpha / 2):g}%"
    for kind, metric, side, name, value, limit, fmt, entry in checks:
        def past(v):
            return v is not None and (v < limit if side == "high"
                                      else v > limit)
        if past(value) and past(bound := evidence.bound(metric, side)):
            return kind, (f"{name} {fmt(value)} ("
                          f"{'at most' if side == 'high' else 'at least'} "
                          f"{fmt(bound)} at {conf}) "
                          f"{'<' if side == 'high' else '>'} {entry} at "
                          "entry")
    return None


def _rung(cfg, delta, step):
    i = cfg.deltas.index(delta) + step if delta in cfg.deltas else -1
    return cfg.deltas[i] if 0 <= i < len(cfg.deltas) else None


def decide(prefix, data, entry, cfg, now, host, per_prefix_delta,
           evidence):
    """The Decision for ``prefix``: ``data`` its Prefix, ``entry`` its
    state (a dict, updated with candidates and entry numbers), ``host``
    the default cc's name and the ccs available {policy cc: name},
    ``evidence`` a function of (prefix, Numbers) giving the group's
    Evidence."""
    current = Policy(**entry.get("policy", asdict(HOST_DEFAULT)))
    default_cc, names = host
    keep = Decision(prefix, current, current, entry.get("rule", ""), "",
                    {})
    if current == HOST_DEFAULT:
        n = data.under(default_cc)
        keep.numbers = n.brief()
        keep.numbers.update(duty=round(data.duty, 3),
                            flap=round(data.flap, 3))
        if n.connections < cfg.min_connections:
            keep.why = (f"{n.connections} connections of {default_cc} over"
                        f" {cfg.min_bytes} B < {cfg.min_connections}")
            entry.pop("candidate", None)
            return keep
        hit = enter_rule(n, cfg, names)
        if hit is None:
            keep.rule, keep.why = "clean", "no rule's entry holds"
            entry.pop("candidate", None)
            return keep
        rule, target, why = hit
        if target.delta is not None and not per_prefix_delta:
            target = Policy(target.cc)
        keep.rule, keep.why = rule, why
        blocked = entry.get("blocked", {}).get(rule, 0)
        if blocked > now:
            keep.note = (f"{rule} left at {_iso(blocked - cfg.cooldown_s)}"
                         f": blocked until {_iso(blocked)}")
            return keep
        cand = entry.get("candidate") or {}
        seen = cand.get("rounds", 0) + 1 \
            if cand.get("policy") == asdict(target) else 1
        entry["candidate"] = {"policy": asdict(target), "rule": rule,
                              "rounds": seen, "baseline": {
                                  "rate_p50": n.rate_p50,
                                  "rate_p10": n.rate_p10,
                                  "srtt_p90": n.srtt_p90,
                                  "retrans": n.retrans}}
        if seen < cfg.confirm_rounds:
            keep.note = f"seen {seen} of {cfg.confirm_rounds} rounds"
            return keep
        return Decision(prefix, current, target, rule, why, keep.numbers,
                        priority=1 + data.duty * (1 - data.flap))
    # In a policy: judge it on its own records against its entry numbers.
    rule = entry.get("rule", "")
    n = data.under(names.get(current.cc, current.cc),
                   current.delta if per_prefix_delta else None)
    keep.numbers = n.brief()
    keep.numbers.update(duty=round(data.duty, 3), flap=round(data.flap, 3))
    held = now - entry.get("since", 0)
    if held < cfg.min_hold_s:
        keep.why = f"held {held:.0f} s < {cfg.min_hold_s:g} s"
        return keep
    if n.connections < cfg.min_connections:
        keep.why = (f"{n.connections} connections under {current} < "
                    f"{cfg.min_connections}")
        return keep
    base = entry.get("baseline", {})
    out = leave_rule(rule, n, base, cfg, evidence(prefix, n))
    if out:
        kind, why = out
        lower = _rung(cfg, current.delta, -1) if kind == "rate" and \
            current.delta is not None else None
        if lower is not None:
            entry["ceiling"] = lower
            return Decision(prefix, current, Policy(current.cc, lower),
                            rule, f"{why}: a smaller delta", keep.numbers,
                            priority=3)
        return Decision(prefix, current, HOST_DEFAULT, rule,
                        f"{why}: back to the host default", keep.numbers,
                        priority=3)
    higher = _rung(cfg, current.delta, 1) if rule == "bloated" and \
        current.delta is not None else None
    if higher is not None and higher <= entry.get("ceiling", higher) and \
            n.qdelay_ratio is not None and \
            n.qdelay_ratio >= cfg.bloat_enter and \
            n.qdelay_ms >= cfg.bloat_min_ms:
        return Decision(prefix, current, Policy(current.cc, higher), rule,
                        f"queueing delay {n.qdelay_ms:.3g} ms = "
                        f"{n.qdelay_ratio:.2f} x base RTT under {current}:"
                        " a larger delta", keep.numbers, priority=2)
    keep.why = "holding: no leave rule holds"
    return keep


def _iso(t):
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t))


# ---------------------------------------------------------------------------
# Validating

def overlaps(net, others):
    """The prefixes of ``others`` ({prefix: network}) that contain or are
    inside ``net``, other than itself."""
    return sorted(p for p, n in others.items() if n != net
                  and n.version == net.version
                  and (n.subnet_of(net) or net.subnet_of(n)))


def refusal(d, names, cfg):
    """Why ``d``'s change is refused on its own, or None."""
    t, c = d.target, d.current
    try:
        net = ipaddress.ip_network(d.prefix)
    except ValueError as err:
        return f"not a prefix: {err}"
    if str(net) != d.prefix:
        return f"not in canonical form (use {net})"
    if t.cc != DEFAULT and t.cc not in names:
        return f"{t.cc} is not available on this host"
    if t.delta is not None and (t.delta not in cfg.deltas or
                                not DELTA.min <= t.delta <= DELTA.max):
        return f"delta {t.delta / 1000:g} not allowed"
    if t.cc != DEFAULT and c.cc != DEFAULT:
        if t.cc != c.cc:
            return f"{c} to {t}: go through the host default"
        if c.delta is not None and t.delta is not None and \
                abs(cfg.deltas.index(t.delta)
                    - cfg.deltas.index(c.delta)) > 1:
            return "delta moves more than one rung"
    return None


def validate(decisions, applied, owned, capacity, names, cfg, scope=()):
    """Split the changes of ``decisions`` into (accepted, refused), each
    refusal with its reason in .note, highest priority first: refusal()'s
    reasons, a prefix in or over a running A/B experiment's ``scope``
    (its arms override any policy there), past the cap on changes
    (deferred), an entry of the operator's on the prefix, an overlap with
    an entry of another policy (the operator's, or the controller's), or
    past the map's capacity. ``applied``: the backend's entries, {prefix:
    Policy}; ``owned``: the prefixes the controller put there. Overlaps
    are looked for only for changes within the cap: a round costs
    max_changes times the map's entries."""
    accepted, refused = [], []
    count = len(applied)
    nets = {p: ipaddress.ip_network(p) for p in applied}
    scope = {p: ipaddress.ip_network(p) for p in scope}
    for d in sorted((d for d in decisions if d.change),
                    key=lambda d: -d.priority):
        t, c = d.target, d.current
        why = refusal(d, names, cfg)
        if why is None and scope:
            net = ipaddress.ip_network(d.prefix)
            under = [p for p, n in scope.items() if n == net] + \
                overlaps(net, scope)
            if under:
                why = f"in the A/B experiment's scope ({', '.join(under)})"
        if why is None and len(accepted) >= cfg.max_changes:
            why = f"deferred: {cfg.max_changes} changes this round"
        if why is None and d.prefix in applied and d.prefix not in owned:
            why = "the operator's entry"
        if why is None and t != HOST_DEFAULT:
            near = [p for p in overlaps(ipaddress.ip_network(d.prefix), nets)
                    if p not in owned or applied[p] != t]
            if near:
                why = f"overlaps {', '.join(near)}"
        adds = 1 if c == HOST_DEFAULT and t != HOST_DEFAULT else \
            -1 if t == HOST_DEFAULT else 0
        if why is None and capacity is not None and count + adds > capacity:
            why = f"map full: {count} of {capacity} entries"
        if why:
            d.note = why
            refused.append(d)
            continue
        count += adds
        accepted.append(d)
    return accepted, refused


# ---------------------------------------------------------------------------
# Applying

class Backend:
    """Where policies go. ``names``: {policy cc: the kernel's name} for
    the ccs this host offers; ``per_prefix_delta``: whether a prefix can
    have its own delta."""
    per_prefix_delta = True

    def __init__(self, available):
        self.names = {cc: name for cc, name in self.NAMES.items()
                      if name in available}

    def capacity(self):
        return None

    def experiment_scope(self):
        """The prefixes a running A/B experiment holds (none: an
        experiment needs the sock_ops program)."""
        return []

    def clear(self, prefixes):
        """Return ``prefixes`` to the host default."""
        for p in prefixes:
            self.apply(p, HOST_DEFAULT)


def available_ccs():
    with open("/proc/sys/net/ipv4/tcp_available_congestion_control") as f:
        return f.read().split()


def host_default_cc():
    with open("/proc/sys/net/ipv4/tcp_congestion_control") as f:
        return f.read().strip()


class BpfMap(Backend):
    """The copa_prefix LPM trie of copa_sockops.bpf.o (copa-bpf sockops
    attach), through copa-bpf's code: bpf_copa takes the delta from the
    entry. The host default is no entry."""
    NAMES = {"copa": "bpf_copa", "copa_policer": "bpf_copa_pol",
             "bbr": "bbr", "cubic": "cubic"}
    name = "bpf"

    def __init__(self, available, pin=None):
        from .. import bpf_cli
        self.bpf = bpf_cli
        self.pin = pin or bpf_cli.PIN_PREFIX
        if not os.path.exists(self.pin):
            raise ControlError(f"no {self.pin}: attach the sock_ops program "
                               "(copa-bpf sockops attach CGROUP)")
        super().__init__(available)
        self.cc_of = {v: k for k, v in self.NAMES.items()}

    def capacity(self):
        info = self.bpf.bpftool("map", "show", "pinned", self.pin,
                                json_out=True)
        return int(info["max_entries"])

    def experiment_scope(self):
        return ab.scope_prefixes() if ab.running() else []

    def entries(self):
        out = {}
        for prefix, (cc, params) in self.bpf.prefix_entries(self.pin).items():
            out[prefix] = Policy(self.cc_of.get(cc, cc or DEFAULT),
                                 params.get("delta"))
        return out

    def clear(self, prefixes):
        """One bpftool batch: the kill switch at 4,096 entries takes a
        second, not a bpftool per entry."""
        lines = [" ".join(["map", "delete", "pinned", self.pin, "key",
                           *self.bpf.hexbytes(self.bpf.prefix_key(p))])
                 for p in prefixes]
        r = subprocess.run(["bpftool", "batch", "file", "-"],
                           input="\n".join(lines) + "\n", text=True,
                           capture_output=True)
        if r.returncode:
            raise ControlError(f"bpftool batch: {r.stderr.strip()}")

    def apply(self, prefix, policy):
        key = self.bpf.hexbytes(self.bpf.prefix_key(prefix))
        if policy == HOST_DEFAULT:
            self.bpf.bpftool("map", "delete", "pinned", self.pin, "key", *key)
            return
        params = {} if policy.delta is None else {"delta": policy.delta}
        value = self.bpf.prefix_value(self.names[policy.cc], params)
        try:
            self.bpf.bpftool("map", "update", "pinned", self.pin, "key",
                             *key, "value", *self.bpf.hexbytes(value))
        except self.bpf.Error as err:
            raise ControlError(str(err)) from err


class Routes(Backend):
    """Routes with ``congctl`` (module hosts): a route per prefix, with
    the nexthop ``ip route get`` gives for it, protocol ROUTE_PROTO so
    that the controller's routes are told from the others. A route sets
    no delta: Copa runs with its namespace's net.ipv4.tcp_copa.delta."""
    NAMES = {"copa": "copa", "copa_policer": "copa_policer", "bbr": "bbr",
             "cubic": "cubic"}
    PROTO = "252"
    name = "route"
    per_prefix_delta = False

    def _ip(self, *args):
        r = subprocess.run(("ip",) + args, capture_output=True, text=True)
        if r.returncode:
            raise ControlError(f"ip {' '.join(args)}: {r.stderr.strip()}")
        return r.stdout

    def entries(self):
        out = {}
        for family in ("-4", "-6"):
            for r in json.loads(self._ip("-j", family, "route", "show",
                                         "proto", self.PROTO) or "[]"):
                net = str(ipaddress.ip_network(
                    r["dst"] if "/" in r["dst"] else
                    r["dst"] + ("/32" if family == "-4" else "/128")))
                cc = (r.get("metrics") or [{}])[0].get("congestion", "")
                out[net] = Policy(next((k for k, v in self.NAMES.items()
                                        if v == cc), cc or DEFAULT))
        return out

    def apply(self, prefix, policy):
        if policy == HOST_DEFAULT:
            self._ip("route", "del", prefix, "proto", self.PROTO)
            return
        addr = str(ipaddress.ip_network(prefix).network_address)
        via = json.loads(self._ip("-j", "route", "get", addr))[0]
        nexthop = ["via", via["gateway"]] if "gateway" in via else []
        self._ip("route", "replace", prefix, *nexthop, "dev", via["dev"],
                 "proto", self.PROTO, "congctl", self.names[policy.cc])


# ---------------------------------------------------------------------------
# State, audit log, locks

class Audit:
    """The append-only audit log: one JSON object a line, each fsync'd
    before the call returns."""

    def __init__(self, path):
        self.path = path

    def write(self, event, **fields):
        self.write_all([dict(event=event, **fields)])

    def write_all(self, events):
        """Append ``events`` (dicts with an "event") with one write."""
        now = _iso(time.time())
        data = "".join(json.dumps({"time": now, **e}, sort_keys=True) + "\n"
                       for e in events).encode()
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND
                     | os.O_CLOEXEC, 0o644)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
            os.fsync(fd)
        finally:
            os.close(fd)


def lock(path, wait=False):
    """An open file holding flock(LOCK_EX) on ``path``; ControlError
    naming the holder if another process has it (and not ``wait``)."""
    f = open(path, "a+")
    try:
        fcntl.flock(f, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
    except BlockingIOError:
        f.seek(0)
        holder = f.read().strip() or "?"
        f.close()
        raise ControlError(f"another controller holds {path} (pid {holder})")
    f.seek(0)
    f.truncate()
    f.write(f"{os.getpid()}\n")
    f.flush()
    return f


class Controller:
    """Rounds over one state directory, with one backend."""

    def __init__(self, state_dir, backend, cfg, engine_source,
                 default_cc=None, dry_run=False):
        self.dir = state_dir
        self.backend = backend
        self.cfg = cfg
        self.engine_source = engine_source
        self.default_cc = default_cc or host_default_cc()
        self.dry_run = dry_run
        self.audit = Audit(os.path.join(state_dir, AUDIT))
        self.state_path = os.path.join(state_dir, STATE)
        self.state = self.load_state()

    def load_state(self):
        try:
            with open(self.state_path) as f:
                return json.load(f)
        except FileNotFoundError:
            return {"prefixes": {}}
        except ValueError as err:
            raise ControlError(f"{self.state_path}: {err}: move it away to "
                               "start afresh") from err

    def save_state(self):
        write_atomic(self.state_path, json.dumps(self.state, indent=1,
                                                 sort_keys=True))

    def paused(self):
        return os.path.exists(os.path.join(self.dir, PAUSED))

    def policies(self):
        return {p: Policy(**e["policy"])
                for p, e in self.state["prefixes"].items()
                if e.get("policy", asdict(HOST_DEFAULT)) !=
                asdict(HOST_DEFAULT)}

    def reconcile(self):
        """Make the backend hold what the state says for the controller's
        prefixes (owned()): after a restart between applying a change and
        recording it, or after someone edited the controller's entries.
        Returns the prefixes fixed."""
        want = self.policies()
        have = self.backend.entries()
        fixed = []
        for prefix in sorted(self.owned()):
            w = want.get(prefix, HOST_DEFAULT)
            if have.get(prefix, HOST_DEFAULT) != w:
                self.audit.write("reconcile", prefix=prefix,
                                 found=str(have.get(prefix, HOST_DEFAULT)),
                                 to=str(w))
                self.backend.apply(prefix, w)
                fixed.append(prefix)
            self.state["prefixes"][prefix].pop("applying", None)
        self.save_state()
        return fixed

    def owned(self):
        """The prefixes whose backend entry is the controller's: those
        with a policy, and one it was applying when it stopped."""
        return set(self.policies()) | {
            p for p, e in self.state["prefixes"].items() if "applying" in e}

    def round(self, now=None):
        """One round; returns (decisions, accepted, refused, skip reason)."""
        now = time.time() if now is None else now
        engine, source = self.engine_source(now - self.cfg.hours * 3600)
        prefixes, newest = measure(engine, source, now, self.cfg) \
            if source else ({}, 0)
        if not newest or now - newest > self.cfg.max_age_s:
            why = ("no records" if not newest else
                   f"newest record {now - newest:.0f} s old > "
                   f"{self.cfg.max_age_s:g} s")
            if not self.dry_run:
                self.audit.write("skip", reason=why)
            return [], [], [], why
        if self.paused() and not self.dry_run:
            self.audit.write("skip", reason="paused (copa-fleet control "
                             "--resume)")
            return [], [], [], "paused"
        host = (self.default_cc, self.backend.names)
        start = now - self.cfg.hours * 3600

        def evidence(prefix, n):
            return Evidence(engine, source, prefix, n, start, now + 1,
                            self.cfg)
        decisions = []
        for prefix in sorted(set(prefixes) | set(self.policies())):
            entry = self.state["prefixes"].setdefault(prefix, {})
            decisions.append(decide(prefix, prefixes.get(prefix, Prefix()),
                                    entry, self.cfg, now, host,
                                    self.backend.per_prefix_delta,
                                    evidence))
            if not entry:
                del self.state["prefixes"][prefix]
        applied = self.backend.entries()
        accepted, refused = validate(decisions, applied, self.owned(),
                                     self.backend.capacity(),
                                     self.backend.names, self.cfg,
                                     self.backend.experiment_scope())
        if self.dry_run:
            return decisions, accepted, refused, None
        for d in refused:
            self.audit.write("refused", prefix=d.prefix, current=str(
                d.current), target=str(d.target), rule=d.rule, why=d.why,
                reason=d.note, numbers=d.numbers)
        done = []
        for d in accepted:
            if not self.apply(d, now):
                break
            done.append(d)
        self.save_state()
        return decisions, done, refused + [d for d in accepted
                                           if d not in done], None

    def apply(self, d, now):
        """Audit, apply and record one change; False if the backend
        refused it (audited; the state keeps the old policy)."""
        self.audit.write("change", prefix=d.prefix, current=str(d.current),
                         target=str(d.target), rule=d.rule, why=d.why,
                         numbers=d.numbers, backend=self.backend.name)
        entry = self.state["prefixes"].setdefault(d.prefix, {})
        entry["applying"] = asdict(d.target)
        self.save_state()
        try:
            self.backend.apply(d.prefix, d.target)
        except ControlError as err:
            d.note = f"failed: {err}"
            self.audit.write("failed", prefix=d.prefix, target=str(d.target),
                             error=str(err))
            entry.pop("applying")
            self.save_state()
            return False
        entry.pop("applying")
        cand = entry.pop("candidate", None) or {}
        if d.current == HOST_DEFAULT:
            entry["baseline"] = cand.get("baseline", {})
        if d.target == HOST_DEFAULT:
            entry.setdefault("blocked", {})[d.rule] = now + \
                self.cfg.cooldown_s
            entry.pop("baseline", None)
            entry.pop("ceiling", None)
        entry.update(policy=asdict(d.target), rule=d.rule, since=now)
        self.save_state()
        return True

    def reset(self, prefixes=None):
        """The kill switch: every prefix the backend holds (or only
        ``prefixes``) back to the host default; with no prefixes, also
        pause the controller. Returns the prefixes reset."""
        if not prefixes:
            write_atomic(os.path.join(self.dir, PAUSED),
                         f"{_iso(time.time())}\n")
        have = self.backend.entries()
        targets = sorted(prefixes or set(have) | set(self.policies()))
        done = [p for p in targets if have.get(p, HOST_DEFAULT) !=
                HOST_DEFAULT]
        self.audit.write_all([{"event": "reset", "prefix": p,
                               "current": str(have[p]),
                               "target": str(HOST_DEFAULT)} for p in done])
        self.backend.clear(done)
        for p in targets:
            entry = self.state["prefixes"].get(p)
            if entry is not None:
                entry.update(policy=asdict(HOST_DEFAULT), rule="reset",
                             since=time.time())
                for k in ("baseline", "ceiling", "candidate", "applying"):
                    entry.pop(k, None)
        self.save_state()
        return done


# ---------------------------------------------------------------------------
# The report and the command

COLUMNS = ("prefix", "policy", "next", "rule", "why", "note", "connections",
           "rate_p50_mbps", "srtt_p90_ms", "qdelay_ms", "qdelay_ratio",
           "retrans", "duty", "flap")


def report_rows(decisions):
    rows = []
    for d in decisions:
        row = {"prefix": d.prefix, "policy": str(d.current),
               "next": str(d.target) if d.change else None,
               "rule": d.rule or None, "why": d.why or None,
               "note": d.note or None}
        row.update({k: d.numbers.get(k) for k in COLUMNS[6:]})
        rows.append(row)
    return rows


def engine_source(args, scratch):
    """A function of the lookback's start giving (engine, source): the
    server's table with --clickhouse, else chDB over a snapshot (in
    ``scratch``) of the state directory's record files written since
    that start; (None, None) if there are none."""
    if args.clickhouse:
        from . import clickhouse
        return lambda start: (clickhouse.Engine(args.clickhouse),
                              schema.TABLE)

    def local(start):
        for f in os.listdir(scratch):
            os.unlink(os.path.join(scratch, f))
        directory = os.path.join(args.state_dir, "records")
        if not os.path.isdir(directory):
            return None, None
        files = [f for f in store.snapshot(directory, scratch)
                 if os.path.getmtime(f) >= start]
        if not files:
            return None, None
        return queries.Chdb(), queries.file_source(files)
    return local


def make_backend(kind):
    available = available_ccs()
    if kind == "auto":
        from .. import bpf_cli
        kind = "bpf" if os.path.exists(bpf_cli.PIN_PREFIX) else "route"
    return BpfMap(available) if kind == "bpf" else Routes(available)


def config(args):
    cfg = Config(hours=args.hours, interval_s=args.interval,
                 min_bytes=args.min_bytes,
                 min_connections=args.min_connections,
                 max_age_s=args.max_age, duty_metric=args.duty_metric,
                 max_changes=args.max_changes, min_hold_s=args.min_hold,
                 confirm_rounds=args.confirm_rounds,
                 max_rate_loss=args.max_rate_loss,
                 leave_alpha=args.leave_alpha,
                 deltas=tuple(args.deltas), slow_mbps=args.slow_mbps,
                 delta_slow=args.delta_slow,
                 delta_fast=args.delta_fast)
    cfg.check()
    return cfg


def summary(decisions, accepted, refused, skip):
    if skip:
        return f"round skipped: {skip}"
    return (f"{len(decisions)} prefixes, {len(accepted)} changed, "
            f"{len(refused)} refused or deferred")


def write_report(path, decisions, line):
    from .report import markdown
    text = f"# copa-fleet control, {_iso(time.time())}\n\n{line}\n\n"
    write_atomic(path, text + markdown(report_rows(decisions),
                                       "Per prefix"))


def run(args):
    cfg = config(args)
    os.makedirs(args.state_dir, exist_ok=True)
    if args.resume:
        try:
            os.unlink(os.path.join(args.state_dir, PAUSED))
        except FileNotFoundError:
            pass
        Audit(os.path.join(args.state_dir, AUDIT)).write("resume")
        return
    backend = make_backend(args.backend)
    if args.reset is not None:
        with lock(os.path.join(args.state_dir, ROUND_LOCK), wait=True):
            ctl = Controller(args.state_dir, backend, cfg, None,
                             args.default_cc)
            done = ctl.reset(args.reset)
        print(f"copa-fleet control: {len(done)} prefixes back to the host "
              f"default{'' if args.reset else '; paused until --resume'}")
        return
    held = None if args.dry_run else lock(os.path.join(args.state_dir,
                                                       LOCK))
    stopping = []
    signal.signal(signal.SIGTERM, lambda *_: stopping.append(True))
    with tempfile.TemporaryDirectory(prefix="copa-fleet-control-") as tmp:
        ctl = Controller(args.state_dir, backend, cfg,
                         engine_source(args, tmp), args.default_cc,
                         dry_run=args.dry_run)
        if not args.dry_run:
            with lock(os.path.join(args.state_dir, ROUND_LOCK), wait=True):
                fixed = ctl.reconcile()
            if fixed:
                print(f"copa-fleet control: reconciled {len(fixed)} "
                      "prefixes with the state", file=sys.stderr)
        while not stopping:
            started = time.monotonic()
            with lock(os.path.join(args.state_dir, ROUND_LOCK), wait=True):
                ctl.state = ctl.load_state()
                try:
                    result = ctl.round()
                except queries.QueryError as err:
                    ctl.audit.write("skip", reason=f"store: {err}") \
                        if not args.dry_run else None
                    result = ([], [], [], f"store: {err}")
            line = summary(*result)
            if args.dry_run:
                from .report import markdown
                print(markdown(report_rows(result[0]), "Per prefix"))
                print(line)
                break
            write_report(os.path.join(args.state_dir, REPORT), result[0],
                         line)
            print(f"copa-fleet control: {line}", file=sys.stderr)
            if args.once:
                break
            while not stopping and \
                    time.monotonic() - started < cfg.interval_s:
                time.sleep(min(1.0, cfg.interval_s))
    if held:
        held.close()


def delta_arg(text):
    try:
        v = round(float(text) * 1000)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text}: not a number")
    if not DELTA.min <= v <= DELTA.max:
        raise argparse.ArgumentTypeError(
            f"{text}: outside {DELTA.min / 1000:g} to {DELTA.max / 1000:g}")
    return v


def add_parser(sub):
    d = Config()
    c = sub.add_parser("control", help="choose cc and delta per prefix")
    c.add_argument("--state-dir", default="/var/lib/copa-fleet",
                   help="records, state, audit log (default "
                        "/var/lib/copa-fleet)")
    c.add_argument("--clickhouse", metavar="URL",
                   help="read the records from this ClickHouse server")
    mode = c.add_mutually_exclusive_group()
    mode.add_argument("--dry-run", action="store_true",
                      help="one round, print what it would do, change "
                           "nothing")
    mode.add_argument("--once", action="store_true", help="one round")
    mode.add_argument("--reset", nargs="*", metavar="PREFIX",
                      help="the kill switch: every prefix (or these) back "
                           "to the host default; with none, also pause")
    mode.add_argument("--resume", action="store_true",
                      help="undo --reset's pause")
    c.add_argument("--backend", choices=("auto", "bpf", "route"),
                   default="auto", help="copa_prefix map or routes "
                   "(default: the map if copa-bpf sockops is attached)")
    c.add_argument("--default-cc", help="the host default's name in the "
                   "records (default: net.ipv4.tcp_congestion_control)")
    c.add_argument("--interval", type=float, default=d.interval_s,
                   help=f"seconds per round (default {d.interval_s:g})")
    c.add_argument("--hours", type=float, default=d.hours,
                   help=f"lookback (default {d.hours:g})")
    c.add_argument("--min-bytes", type=int, default=d.min_bytes,
                   help="count connections that acked this many bytes "
                        f"(default {d.min_bytes})")
    c.add_argument("--min-connections", type=int,
                   default=d.min_connections,
                   help=f"per prefix (default {d.min_connections})")
    c.add_argument("--max-age", type=float, default=d.max_age_s,
                   help="no change when the newest record is older, s "
                        f"(default {d.max_age_s:g})")
    c.add_argument("--duty-metric", default=d.duty_metric,
                   choices=sorted(queries.DUTY_METRICS),
                   help=f"duty cycle's metric (default {d.duty_metric})")
    c.add_argument("--max-changes", type=int, default=d.max_changes,
                   help=f"per round (default {d.max_changes})")
    c.add_argument("--min-hold", type=float, default=d.min_hold_s,
                   help=f"seconds in a state (default {d.min_hold_s:g})")
    c.add_argument("--confirm-rounds", type=int, default=d.confirm_rounds,
                   help="rounds a rule must hold before a prefix enters "
                        f"(default {d.confirm_rounds})")
    c.add_argument("--max-rate-loss", type=float, default=d.max_rate_loss,
                   help="median delivery rate a policy may cost "
                        f"(default {d.max_rate_loss:g})")
    c.add_argument("--leave-alpha", type=float, default=d.leave_alpha,
                   help="a leave rule must hold at the far end of its "
                        "metric's 1 - ALPHA bootstrap interval (default "
                        f"{d.leave_alpha:g})")
    c.add_argument("--deltas", type=delta_arg, nargs="+",
                   default=list(d.deltas), help="the delta ladder "
                   "(default " + " ".join(f"{x / 1000:g}" for x in d.deltas)
                   + ")")
    c.add_argument("--slow-mbps", type=float, default=d.slow_mbps,
                   help="a median delivery rate below this is slow "
                        f"(default {d.slow_mbps:g})")
    c.add_argument("--delta-slow", type=delta_arg, default=d.delta_slow,
                   help=f"entry delta below --slow-mbps "
                        f"(default {d.delta_slow / 1000:g})")
    c.add_argument("--delta-fast", type=delta_arg, default=d.delta_fast,
                   help=f"entry delta above it "
                        f"(default {d.delta_fast / 1000:g})")
    c.set_defaults(func=main)
    return c


def main(args):
    try:
        run(args)
    except (ControlError, OSError) as err:
        sys.exit(f"copa-fleet control: {err}")
