# SPDX-License-Identifier: GPL-2.0
"""Scenario files: the shipped ones validate, bad ones name the field."""
import os

import pytest

from copa_tools.eval import scenarios
from copa_tools.eval.scenarios import ScenarioError

BASE = """
description = "test"
variants = ["cubic", "copa:delta=0.2"]
duration_s = 10
[link]
rate_mbit = 12
rtt_ms = 40
[[flows]]
cc = "variant"
"""


def load_text(tmp_path, text, overrides=()):
    path = tmp_path / "t.toml"
    path.write_text(text)
    return scenarios.load(str(path), overrides)


@pytest.mark.parametrize("name", [n for n, _ in scenarios.available()])
def test_shipped_scenarios_validate(name):
    scenario = scenarios.load(name)
    assert scenario.cases and scenario.variants
    assert scenario.description


def test_bench_set_validates():
    from copa_tools.eval import cli
    assert len(cli.bench_plan()) >= 8


def test_ablation_set_validates_and_runs_only_copa():
    from copa_tools.eval import cli
    plan = cli.bench_plan(os.path.join(scenarios.SCENARIO_DIR,
                                       "ablation.toml"))
    assert {v.cc for s in plan for v in s.variants} <= \
        {"copa", "copa_policer"}
    assert "ablation" not in dict(scenarios.available())


def test_sweep_expansion_and_overrides(tmp_path):
    s = load_text(tmp_path, BASE + "[sweep]\nbuffer_bdp = [1, 4]\n",
                  ["link.rate_mbit=20", "sweep.buffer_bdp=[0.5, 2, 8]"])
    assert [c.id for c in s.cases] == ["buffer_bdp=0.5", "buffer_bdp=2",
                                       "buffer_bdp=8"]
    assert all(c.link["rate_mbit"] == 20 for c in s.cases)


def test_flow_field_sweep_and_build_flows(tmp_path):
    s = load_text(tmp_path, BASE + '[[flows]]\ncc = "cubic"\ncount = 2\n'
                  'stagger_s = 2\n[sweep]\n"flows.1.extra_rtt_ms" = [0, 40]\n')
    flows, roles = scenarios.build_flows(s.cases[1].flows, s.variants[1])
    assert [f.cc for f in flows] == ["copa", "cubic", "cubic"]
    assert roles == ["variant", "competitor", "competitor"]
    assert flows[0].sysctls == {"net.ipv4.tcp_copa.delta": "0.2"}
    assert [f.start_s for f in flows] == [0, 0, 2]
    assert [f.extra_rtt_ms for f in flows] == [0, 40, 40]


def test_random_links_are_seeded(tmp_path):
    text = BASE.replace('variants', 'kind = "random_links"\nvariants') + """
[random_links]
count = 3
seed = 5
rate_mbit = [2, 20]
rtt_ms = [10, 80]
buffer_bdp = [1, 2]
"""
    a, b = load_text(tmp_path, text), load_text(tmp_path, text)
    assert [c.link for c in a.cases] == [c.link for c in b.cases]
    assert all(2 <= c.link["rate_mbit"] <= 20 for c in a.cases)


@pytest.mark.parametrize("overrides,needle", [
    (["link.rate_mbit=0"], "link.rate_mbit: must be a number > 0"),
    (["link.rate_mbit=90"], "link.rate_mbit: 90 Mbit/s is above"),
    (["link.loss_pct=100"], "link.loss_pct"),
    (["link.buffer_pkts=0"], "link.buffer_pkts"),
    (["link.colour=1"], "link.colour: unknown field"),
    (["variants=['cubic','copa:delta=7']"], "variants: variant"),
    (["variants=['tahoe']"], "unknown algorithm 'tahoe'"),
    (["kind='grid'"], "kind: must be one of"),
    (["flows.0.cc='tahoe'"], "flows.0.cc"),
    (["flows.0.start_s=10"], "flows.0.start_s"),
    (["flows.0.duration_s=11"], "flows.0.duration_s"),
    (["sweep.mtu=[1]"], "sweep.mtu"),
    (["repeats=0"], "repeats: must be >= 1"),
    (["duration_s='long'"], "duration_s: expected a number"),
    (["speed=1"], "speed: unknown field"),
])
def test_bad_scenarios_name_the_field(tmp_path, overrides, needle):
    with pytest.raises(ScenarioError, match=needle.replace("(", r"\(")):
        load_text(tmp_path, BASE, overrides)


def test_missing_description_and_bad_toml(tmp_path):
    with pytest.raises(ScenarioError, match="description"):
        load_text(tmp_path, BASE.replace('description = "test"', ""))
    with pytest.raises(ScenarioError, match="not valid TOML"):
        load_text(tmp_path, BASE + "[link\n")
    with pytest.raises(ScenarioError, match="no such file"):
        scenarios.load("no-such-scenario")


def test_household_scenario_caps_and_names_units(tmp_path):
    csv = tmp_path.parent / "h.csv"
    csv.write_text('"unit_id","medianUp","medianDown","medianLatency",'
                   '"monthly.charge","weight"\n7,1250000,25000000,20000,'
                   '60,1\n')
    text = BASE.replace('variants', 'kind = "households"\nvariants') + \
        f'[households]\ncsv = "{csv}"\nunits = [7]\n'
    s = load_text(tmp_path, text)
    assert [c.id for c in s.cases] == ["unit7-down", "unit7-up"]
    down, up = s.cases
    assert down.link["rate_mbit"] == 50 and down.meta["capped"]
    assert up.link["rate_mbit"] == 10 and not up.meta["capped"]
    assert down.meta["group"] == "$50+"
    with pytest.raises(ScenarioError, match="unit_id 8"):
        load_text(tmp_path, text.replace("units = [7]", "units = [8]"))


def test_parse_value():
    assert scenarios.parse_value("[1, 2]") == [1, 2]
    assert scenarios.parse_value("0.5") == 0.5
    assert scenarios.parse_value("copa") == "copa"


def test_measure_from_s_is_parsed(tmp_path):
    s = load_text(tmp_path, BASE, ["measure_from_s=4"])
    assert s.measure_from_s == 4
    assert load_text(tmp_path, BASE).measure_from_s == 0


@pytest.mark.parametrize("overrides,needle", [
    (["measure_from_s=10"], "measure_from_s: must be below duration_s = 10"),
    (["measure_from_s=12.5"], "measure_from_s: must be below duration_s"),
    (["measure_from_s=-1"], "measure_from_s: must be >= 0"),
    (["measure_from_s='30s'"], "measure_from_s: expected a number"),
    (["measure_from_s=true"], "measure_from_s: expected a number"),
    (["measure_from_s=5", "flows.0.duration_s=4"],
     "flows.0.duration_s: the first copy ends at 4 s, before "
     "measure_from_s = 5"),
])
def test_bad_measure_from_s_names_the_field(tmp_path, overrides, needle):
    with pytest.raises(ScenarioError, match=needle):
        load_text(tmp_path, BASE, overrides)


def test_large_bdp_scenario_is_a_2000_packet_bdp():
    from copa_tools.eval.lab import FRAME_BYTES, Link
    s = scenarios.load("large-bdp")
    (case,) = s.cases
    link = Link(**case.link)
    assert (link.rate_mbit, link.rtt_ms, link.buffer_bdp) == (24, 1000, 1.5)
    assert 1950 <= link.bdp_bytes / FRAME_BYTES <= 2050
    assert (s.duration_s, s.measure_from_s) == (90, 30)
    assert [v.spec for v in s.variants] == ["cubic", "bbr", "copa"]


FIXTURE_CSV = os.path.join(os.path.dirname(__file__), "fixtures",
                           "households.csv")


def households_text(extra):
    return BASE.replace('variants', 'kind = "households"\nvariants') + \
        f'[households]\ncsv = "{FIXTURE_CSV}"\n' + extra


def test_household_groups_select_price_groups(tmp_path):
    s = load_text(tmp_path, households_text(
        'groups = ["$0-30", "$30-40"]\nper_group = 1\nseed = 4\n'
        'directions = ["down"]\n'))
    assert [c.id for c in s.cases] == ["unit735-down", "unit904-down"]
    assert [c.meta["group"] for c in s.cases] == ["$0-30", "$30-40"]
    # the same from the command line, one group
    s = load_text(tmp_path, households_text(""),
                  ['households.groups=["$30-40"]', "households.per_group=1"])
    assert {c.meta["group"] for c in s.cases} == {"$30-40"}
    # units still select by id
    s = load_text(tmp_path, households_text("units = [475]\n"))
    assert [c.id for c in s.cases] == ["unit475-down", "unit475-up"]


@pytest.mark.parametrize("extra,needle", [
    ('groups = ["$0-20"]\n', "households.groups: unknown price group "
     "'\\$0-20' \\(the groups: '\\$0-30'"),
    ('groups = "$0-30"\n', "households.groups: expected a non-empty list"),
    ('groups = []\n', "households.groups: expected a non-empty list"),
    ('groups = ["$0-30", "$0-30"]\n', "listed twice"),
    ('groups = ["$0-30"]\nunits = [735]\n', "households.groups: select "
     "households either by units or by groups"),
    ('groups = ["$0-30"]\nper_group = 2\n', "group \\$0-30 has only 1"),
    ('per_group = 0\n', "households.per_group: must be >= 1"),
    ('seed = "x"\n', "households.seed: expected an integer"),
    ('units = 735\n', "households.units: expected a list of unit ids"),
    ('grups = ["$0-30"]\n', "households.grups: unknown field"),
])
def test_bad_household_selection_is_named(tmp_path, extra, needle):
    with pytest.raises(ScenarioError, match=needle):
        load_text(tmp_path, households_text(extra))


def test_households_cheap_samples_the_cheap_groups():
    s = scenarios.load("households-cheap")
    assert {c.meta["group"] for c in s.cases} == {"$0-30", "$30-40"}
    assert len({c.params["unit_id"] for c in s.cases}) == 6
    assert [c.id for c in s.cases] == \
        [c.id for c in scenarios.load("households-cheap").cases]


RANDOM = BASE.replace('variants', 'kind = "random_links"\nvariants') + """
[random_links]
count = 3
seed = 5
rate_mbit = [10, 24]
rtt_ms = [10, 150]
buffer_bdp = [0.5, 4]
policer_frac = [0.1, 0.6]
policer_burst = [10000, 80000]
"""


def test_shipped_random_links_draw_the_same_links_everywhere():
    # Pinned: a change to the draws (their order, rounding or ranges)
    # would make these scenarios measure other links than their results.
    coexistence = scenarios.load("coexistence")
    assert [c.link for c in coexistence.cases] == [
        {"rate_mbit": 15.66, "rtt_ms": 23.58, "buffer_bdp": 2.78},
        {"rate_mbit": 6.61, "rtt_ms": 58.23, "buffer_bdp": 1.78},
        {"rate_mbit": 6.09, "rtt_ms": 55.67, "buffer_bdp": 0.63},
        {"rate_mbit": 19.61, "rtt_ms": 16.29, "buffer_bdp": 0.82}]
    policers = scenarios.load("policer-random")
    assert [c.link for c in policers.cases] == [
        {"rate_mbit": 11.08, "rtt_ms": 39.91, "buffer_bdp": 1.56,
         "policer_burst": 44738, "policer_mbit": 6.09},
        {"rate_mbit": 20.08, "rtt_ms": 24.03, "buffer_bdp": 2.28,
         "policer_burst": 46596, "policer_mbit": 10.44},
        {"rate_mbit": 23.23, "rtt_ms": 133.45, "buffer_bdp": 1.8,
         "policer_burst": 62869, "policer_mbit": 2.32},
        {"rate_mbit": 11.77, "rtt_ms": 11.32, "buffer_bdp": 3.06,
         "policer_burst": 68560, "policer_mbit": 6.12},
        {"rate_mbit": 23.35, "rtt_ms": 38.23, "buffer_bdp": 0.79,
         "policer_burst": 78442, "policer_mbit": 3.74}]
    assert policers.cases[2].params["policer_frac"] == 0.1
    assert {c.meta["seed"] for c in policers.cases} == {32}
    assert [v.spec for v in policers.variants] == ["cubic", "bbr", "copa",
                                                   "copa_policer"]


def test_random_policers_are_seeded_and_in_range(tmp_path):
    a, b = load_text(tmp_path, RANDOM), load_text(tmp_path, RANDOM)
    assert [c.link for c in a.cases] == [c.link for c in b.cases]
    assert [c.params for c in a.cases] == [c.params for c in b.cases]
    for case in a.cases:
        link, drawn = case.link, case.params
        assert "policer_frac" not in link and case.meta == {"seed": 5}
        assert link["policer_mbit"] == round(drawn["policer_frac"]
                                             * link["rate_mbit"], 2)
        assert 0.1 <= drawn["policer_frac"] <= 0.6
        assert isinstance(link["policer_burst"], int)
        assert 10000 <= link["policer_burst"] <= 80000
        assert drawn["policer_mbit"] == link["policer_mbit"]
    # the first links of a seed do not depend on the count ...
    two = load_text(tmp_path, RANDOM, ["random_links.count=2"])
    assert [c.link for c in two.cases] == [c.link for c in a.cases[:2]]
    # ... and another seed draws other links
    other = load_text(tmp_path, RANDOM, ["random_links.seed=6"])
    assert [c.link for c in other.cases] != [c.link for c in a.cases]


def test_random_policer_with_a_fixed_burst(tmp_path):
    s = load_text(tmp_path, RANDOM.replace(
        "policer_burst = [10000, 80000]\n", ""), ["link.policer_burst=30000"])
    assert {c.link["policer_burst"] for c in s.cases} == {30000}


@pytest.mark.parametrize("overrides,needle", [
    (["random_links.policer_frac=[0.6, 0.1]"],
     "random_links.policer_frac: low 0.6 is above high 0.1"),
    (["random_links.policer_frac=[0.1, 1.5]"],
     "random_links.policer_frac: high must be <= 1 \\(a share of the "
     "link's rate_mbit\\), got 1.5"),
    (["random_links.policer_frac=[0, 0.5]"],
     "random_links.policer_frac: low must be > 0, got 0"),
    (["random_links.policer_frac=0.3"],
     "random_links.policer_frac: expected \\[low, high\\], two numbers, "
     "got 0.3"),
    (["random_links.policer_frac=[0.1, 'x']"],
     "random_links.policer_frac: expected \\[low, high\\]"),
    (["random_links.policer_frac=[0.1, 0.2, 0.3]"],
     "random_links.policer_frac: expected \\[low, high\\]"),
    (["random_links.policer_burst=[1000, 8000]"],
     "random_links.policer_burst: low must be >= 1514, got 1000"),
    (["random_links.rate_mbit=[10, 60]"],
     "random_links.rate_mbit: high must be <= 50 \\(max_rate_mbit"),
    (["random_links.rate_mbit=[0, 20]"],
     "random_links.rate_mbit: low must be > 0, got 0"),
    (["random_links.rtt_ms=[-5, 20]"],
     "random_links.rtt_ms: low must be >= 0, got -5"),
    (["random_links.buffer_bdp=[4, 0.5]"],
     "random_links.buffer_bdp: low 4 is above high 0.5"),
    (["random_links.rtt_ms=[10, inf]"], "random_links.rtt_ms: expected"),
    (["random_links.policer_rate=[1, 2]"],
     "random_links.policer_rate: unknown field"),
    (["link.policer_mbit=3"], "random_links.policer_frac: "
     "link.policer_mbit fixes the policer at 3 Mbit/s"),
    (["random_links.count=0"], "random_links.count: must be >= 1"),
    (["random_links.seed=1.5"], "random_links.seed: expected an integer"),
])
def test_bad_random_ranges_name_the_field(tmp_path, overrides, needle):
    with pytest.raises(ScenarioError, match=needle):
        load_text(tmp_path, RANDOM, overrides)


def test_a_random_burst_needs_a_policer(tmp_path):
    text = RANDOM.replace("policer_frac = [0.1, 0.6]\n", "")
    with pytest.raises(ScenarioError, match="random_links.policer_burst: a "
                       "burst without a policer: give policer_frac"):
        load_text(tmp_path, text)
    # with a fixed policer, the burst alone may be drawn
    s = load_text(tmp_path, text, ["link.policer_mbit=3"])
    assert {c.link["policer_mbit"] for c in s.cases} == {3}
    with pytest.raises(ScenarioError, match="random_links.rate_mbit: "
                       "expected \\[low, high\\], two numbers, got None"):
        load_text(tmp_path, RANDOM.replace("rate_mbit = [10, 24]\n", ""))
