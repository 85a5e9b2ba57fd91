# SPDX-License-Identifier: GPL-2.0
"""Reports from a results directory built of recorded fixture files."""
import csv
import json
import os
import shutil

import pytest

from conftest import HAVE_MATPLOTLIB, needs_matplotlib
from copa_tools.eval import report

FIXTURES = os.path.join(os.path.dirname(__file__), "fixtures")


@pytest.fixture
def outdir(tmp_path):
    run = tmp_path / "runs" / "base__copa__r1"
    run.mkdir(parents=True)
    shutil.copy(os.path.join(FIXTURES, "run.json"), run / "run.json")
    shutil.copy(os.path.join(FIXTURES, "flow-copa.json"), run / "flow0.json")
    shutil.copy(os.path.join(FIXTURES, "flow-cubic.json"), run / "flow1.json")
    (tmp_path / "runs" / "unfinished.partial").mkdir()
    (tmp_path / "manifest.json").write_text(json.dumps({
        "scenario": "demo", "kernel": "6.1.0", "git": "abc",
        "command": "copa-eval run demo",
        "resolved": {"description": "fixture run"}}))
    return str(tmp_path)


def test_reports_are_written_and_consistent(outdir):
    records, rows, agg = report.write_reports(outdir, plot=HAVE_MATPLOTLIB)
    assert len(records) == 1 and len(rows) == 2
    for name in ("summary.csv", "summary.md") + (
            ("scatter.png",) if HAVE_MATPLOTLIB else ()):
        assert os.path.getsize(os.path.join(outdir, name)) > 0
    with open(os.path.join(outdir, "summary.csv")) as f:
        table = list(csv.DictReader(f))
    flows = [json.load(open(os.path.join(outdir, "runs", "base__copa__r1",
                                         f"flow{i}.json"))) for i in (0, 1)]
    for row, flow in zip(table, flows):
        assert row["cc"] == flow["cc"]
        assert float(row["throughput_mbit"]) == pytest.approx(
            flow["throughput_mbit"], rel=1e-5)
    # the aggregate takes the variant's flow; cubic is the competitor
    assert agg[0]["throughput_mbit"] == flows[0]["throughput_mbit"]
    assert agg[0]["competitor_share"] == flows[1]["share"]
    md = open(os.path.join(outdir, "summary.md")).read()
    assert "| base | copa |" in md and "fixture run" in md


def test_headline_ratios():
    agg = [{"case": "c", "variant": "cubic", "throughput_mbit": 10.0,
            "qdelay_p95_ms": 100.0, "retrans_overhead": 0.01},
           {"case": "c", "variant": "bbr", "throughput_mbit": 8.0,
            "qdelay_p95_ms": 20.0, "retrans_overhead": 0.0},
           {"case": "c", "variant": "copa", "throughput_mbit": 9.0,
            "qdelay_p95_ms": 10.0, "retrans_overhead": 0.0}]
    (ratios,) = report.headline_ratios(agg)
    assert ratios["throughput / cubic"] == pytest.approx(0.9)
    assert ratios["p95 qdelay / bbr"] == pytest.approx(0.5)
    assert ratios["retrans / cubic"] == 0.0
    assert ratios["retrans / bbr"] == 1.0        # 0 / 0: the same
    assert "| c | copa | 0.90 |" in report.ratio_table([ratios])


def test_group_summary_takes_medians():
    rows = [{"role": "variant", "group": "$0-30", "direction": "down",
             "variant": "copa", "case": f"u{i}", "utilisation": u,
             "qdelay_mean_ms": d, "qdelay_p95_ms": d * 2}
            for i, (u, d) in enumerate([(0.5, 10), (0.9, 30), (0.7, 20)])]
    (group,) = report.group_summary(rows)
    assert (group["households"], group["utilisation"],
            group["qdelay_mean_ms"]) == (3, 0.7, 20)


@needs_matplotlib
def test_plots_of_households_and_time_series(tmp_path):
    from copa_tools.eval import plots
    rows = [{"role": "variant", "group": group, "variant": variant,
             "case": f"unit{i}-down", "repeat": 1, "utilisation": 0.5 + i / 10,
             "qdelay_mean_ms": 10.0 * (i + 1)}
            for i, group in enumerate(("$0-30", "$30-40", "$40-50", "$50+"))
            for variant in ("cubic", "copa")]
    plots.households(rows, str(tmp_path / "households.png"))
    record = json.load(open(os.path.join(FIXTURES, "run.json")))
    record["flows"] = [json.load(open(os.path.join(FIXTURES, name)))
                       for name in ("flow-copa.json", "flow-cubic.json")]
    plots.timeseries(record, str(tmp_path / "timeseries.png"))
    record["link_stats"]["measure_from_s"] = 4
    plots.timeseries(record, str(tmp_path / "warmup.png"))
    for name in ("households.png", "timeseries.png", "warmup.png"):
        assert (tmp_path / name).stat().st_size > 10000


def test_bench_publishes_the_document_only(tmp_path):
    """The bench writes its document; the README's headline table is
    updated by hand."""
    from copa_tools.eval import cli
    (tmp_path / "bench.md").write_text("tables\n")
    (tmp_path / "summary.md").write_text("summary\n")
    doc = tmp_path / "doc" / "bench.md"
    cli.publish(str(tmp_path), str(doc))
    assert doc.read_text() == "tables\n"
    assert sorted(os.listdir(tmp_path)) == ["bench.md", "doc", "summary.md"]


def test_bench_summary_keeps_text_columns():
    from copa_tools.eval import cli
    rows = [{"scenario": "loss", "case": "loss_pct=1", "variant": "copa",
             "throughput / cubic": 2.5, "retrans / cubic": None}]
    text = cli.summary_markdown("head", rows)
    assert "| loss | loss_pct=1 | copa | 2.50 | - |" in text


def test_bench_span_covers_every_run():
    from copa_tools.eval import cli
    records = [{"started": "2026-01-01T10:30:00", "wall_s": 40},
               {"started": "2026-01-01T10:00:00", "wall_s": 20}]
    assert cli.runs_span_s(records) == 30 * 60 + 40
    assert cli.runs_span_s([]) is None


def _row(case, variant, repeat, util, qmean, qp95, **extra):
    row = {"case": case, "variant": variant, "repeat": repeat,
           "role": "variant", "utilisation": util,
           "throughput_mbit": util * 12, "qdelay_mean_ms": qmean,
           "qdelay_p95_ms": qp95, "link_qdelay_mean_ms": qmean - 1,
           "link_qdelay_p95_ms": qp95 - 1}
    row.update(extra)
    return row


REPEATED = [_row("base", "copa", k + 1, u, m, p) for k, (u, m, p) in
            enumerate([(0.93, 5.0, 8.0), (0.95, 4.0, 7.0), (0.92, 6.0, 9.0),
                       (0.94, 5.5, 8.5), (0.935, 4.5, 7.5)])] + \
    [_row("base", "cubic", k + 1, 0.94, 130.0, 160.0) for k in range(5)]


def test_aggregate_takes_medians_and_spreads_over_repeats():
    copa, cubic = report.aggregate(REPEATED)
    assert copa["runs"] == 5
    assert copa["utilisation"] == 0.935
    assert copa["qdelay_mean_ms"] == 5.0
    assert copa["link_qdelay_p95_ms"] == 7.0
    spread = copa["spread"]["utilisation"]
    assert (spread["min"], spread["max"]) == (0.92, 0.95)
    assert spread["range"] == pytest.approx(0.03)
    assert cubic["spread"]["qdelay_p95_ms"]["range"] == 0


def test_aggregate_averages_flows_within_a_run_first():
    rows = [_row("c", "copa", 1, 0.4, 10.0, 20.0),
            _row("c", "copa", 1, 0.6, 20.0, 30.0),
            _row("c", "copa", 2, 0.9, 30.0, 40.0)]
    (agg,) = report.aggregate(rows)
    # runs: 0.5 and 0.9 -> median 0.7 (not the mean of the three flows)
    assert agg["runs"] == 2 and agg["utilisation"] == pytest.approx(0.7)


def test_tables_show_the_spread_only_with_repeats():
    agg = report.aggregate(REPEATED)
    table = report.markdown_table(agg, ("case", "variant"))
    head = table.splitlines()[0]
    assert "runs" in head and "util min-max (range)" in head
    assert "backlog qdelay mean ms" in head
    assert "| 5 | 0.920-0.950 (3.0 pts) | 4.0-6.0 (2.0) | 7.0-9.0 (2.0) |" \
        in table
    single = report.aggregate([r for r in REPEATED if r["repeat"] == 1])
    assert "min-max" not in report.markdown_table(single, ("case",
                                                           "variant"))
    (copa, cubic) = report.spread_rows(agg)
    assert copa["util median"] == "0.935"
    assert copa["util min-max (range)"] == "0.920-0.950 (3.0 pts)"
    assert report.spread_rows(single) == []


def test_spread_cell_without_values():
    assert report.spread_cell(None, 3) == "-"
    assert report.spread_cell({"min": None}, 3) == "-"


def test_household_rows_put_backlog_beside_srtt_and_show_the_floor():
    rows = [_row("unit1-up", v, 1, u, m, p, group="$0-30", direction="up",
                 rate_mbit=1.0, rtt_ms=40.0)
            for v, u, m, p in (("cubic", 0.95, 60.0, 80.0),
                               ("copa", 0.94, 15.0, 30.0))]
    agg = report.aggregate(rows)
    cubic, copa = report.household_rows(rows, agg)
    assert copa["1 frame ms"] == pytest.approx(12.112)
    assert copa["group"] == "$0-30" and copa["Mbit/s"] == 1.0
    assert copa["qdelay mean ms"] == 15.0 and copa["backlog mean ms"] == 14.0
    assert copa["mean qdelay / cubic"] == pytest.approx(0.25)
    assert copa["p95 qdelay / cubic"] == pytest.approx(30 / 80)
    assert copa["backlog p95 / cubic"] == pytest.approx(29 / 79)
    assert copa["throughput / cubic"] == pytest.approx(0.94 / 0.95)
    assert cubic["throughput / cubic"] is None
    table = report.household_table([cubic, copa])
    assert "| unit1-up | $0-30 | 1.000 | 40.0 | 12.1 | copa | 0.940 |" \
        in table
    assert report.household_rows([_row("base", "copa", 1, 0.9, 1, 2)],
                                 agg) == []
    assert report.household_table([]) == ""


def test_report_frame_size_is_the_labs():
    from copa_tools.eval import lab
    assert report.FRAME_BYTES == lab.FRAME_BYTES


def test_headline_ratios_include_mean_qdelay():
    agg = [{"case": "c", "variant": "cubic", "qdelay_mean_ms": 100.0},
           {"case": "c", "variant": "copa", "qdelay_mean_ms": 5.0}]
    (ratios,) = report.headline_ratios(agg)
    assert ratios["mean qdelay / cubic"] == pytest.approx(0.05)


def _policed_outdir(tmp_path):
    """A results directory of two random policed links, each with cubic,
    bbr, copa and copa_policer: throughput and retransmissions below."""
    figures = {  # (link, variant): (Mbit/s, retrans_overhead)
        ("link0", "cubic"): (5.0, 0.020), ("link0", "bbr"): (5.8, 0.080),
        ("link0", "copa"): (5.7, 0.030), ("link0", "copa_policer"):
        (5.6, 0.010),
        ("link1", "cubic"): (2.0, 0.040), ("link1", "bbr"): (2.2, 0.100),
        ("link1", "copa"): (2.0, 0.020), ("link1", "copa_policer"):
        (2.15, 0.030)}
    links = {"link0": dict(rate_mbit=11.08, rtt_ms=39.91, buffer_bdp=1.56,
                           policer_mbit=6.09, policer_burst=44738),
             "link1": dict(rate_mbit=23.23, rtt_ms=133.45, buffer_bdp=1.8,
                           policer_mbit=2.32, policer_burst=62869)}
    from copa_tools.eval.lab import Link
    run = json.load(open(os.path.join(FIXTURES, "run.json")))
    flow = json.load(open(os.path.join(FIXTURES, "flow-copa.json")))
    for seq, ((case, variant), (mbit, retrans)) in enumerate(
            figures.items()):
        name = f"{case}__{variant}__r1"
        d = tmp_path / "runs" / name
        d.mkdir(parents=True)
        rec = dict(run, case=case, run=name, seq=seq,
                   case_meta={"seed": 32}, link=Link(**links[case]).to_dict(),
                   variant={"spec": variant, "cc": variant, "sysctls": {}})
        (d / "run.json").write_text(json.dumps(rec))
        (d / "flow0.json").write_text(json.dumps(dict(
            flow, cc=variant, run=name, throughput_mbit=mbit,
            retrans_overhead=retrans)))
    (tmp_path / "manifest.json").write_text(json.dumps({
        "scenario": "policer-random", "kernel": "6.1.0", "git": "abc",
        "command": "copa-eval run policer-random",
        "resolved": {"description": "random policers"}}))
    return str(tmp_path)


def test_drawn_links_and_policer_goals(tmp_path):
    outdir = _policed_outdir(tmp_path)
    records, rows, agg = report.write_reports(outdir, plot=False)
    links = report.drawn_links(records)
    assert [e["link"] for e in links] == ["link0", "link1"]
    assert links[0]["seed"] == 32 and links[0]["policer Mbit/s"] == 6.09
    assert links[0]["burst bytes"] == 44738
    assert links[0]["burst ms"] == pytest.approx(44738 * 8 / 6090)
    assert links[1]["policer / rate"] == pytest.approx(0.0999, abs=1e-3)
    goals = report.policer_goals(report.headline_ratios(agg), records)
    by = {(g["link"], g["variant"]): g for g in goals}
    assert set(by) == {(c, v) for c in ("link0", "link1")
                       for v in ("copa", "copa_policer")}
    g = by[("link0", "copa_policer")]
    assert g["retrans / cubic"] == pytest.approx(0.5)
    assert g["goodput / bbr"] == pytest.approx(5.6 / 5.8)
    assert g["goals met"] == "retrans, goodput"
    assert by[("link0", "copa")]["goals met"] == "goodput"     # 1.5x cubic
    assert by[("link1", "copa")]["goals met"] == "retrans"     # 0.91 of bbr
    summary = {r["variant"]: r for r in report.policer_goal_summary(goals)}
    pol = summary["copa_policer"]
    assert pol["links"] == "2"
    assert pol["retrans / cubic median"] == pytest.approx((0.5 + 0.75) / 2)
    assert pol["retrans / cubic min-max"] == "0.50-0.75"
    assert pol["links <= 1"] == "2/2" and pol["links >= 0.95"] == "2/2"
    assert summary["copa"]["links <= 1"] == "1/2"
    md = open(os.path.join(outdir, "summary.md")).read()
    assert "## Links drawn with seed 32" in md
    assert "| link | Mbit/s | RTT ms | FIFO BDP | FIFO bytes | policer " \
        "Mbit/s | policer / rate | burst bytes | burst ms |" in md
    assert "| link1 | 23.23 | 133.45 | 1.80 | 697510 | 2.32 | 0.10 | " \
        "62869 | 216.8 |" in md
    assert "## Policer goals" in md and "retrans / cubic <= 1 and " \
        "goodput / bbr >= 0.95" in md
    assert "| link0 | copa_policer | 0.50 | 0.966 | retrans, goodput |" in md
    # 3 digits for goodput: copa's median 0.946 misses 0.95
    assert "| copa | 2 | 1.00 | 0.50-1.50 | 1/2 | 0.946 | 0.909-0.983 | " \
        "1/2 |" in md
    assert "| copa_policer | 2 | 0.62 | 0.50-0.75 | 2/2 | 0.971 | " \
        "0.966-0.977 | 2/2 |" in md


def test_bench_section_and_summary_carry_links_and_goals(tmp_path):
    from copa_tools.eval import cli, scenarios
    outdir = _policed_outdir(tmp_path)
    records, rows, agg = report.write_reports(outdir, plot=False)
    ratios = report.headline_ratios(agg)
    scenario = scenarios.load("policer-random")
    text = cli.bench_section(scenario, agg, ratios, rows, records)
    assert "#### Links drawn with seed 32" in text
    assert "#### Policer goals" in text
    goals = [{"scenario": "policer-random", **r} for r in
             report.policer_goal_summary(report.policer_goals(ratios,
                                                              records))]
    summary = cli.summary_markdown("head", [], (), goals)
    assert "Policer goals (retrans / cubic <= 1 and goodput / bbr >= " \
        "0.95)" in summary
    assert "| policer-random | copa_policer | 2 | 0.62 | 0.50-0.75 | 2/2 |" \
        in summary
    assert "Policer goals" not in cli.summary_markdown("head", [])


def test_no_links_nor_goals_without_random_links_or_policers(outdir):
    records, rows, agg = report.write_reports(outdir, plot=False)
    assert report.drawn_links(records) == []
    assert report.random_links_sections(
        records, report.headline_ratios(agg), "## ") == []
