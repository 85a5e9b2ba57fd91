# SPDX-License-Identifier: GPL-2.0
"""copa-fleet control over synthetic records on chDB's real engine: the
rules, hysteresis (confirmation, hold, cap, cooldown, delta ceiling),
validation, stale data, the audit log, a restart between a change's
audit line and its state, the kill switch and the lock. The backend is
a dict (FakeMap, with copa_prefix's names and a capacity); the native
test applies the same plans to the real map and to routes.

A World closes the loop: each round's records come from path models
that answer the policy the backend holds for the prefix, as the VM test's
links do."""
import json
import os
import random

import pytest
from conftest import TOOLS  # noqa: F401

from copa_tools.fleet import control, queries, schema, store
from copa_tools.fleet.control import HOST_DEFAULT, Config, Policy

chdb = pytest.importorskip("chdb", reason="chDB is missing (scripts/deps)")

T0 = 1_795_000_000
ROUND = 300

# Path models: (base RTT ms, {cc name or (cc, delta): (queueing delay ms,
# median rate Mbit/s, retransmission overhead)}); "*" answers any other.
BLOATED = (40, {"cubic": (80, 1.9, 0.002),
                ("bpf_copa", 800): (8, 1.7, 0.001),
                ("bpf_copa", 500): (12, 1.85, 0.001),
                ("bpf_copa", 200): (25, 1.9, 0.001),
                ("bpf_copa", 100): (40, 1.9, 0.001)})
POLICED = (20, {"cubic": (1, 8, 0.08), "bpf_copa_pol": (1, 8, 0.01),
                "bbr": (1, 8, 0.03)})
LOSSY = (40, {"cubic": (1, 5, 0.01), "*": (1, 15, 0.01)})
CLEAN = (10, {"*": (4, 90, 0.001)})
FLEET = {"192.0.2.0/24": BLOATED, "198.51.100.0/24": POLICED,
         "203.0.113.0/24": LOSSY, "198.18.0.0/24": CLEAN}


class FakeMap(control.Backend):
    """copa_prefix as a dict."""
    NAMES = control.BpfMap.NAMES
    name = "fake"

    def __init__(self, available=("cubic", "bbr", "bpf_copa",
                                  "bpf_copa_pol"), capacity=4096):
        super().__init__(available)
        self.map = {}
        self.cap = capacity
        self.fail = None
        self.applied = []
        self.scope = []

    def capacity(self):
        return self.cap

    def experiment_scope(self):
        return self.scope

    def entries(self):
        return dict(self.map)

    def apply(self, prefix, policy):
        if self.fail:
            raise control.ControlError(self.fail)
        self.applied.append((prefix, policy))
        if policy == HOST_DEFAULT:
            self.map.pop(prefix, None)
        else:
            self.map[prefix] = policy


class World:
    """Records per round from FLEET-like models, under the backend's
    policies; conns connections of at least 100 KB per prefix and round,
    with decoys the controller must ignore: small connections with a
    huge RTT, and app-limited samples with a tiny rate."""

    def __init__(self, tmp_path, fleet, backend, conns=25, seed=1):
        self.dir = tmp_path / "records"
        self.dir.mkdir()
        self.fleet, self.backend, self.conns = fleet, backend, conns
        self.rng = random.Random(seed)
        self.cookie = 0
        self.files = []
        self.arms = {}          # {prefix: the A/B arm of its records}

    def path(self, prefix, cc, delta):
        base, ccs = self.fleet[prefix]
        m = ccs.get((cc, delta)) or ccs.get(cc) or ccs["*"]
        return base, m

    def write(self, now):
        out = []
        for prefix in self.fleet:
            pol = self.backend.map.get(prefix, HOST_DEFAULT)
            cc = self.backend.names.get(pol.cc, "cubic")
            base, (q, mbps, retr) = self.path(prefix, cc, pol.delta)
            for i in range(self.conns + 3):
                self.cookie += 1
                small = i >= self.conns
                acked = self.rng.randint(20_000, 90_000) if small else \
                    self.rng.randint(200_000, 5_000_000)
                for k in range(3):
                    r = {"time": now - ROUND + 60 + 100 * k, "host": "h",
                         "kind": schema.FINAL if k == 2 else schema.SAMPLE,
                         "cookie": self.cookie, "local_addr": "10.0.0.1",
                         "local_port": 443,
                         "peer_addr": prefix.split("/")[0][:-1] + "9",
                         "peer_port": 40000, "peer_prefix": prefix,
                         "cc": cc, "ab_arm": self.arms.get(prefix, ""),
                         "age_ms": 100_000 * k,
                         "min_rtt_us": int(base * 1000 *
                                           self.rng.uniform(1, 1.05)),
                         "srtt_us": int((base + (500 if small else q)
                                         * self.rng.uniform(0.8, 1.2))
                                        * 1000),
                         "bytes_acked": acked * (k + 1) // 3,
                         "bytes_retrans": int(acked * (k + 1) // 3 * retr),
                         "delivery_rate_bps": int(mbps * 1e6 *
                                                  self.rng.uniform(0.9,
                                                                   1.1)),
                         "app_limited": 0}
                    if cc.startswith("bpf_copa"):
                        r["copa_delta"] = (pol.delta or 500) / 1000
                    if k == 1:
                        r.update(delivery_rate_bps=1000, app_limited=1)
                    out.append(r)
        path = self.dir / f"w{now}{store.DONE}"
        path.write_bytes(store.encode(out))
        self.files.append(str(path))

    def source(self, start):
        return queries.Chdb(), queries.file_source(self.files[-36:])


def controller(tmp_path, backend, world, **cfg):
    c = Config(**{"min_hold_s": 900, **cfg})
    c.check()
    return control.Controller(str(tmp_path), backend, c, world.source,
                              default_cc="cubic")


def run_rounds(ctl, world, rounds, start=0):
    """Rounds start+1 .. start+rounds; returns each round's changes."""
    out = []
    for k in range(start + 1, start + rounds + 1):
        now = T0 + k * ROUND
        world.write(now)
        _, accepted, _, skip = ctl.round(now)
        assert skip is None
        out.append([(d.prefix, d.target) for d in accepted])
    return out


def audit(tmp_path):
    with open(tmp_path / control.AUDIT) as f:
        return [json.loads(line) for line in f]


@pytest.fixture
def fleet(tmp_path):
    backend = FakeMap()
    world = World(tmp_path, FLEET, backend)
    return backend, world, controller(tmp_path, backend, world)


# -- rules ------------------------------------------------------------------

def numbers(qdelay_ms, base_ms, mbps, retrans):
    return control.Numbers(100, mbps * 1e6, mbps * 0.8e6,
                           (base_ms + qdelay_ms) * 1000,
                           (base_ms + 1.2 * qdelay_ms) * 1000,
                           base_ms * 1000, retrans)


AVAILABLE = {"copa": "bpf_copa", "copa_policer": "bpf_copa_pol",
             "bbr": "bbr", "cubic": "cubic"}


@pytest.mark.parametrize("n, rule, policy, says", [
    (numbers(80, 40, 1.9, 0.002), "bloated", Policy("copa", 500),
     "queueing delay 80 ms = 2.00 >= 1 x base RTT; median rate 1.9"),
    (numbers(80, 40, 50, 0.002), "bloated", Policy("copa", 100),
     ">= 10"),
    (numbers(1, 20, 8, 0.08), "policed", Policy("copa_policer"),
     "retransmitted 8% >= 3% at queueing delay 0.05"),
    (numbers(1, 40, 5, 0.01), "lossy", Policy("copa", 500),
     "retransmitted 1% >= 0.5%"),
    (numbers(4, 10, 90, 0.001), None, None, None),
    # A queue between low and bloated: no rule, whatever the loss.
    (numbers(8, 20, 20, 0.05), None, None, None),
    # Bloated in ratio but under bloat_min_ms: a short path's jitter.
    (numbers(5, 3, 20, 0.0), None, None, None)])
def test_enter_rules(n, rule, policy, says):
    hit = control.enter_rule(n, Config(), AVAILABLE)
    if rule is None:
        assert hit is None
        return
    assert hit[:2] == (rule, policy)
    assert says in hit[2]


def test_policed_falls_back_to_bbr_without_copa_policer():
    names = {k: v for k, v in AVAILABLE.items() if k != "copa_policer"}
    hit = control.enter_rule(numbers(1, 20, 8, 0.08), Config(), names)
    assert hit[:2] == ("policed", Policy("bbr"))


class Bounds:
    """Evidence with given interval ends: {(metric, side): value}."""

    def __init__(self, **ends):
        self.ends = {tuple(k.rsplit("_", 1)): v for k, v in ends.items()}

    def bound(self, metric, side):
        return self.ends.get((metric, side))


def test_leave_rules():
    cfg = Config()
    base = {"rate_p50": 2e6, "srtt_p90": 150e3, "retrans": 0.08}
    far = Bounds(rate_p50_high=1.85e6, srtt_p90_low=140e3,
                 retrans_low=0.085)
    ok = numbers(12, 40, 1.95, 0.001)
    assert control.leave_rule("bloated", ok, base, cfg, far) is None
    kind, why = control.leave_rule("bloated", numbers(12, 40, 1.8, 0), base,
                                   cfg, far)
    assert kind == "rate" and why == "median rate 1.8 Mbit/s (at most " \
        "1.85 Mbit/s at 95%) < 0.95 x 2 Mbit/s at entry"
    kind, why = control.leave_rule("bloated", numbers(100, 40, 2, 0), base,
                                   cfg, far)
    assert kind == "useless" and why == "srtt p90 160 ms (at least " \
        "140 ms at 95%) > 0.9 x 150 ms at entry"
    kind, why = control.leave_rule("policed", numbers(1, 20, 2, 0.09), base,
                                   cfg, far)
    assert kind == "useless" and why == "retransmitted 9% (at least " \
        "8.5% at 95%) > 8% at entry"


def test_leave_rules_need_the_interval_past_the_limit():
    """The same point estimates, but each interval reaches back over its
    limit (or no interval: fewer than two connections): no leave."""
    cfg = Config()
    base = {"rate_p50": 2e6, "srtt_p90": 150e3, "retrans": 0.08}
    for near in (Bounds(rate_p50_high=1.95e6, srtt_p90_low=130e3,
                        retrans_low=0.07), Bounds()):
        for rule, n in (("bloated", numbers(12, 40, 1.8, 0)),
                        ("bloated", numbers(100, 40, 2, 0)),
                        ("policed", numbers(1, 20, 2, 0.09))):
            assert control.leave_rule(rule, n, base, cfg, near) is None


def test_leave_alpha_checked():
    for alpha in (0, 1, -0.5):
        with pytest.raises(control.ControlError, match="leave-alpha"):
            Config(leave_alpha=alpha).check()


def test_duty_cycle_and_flap_rate():
    rows = []
    for w in range(10):
        vals = {"a": 1, "b": 5 if w % 2 else 0.5, "c": 9, "d": 10, "e": 11}
        rows += [{"window_start": w * ROUND, "peer_prefix": p,
                  "samples": 3, "value": v} for p, v in vals.items()]
    out = control.duty_cycles(rows, Config())
    # a is the poorest except when b dips under it, every other window.
    assert out["a"] == (0.5, 1.0, 10)
    assert out["b"] == (0.5, 1.0, 10)
    assert out["e"] == (0.0, 0.0, 10)
    srtt = control.duty_cycles(rows, Config(duty_metric="srtt"))
    assert srtt["e"][0] == 1.0


def test_config_checks_deltas_against_params():
    with pytest.raises(control.ControlError, match="outside"):
        Config(deltas=(100, 2000), delta_slow=100).check()
    with pytest.raises(control.ControlError, match="not one of"):
        Config(delta_slow=300).check()


# -- the loop on chDB ---------------------------------------------------------

def test_converges_and_stays(tmp_path, fleet):
    backend, world, ctl = fleet
    changes = run_rounds(ctl, world, 24)
    assert backend.map == {"192.0.2.0/24": Policy("copa", 500),
                           "198.51.100.0/24": Policy("copa_policer"),
                           "203.0.113.0/24": Policy("copa", 500)}
    # Entered on the second round a rule held (confirm_rounds), then
    # nothing changed for the remaining 22 rounds.
    assert [len(c) for c in changes[:2]] == [0, 3]
    assert not any(changes[2:])
    lines = [a for a in audit(tmp_path) if a["event"] == "change"]
    assert len(lines) == 3
    bloat = next(a for a in lines if a["prefix"] == "192.0.2.0/24")
    assert bloat["rule"] == "bloated" and bloat["target"] == "copa delta=0.5"
    assert bloat["numbers"]["qdelay_ms"] > 60 and "base RTT" in bloat["why"]
    state = json.loads((tmp_path / control.STATE).read_text())
    assert state["prefixes"]["192.0.2.0/24"]["baseline"]["rate_p50"] > 1.7e6
    assert "198.18.0.0/24" not in state["prefixes"]


def test_clean_fleet_changes_nothing(tmp_path):
    backend = FakeMap()
    fleet = {f"198.18.{i}.0/24": CLEAN for i in range(6)}
    world = World(tmp_path, fleet, backend)
    ctl = controller(tmp_path, backend, world)
    assert not any(run_rounds(ctl, world, 8))
    assert backend.applied == []
    assert not (tmp_path / control.AUDIT).exists()


def test_harm_steps_delta_down_then_leaves(tmp_path):
    """Copa at 0.5 costs 10% of the rate: one rung down to 0.2, never
    back up while the queue is still high there; 0.2 costing too (the
    ladder's lowest rung here) leaves for the host default, blocked for
    the cooldown."""
    bloated = (40, dict(BLOATED[1]))
    bloated[1][("bpf_copa", 500)] = (12, 1.7, 0.001)
    bloated[1][("bpf_copa", 200)] = (45, 1.9, 0.001)
    backend = FakeMap()
    world = World(tmp_path, {"192.0.2.0/24": bloated}, backend)
    ctl = controller(tmp_path, backend, world, deltas=(200, 500, 800),
                     delta_fast=200)
    changes = run_rounds(ctl, world, 12)
    flat = [c for r in changes for c in r]
    assert flat == [("192.0.2.0/24", Policy("copa", 500)),
                    ("192.0.2.0/24", Policy("copa", 200))]
    entry = ctl.state["prefixes"]["192.0.2.0/24"]
    assert entry["ceiling"] == 200
    # Now 0.2 costs too: the host default, then no re-entry.
    bloated[1][("bpf_copa", 200)] = (45, 1.6, 0.001)
    changes = run_rounds(ctl, world, 12, start=12)
    flat = [c for r in changes for c in r]
    assert flat == [("192.0.2.0/24", HOST_DEFAULT)]
    assert entry["blocked"]["bloated"] > T0 + 24 * ROUND
    rows = control.report_rows(ctl.round(T0 + 24 * ROUND)[0])
    assert "blocked until" in rows[0]["note"]


def test_escalates_to_a_larger_delta(tmp_path):
    bloated = (40, dict(BLOATED[1]))
    bloated[1][("bpf_copa", 500)] = (60, 1.9, 0.001)
    bloated[1][("bpf_copa", 800)] = (8, 1.9, 0.001)
    backend = FakeMap()
    world = World(tmp_path, {"192.0.2.0/24": bloated}, backend)
    ctl = controller(tmp_path, backend, world)
    flat = [c for r in run_rounds(ctl, world, 10) for c in r]
    assert flat == [("192.0.2.0/24", Policy("copa", 500)),
                    ("192.0.2.0/24", Policy("copa", 800))]


def test_min_hold(tmp_path):
    bloated = (40, dict(BLOATED[1]))
    bloated[1][("bpf_copa", 500)] = (12, 1.0, 0.001)
    backend = FakeMap()
    world = World(tmp_path, {"192.0.2.0/24": bloated}, backend)
    ctl = controller(tmp_path, backend, world, min_hold_s=1800)
    changes = run_rounds(ctl, world, 9)
    # Entered at round 2; the harm shows at once but waits 1800 s.
    assert [i for i, c in enumerate(changes, 1) if c] == [2, 8]


def test_confirm_rounds_ignore_one_bad_round(tmp_path):
    backend = FakeMap()
    fleet = {"192.0.2.0/24": CLEAN}
    world = World(tmp_path, fleet, backend)
    ctl = controller(tmp_path, backend, world, hours=ROUND / 3600)
    run_rounds(ctl, world, 2)
    fleet["192.0.2.0/24"] = BLOATED
    run_rounds(ctl, world, 1, start=2)
    fleet["192.0.2.0/24"] = CLEAN
    assert not any(run_rounds(ctl, world, 3, start=3))
    assert backend.applied == []


def test_cap_on_changes_per_round(tmp_path):
    backend = FakeMap()
    fleet = {f"192.0.{i}.0/24": BLOATED for i in range(5)}
    world = World(tmp_path, fleet, backend)
    ctl = controller(tmp_path, backend, world, max_changes=2)
    changes = run_rounds(ctl, world, 5)
    assert [len(c) for c in changes] == [0, 2, 2, 1, 0]
    refused = [a for a in audit(tmp_path) if a["event"] == "refused"]
    assert refused and all("deferred" in a["reason"] for a in refused)


def test_priority_from_edgio_scores(tmp_path):
    """Past the cap, the prefixes longest in the poor group and least
    flapping go first."""
    cfg = Config(confirm_rounds=1)
    out = []
    for duty, flap in ((0.2, 0.0), (1.0, 0.0), (1.0, 0.5)):
        data = control.Prefix({("cubic", None): numbers(80, 40, 1.9, 0.002)},
                              duty=duty, flap=flap)
        out.append(control.decide("192.0.2.0/24", data, {}, cfg, T0,
                                  ("cubic", AVAILABLE), True,
                                  None).priority)
    assert out[1] > out[2] > out[0]


# -- validation ---------------------------------------------------------------

def decision(prefix, target, current=HOST_DEFAULT, priority=1):
    return control.Decision(prefix, current, target, "bloated", "", {},
                            priority=priority)


def test_validate():
    cfg = Config()
    applied = {"10.0.0.0/8": Policy("bbr"),
               "192.0.2.0/24": Policy("copa", 500)}
    owned = {"192.0.2.0/24"}
    cases = [
        (decision("10.1.2.0/24", Policy("copa", 500)), "overlaps 10.0.0.0/8"),
        (decision("10.0.0.0/8", Policy("copa", 500)), "the operator's entry"),
        (decision("192.0.2.0/25", Policy("copa", 200)),
         "overlaps 192.0.2.0/24"),
        (decision("192.0.2.1/24", Policy("copa", 500)), "host bits set"),
        (decision("2001:DB8::/56", Policy("copa", 500)),
         "canonical form (use 2001:db8::/56)"),
        (decision("bogus", Policy("copa", 500)), "not a prefix"),
        (decision("198.51.100.0/24", Policy("copa", 300)), "not allowed"),
        (decision("192.0.2.0/24", Policy("bbr"), Policy("copa", 500)),
         "through the host default"),
        (decision("192.0.2.0/24", Policy("copa", 100), Policy("copa", 500)),
         "more than one rung"),
        (decision("203.0.113.0/24", Policy("copa", 500)),
         "in the A/B experiment's scope (203.0.113.0/24)"),
        (decision("203.0.112.0/23", Policy("copa", 500)),
         "in the A/B experiment's scope (203.0.113.0/24)"),
    ]
    accepted, refused = control.validate(
        [d for d, _ in cases], applied, owned, 4096, AVAILABLE, cfg,
        scope=["203.0.113.0/24"])
    assert accepted == []
    for d, why in cases:
        assert why in d.note, (d.prefix, d.note)
    names = {"copa": "bpf_copa"}
    d = decision("198.51.100.0/24", Policy("copa_policer"))
    assert control.validate([d], {}, set(), 10, names, cfg)[0] == []
    assert "not available" in d.note


def test_validate_capacity_and_priority():
    cfg = Config()
    full = {f"10.0.{i}.0/24": Policy("bbr") for i in range(3)}
    adds = [decision(f"192.0.{i}.0/24", Policy("copa", 500), priority=i)
            for i in range(3)]
    leave = decision("10.0.0.0/24", HOST_DEFAULT, Policy("bbr"), priority=3)
    accepted, refused = control.validate(adds + [leave], full, set(full), 4,
                                         AVAILABLE, cfg)
    # The removal first frees a slot: two of the three adds fit, the
    # highest priorities.
    assert [d.prefix for d in accepted] == ["10.0.0.0/24", "192.0.2.0/24",
                                            "192.0.1.0/24"]
    assert "map full: 4 of 4" in refused[0].note


# -- faults -------------------------------------------------------------------

def test_stale_store_changes_nothing(tmp_path, fleet):
    backend, world, ctl = fleet
    run_rounds(ctl, world, 1)
    # The collector stops: rounds go on, but nothing is applied.
    for k in range(2, 6):
        _, accepted, _, skip = ctl.round(T0 + k * ROUND + 400)
        assert accepted == [] and "old >" in skip
    assert backend.map == {}
    skips = [a for a in audit(tmp_path) if a["event"] == "skip"]
    assert len(skips) == 4


def test_store_down_changes_nothing(tmp_path):
    backend = FakeMap()

    def down(start):
        return queries.Chdb(), queries.file_source(
            [str(tmp_path / "missing.jsonl")])
    ctl = control.Controller(str(tmp_path), backend, Config(), down,
                             default_cc="cubic")
    with pytest.raises(queries.QueryError):
        ctl.round(T0)
    assert backend.map == {}


def test_map_full_at_apply(tmp_path, fleet):
    backend, world, ctl = fleet
    run_rounds(ctl, world, 1)
    world.write(T0 + 2 * ROUND)
    backend.fail = "bpftool map update: Argument list too long"
    _, accepted, refused, _ = ctl.round(T0 + 2 * ROUND)
    assert accepted == [] and len(refused) == 3
    events = [a["event"] for a in audit(tmp_path)]
    assert events == ["change", "failed"]
    assert ctl.policies() == {}
    backend.fail = None
    assert len(run_rounds(ctl, world, 1, start=2)[0]) == 3


def test_restart_between_audit_and_state(tmp_path, fleet):
    """A crash after a change was applied but before the state was
    written: the new controller puts the backend back to its state and
    audits that; the next rounds decide again."""
    backend, world, ctl = fleet
    run_rounds(ctl, world, 1)
    world.write(T0 + 2 * ROUND)
    save, saves = ctl.save_state, []

    def killed_after_apply():
        saves.append(1)
        if len(saves) == 2:     # the first records what it is applying
            raise SystemExit("killed")
        save()
    ctl.save_state = killed_after_apply
    with pytest.raises(SystemExit):
        ctl.round(T0 + 2 * ROUND)
    assert len(backend.map) == 1        # applied, not in the state file
    again = controller(tmp_path, backend, world)
    assert again.reconcile() == list(backend.applied[0][:1])
    assert backend.map == {}
    events = [a["event"] for a in audit(tmp_path)]
    assert events == ["change", "reconcile"]
    run_rounds(again, world, 2, start=2)
    assert len(backend.map) == 3


def test_operators_entries_are_left_alone(tmp_path, fleet):
    """An entry the operator made on a prefix the controller would
    change: refused every round, and a restart does not remove it."""
    backend, world, ctl = fleet
    backend.map["192.0.2.0/24"] = Policy("cubic")
    run_rounds(ctl, world, 3)
    assert backend.map["192.0.2.0/24"] == Policy("cubic")
    assert len(backend.map) == 3
    refused = [a for a in audit(tmp_path) if a["event"] == "refused"]
    assert {a["reason"] for a in refused} == {"the operator's entry"}
    assert controller(tmp_path, backend, world).reconcile() == []
    assert backend.map["192.0.2.0/24"] == Policy("cubic")


def test_experiment_scope_is_left_alone(tmp_path, fleet):
    """A running A/B experiment's arms override any policy on its scope:
    the controller changes nothing in or under it, and says why."""
    backend, world, ctl = fleet
    backend.scope = ["192.0.0.0/16"]
    run_rounds(ctl, world, 3)
    assert "192.0.2.0/24" not in backend.map
    assert len(backend.map) == 2
    refused = [a for a in audit(tmp_path) if a["event"] == "refused"]
    assert refused and {a["reason"] for a in refused} == {
        "in the A/B experiment's scope (192.0.0.0/16)"}


def test_experiment_records_are_not_the_prefixs(tmp_path, fleet):
    """Records of an A/B arm say how the arm did, not the prefix under
    the controller's policy: they count for nothing, so a prefix whose
    records are all an experiment's gets no change."""
    backend, world, ctl = fleet
    world.arms["192.0.2.0/24"] = "e1/treatment"
    run_rounds(ctl, world, 3)
    assert "192.0.2.0/24" not in backend.map
    assert len(backend.map) == 2


def test_state_file_is_whole_or_old(tmp_path, fleet):
    backend, world, ctl = fleet
    run_rounds(ctl, world, 2)
    before = (tmp_path / control.STATE).read_text()
    assert [p.name for p in tmp_path.iterdir()
            if p.name.startswith(".tmp-")] == []
    json.loads(before)


def test_kill_switch(tmp_path, fleet):
    backend, world, ctl = fleet
    backend.map["10.0.0.0/8"] = Policy("bbr")   # the operator's
    run_rounds(ctl, world, 2)
    assert len(backend.map) == 4
    done = ctl.reset()
    assert backend.map == {} and len(done) == 4
    assert ctl.paused()
    world.write(T0 + 3 * ROUND)
    _, accepted, _, skip = ctl.round(T0 + 3 * ROUND)
    assert skip == "paused" and accepted == []
    resets = [a for a in audit(tmp_path) if a["event"] == "reset"]
    assert sorted(a["prefix"] for a in resets) == sorted(done)
    os.unlink(tmp_path / control.PAUSED)
    # Back from the host default, the rules need their rounds again.
    changes = run_rounds(ctl, world, 4, start=3)
    assert [len(c) for c in changes] == [0, 3, 0, 0]


def test_reset_one_prefix_keeps_running(tmp_path, fleet):
    backend, world, ctl = fleet
    run_rounds(ctl, world, 2)
    assert ctl.reset(["192.0.2.0/24"]) == ["192.0.2.0/24"]
    assert not ctl.paused() and len(backend.map) == 2


def test_one_controller(tmp_path):
    held = control.lock(str(tmp_path / control.LOCK))
    try:
        with pytest.raises(control.ControlError,
                           match=f"pid {os.getpid()}"):
            control.lock(str(tmp_path / control.LOCK))
    finally:
        held.close()
    control.lock(str(tmp_path / control.LOCK)).close()


def test_corrupt_state_is_an_error(tmp_path):
    (tmp_path / control.STATE).write_text("{not json")
    with pytest.raises(control.ControlError, match="move it away"):
        control.Controller(str(tmp_path), FakeMap(), Config(), None,
                           default_cc="cubic")


def test_cli_dry_run_and_bad_delta(tmp_path, capsys):
    from copa_tools.fleet import cli
    backend = FakeMap()
    world = World(tmp_path, FLEET, backend)
    with pytest.raises(SystemExit) as e:
        cli.main(["control", "--dry-run", "--delta-slow", "5",
                  "--state-dir", str(tmp_path)])
    assert e.value.code == 2
    assert "outside 0.001 to 1" in capsys.readouterr().err
    for k in (1, 2):
        world.write(T0 + k * ROUND)
    args = cli.parser().parse_args(["control", "--dry-run", "--state-dir",
                                    str(tmp_path), "--default-cc",
                                    "cubic"])
    ctl = control.Controller(str(tmp_path), backend, control.config(args),
                             world.source, "cubic", dry_run=True)
    decisions, accepted, _, _ = ctl.round(T0 + 2 * ROUND)
    # A dry run changes nothing, twice: its candidates are not saved.
    assert backend.applied == [] and not (tmp_path / control.STATE).exists()
    text = control.report_rows(decisions)
    assert {r["rule"] for r in text} == {"bloated", "policed", "lossy",
                                         "clean"}
