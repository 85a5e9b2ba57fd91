# SPDX-License-Identifier: GPL-2.0
"""Reports from a results directory built of recorded fixture files."""
import csv
import json
import os
import shutil

import pytest

from copa_eval import report

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
    records, rows, agg = report.write_reports(outdir, plot=True)
    assert len(records) == 1 and len(rows) == 2
    for name in ("summary.csv", "summary.md", "scatter.png"):
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


def test_plots_of_households_and_time_series(tmp_path):
    from copa_eval import plots
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
    for name in ("households.png", "timeseries.png"):
        assert (tmp_path / name).stat().st_size > 10000


def test_readme_splice_replaces_only_the_bench_section():
    from copa_eval import cli
    text = (f"# Copa\nintro\n{cli.README_BEGIN}\nold table\n"
            f"{cli.README_END}\nrest\n")
    out = cli.splice_readme(text, "new table\n")
    assert out == (f"# Copa\nintro\n{cli.README_BEGIN}\nnew table\n"
                   f"{cli.README_END}\nrest\n")
    assert cli.splice_readme(out, "new table\n") == out


def test_readme_splice_needs_both_markers():
    from copa_eval import cli
    with pytest.raises(ValueError, match="bench"):
        cli.splice_readme(f"{cli.README_END}\n{cli.README_BEGIN}\n", "x")
    with pytest.raises(ValueError, match="bench"):
        cli.splice_readme("no markers\n", "x")


def test_readme_has_the_bench_section():
    from copa_eval import cli
    with open(cli.README) as f:
        cli.splice_readme(f.read(), "x\n")


def test_bench_summary_keeps_text_columns():
    from copa_eval import cli
    rows = [{"scenario": "loss", "case": "loss_pct=1", "variant": "copa",
             "throughput / cubic": 2.5, "retrans / cubic": None}]
    text = cli.summary_markdown("head", rows)
    assert "| loss | loss_pct=1 | copa | 2.50 | - |" in text


def test_bench_span_covers_every_run():
    from copa_eval import cli
    records = [{"started": "2026-01-01T10:30:00", "wall_s": 40},
               {"started": "2026-01-01T10:00:00", "wall_s": 20}]
    assert cli.runs_span_s(records) == 30 * 60 + 40
    assert cli.runs_span_s([]) is None
