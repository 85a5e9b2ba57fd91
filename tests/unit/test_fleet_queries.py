# SPDX-License-Identifier: GPL-2.0
"""copa-fleet's queries and report on a real ClickHouse engine (chDB,
in this process) over synthetic records written by the store: the
quantiles against numpy's, app-limited and NULL left out, Facebook's
retransmission overhead, the RTT reduction against a baseline, the CLI's
tables, CSV and plots, and a clear error for a baseline with no
records."""
import csv
import os
import random
import subprocess
import sys

import pytest
from conftest import TOOLS, needs_matplotlib

from copa_tools.fleet import queries, report, schema, store

chdb = pytest.importorskip("chdb", reason="chDB is missing (scripts/deps)")
np = pytest.importorskip("numpy")

T0 = 1_795_000_000
# (prefix, cc) -> (srtt median in us, delivery rate in bit/s, retrans %)
PATHS = {("192.0.2.0/24", "cubic"): (80_000, 2e6, 0.5),
         ("192.0.2.0/24", "copa"): (30_000, 2e6, 0.5),
         ("198.51.100.0/24", "cubic"): (20_000, 50e6, 5.0),
         ("198.51.100.0/24", "copa"): (15_000, 40e6, 4.0)}
CONNS = 40
SAMPLES = 12


def synthetic(paths=PATHS):
    """Records of CONNS connections per path, SAMPLES samples each 10 s
    apart and a final one; every fourth sample app-limited with a tiny
    rate, and some without tcp_info's newer fields (NULL). A path's
    min_rtt is half its srtt unless given as a fourth figure."""
    rng = random.Random(1)
    cookie = 0
    out = []
    for (prefix, cc), (srtt, rate, retr, *base) in paths.items():
        min_rtt = base[0] if base else srtt // 2
        for _ in range(CONNS):
            cookie += 1
            acked = rng.randint(10**5, 10**7)
            for i in range(SAMPLES + 1):
                r = {"time": T0 + 10 * i, "host": "h",
                     "kind": schema.FINAL if i == SAMPLES else
                     schema.SAMPLE, "cookie": cookie,
                     "local_addr": "10.0.0.1", "local_port": 443,
                     "peer_addr": prefix[:-4] + "9", "peer_port": 40000,
                     "peer_prefix": prefix, "cc": cc, "ab_arm": "",
                     "age_ms": 10_000 * i,
                     "srtt_us": int(rng.lognormvariate(0, 0.3) * srtt),
                     "min_rtt_us": min_rtt,
                     "bytes_acked": acked * (i + 1) // (SAMPLES + 1),
                     "bytes_retrans": int(acked * (i + 1) // (SAMPLES + 1)
                                          * retr / 100)}
                if i % 4 == 3:
                    r.update(delivery_rate_bps=1000, app_limited=1)
                elif i % 5 != 4:        # else: no rate (an old kernel)
                    r.update(delivery_rate_bps=int(
                        rng.uniform(0.5, 1.5) * rate), app_limited=0)
                out.append(r)
    return out


@pytest.fixture(scope="module")
def records():
    return synthetic()


@pytest.fixture(scope="module")
def state(tmp_path_factory, records):
    d = tmp_path_factory.mktemp("state")
    s = store.Store(str(d / "records"), "h",
                         rotate_bytes=len(records) * 40)  # a few files
    for i in range(0, len(records), 500):
        s.write(records[i:i + 500])
    s.close()
    return d


@pytest.fixture(scope="module")
def source(state, tmp_path_factory):
    files = store.snapshot(str(state / "records"),
                           str(tmp_path_factory.mktemp("scratch")))
    assert len(files) > 1
    return queries.file_source(files)


@pytest.fixture(scope="module")
def engine():
    return queries.Chdb()


def close(a, b, rel):
    return abs(a - b) <= rel * abs(b)


def test_every_query_runs(engine, source):
    group = ("192.0.2.0/24", "copa", None)
    for name, sql in queries.every_query(source, group).items():
        assert engine.rows(sql), name


def test_span(engine, source, records):
    [r] = engine.rows(queries.span(source))
    assert int(r["records"]) == len(records)
    assert sorted(r["ccs"]) == ["copa", "cubic"]


def test_per_prefix_quantiles_match_numpy(engine, source, records):
    rows = report.table(engine, source, "prefix", 0, 2**32 - 1)
    assert len(rows) == len(PATHS)
    for row in rows:
        mine = [r for r in records if (r["peer_prefix"], r["cc"]) ==
                (row["peer_prefix"], row["cc"])]
        assert row["connections"] == CONNS
        assert row["records"] == len(mine)
        srtt = np.array([r["srtt_us"] for r in mine]) / 1e3
        for name, q in zip(report.RTT_NAMES, queries.RTT_LEVELS):
            assert close(row[f"srtt_{name}_ms"], np.quantile(srtt, q), 0.05)
        rate = np.array([r["delivery_rate_bps"] for r in mine
                         if r.get("app_limited") == 0]) / 1e6
        assert rate.min() > 0.4 * PATHS[row["peer_prefix"], row["cc"]][1] \
            / 1e6                               # app-limited left out
        for name, q in zip(report.RATE_NAMES, queries.RATE_LEVELS):
            assert close(row[name], np.quantile(rate, q), 0.05), name


def test_retransmission_overhead(engine, source, records):
    """Bytes retransmitted over bytes acked, each connection counted once
    at its last (largest) counters."""
    rows = report.table(engine, source, "cc", 0, 2**32 - 1)
    for row in rows:
        last = {}
        for r in records:
            if r["cc"] == row["cc"]:
                last[r["cookie"]] = r
        want = sum(r["bytes_retrans"] for r in last.values()) / \
            sum(r["bytes_acked"] for r in last.values())
        assert close(row["retrans_overhead"], want, 1e-9)


def test_rtt_reduction_against_a_baseline(engine, source):
    rows = report.table(engine, source, "cc", 0, 2**32 - 1)
    [red] = report.rtt_reduction(rows, "cubic")
    by = {r["cc"]: r for r in rows}
    assert red["cc"] == "copa"
    for n in report.RTT_NAMES:
        b, v = by["cubic"][f"srtt_{n}_ms"], by["copa"][f"srtt_{n}_ms"]
        assert red[f"srtt_{n}"] == pytest.approx((b - v) / b)
    assert red["srtt_p50"] > 0.2        # copa's RTT is lower here


def test_unknown_baseline_is_a_clear_error(engine, source):
    rows = report.table(engine, source, "cc", 0, 2**32 - 1)
    with pytest.raises(report.ReportError,
                       match=r"'bbr' has no records; the records have "
                             r"\['copa', 'cubic'\]"):
        report.rtt_reduction(rows, "bbr")


def test_window_limits_the_records(engine, source):
    rows = report.table(engine, source, "cc", T0, T0 + 10)
    assert sum(r["records"] for r in rows) == len(PATHS) * CONNS
    rows = engine.rows(queries.windows(source, 60, 0, 2**32 - 1))
    assert {int(r["window_start"]) % 60 for r in rows} == {0}
    assert sum(int(r["records"]) for r in rows) == \
        len(PATHS) * CONNS * (SAMPLES + 1)


def test_cdf_points_rise(engine, source):
    for r in engine.rows(queries.cdf(source, "srtt_us", 0, 2**32 - 1)):
        pts = [float(x) for x in r["points"]]
        assert len(pts) == len(queries.CDF_LEVELS)
        assert pts == sorted(pts)


def cli(*args):
    return subprocess.run([sys.executable, "-m", "copa_tools.fleet.cli",
                           *args], capture_output=True, text=True,
                          timeout=120, env=dict(os.environ,
                                                PYTHONPATH=TOOLS))


@needs_matplotlib
def test_report_cli(state, tmp_path):
    r = cli("report", "--state-dir", str(state), "--baseline", "cubic",
            "--csv", str(tmp_path / "csv"), "--plots", str(tmp_path / "png"))
    assert r.returncode == 0, r.stderr
    assert "## Per peer prefix and congestion control" in r.stdout
    assert "| 198.51.100.0/24 | copa |" in r.stdout
    assert "## Peer prefixes by their paths" in r.stdout
    with open(tmp_path / "csv" / "by_cc.csv") as f:
        assert [row["cc"] for row in csv.DictReader(f)] == ["copa", "cubic"]
    assert sorted(os.listdir(tmp_path / "png")) == \
        ["cdf.png", "rate_vs_rtt.png", "worst_prefixes.png"]


def test_report_cli_errors(state, tmp_path):
    r = cli("report", "--state-dir", str(state), "--baseline", "bbr")
    assert r.returncode == 1
    assert "copa-fleet report: baseline 'bbr' has no records" in r.stderr
    r = cli("report", "--state-dir", str(tmp_path))
    assert r.returncode == 1 and "no records under" in r.stderr


# The four links of the fleet tests under cubic, as (srtt, rate,
# retransmitted %, min_rtt): policed (high loss at low delay), bloated
# (a queue twice the base RTT), lossy (random loss at low delay), clean.
LINKS = {("10.90.0.0/24", "cubic"): (120_000, 1.9e6, 0.1, 40_000),
         ("10.90.1.0/24", "cubic"): (62_000, 2.9e6, 6.0, 60_000),
         ("10.90.2.0/24", "cubic"): (63_000, 5e6, 1.0, 60_000),
         ("10.90.3.0/24", "cubic"): (25_000, 7.8e6, 0.1, 20_000),
         ("10.90.3.0/24", "copa"): (21_000, 7.5e6, 0.0, 20_000)}


def test_paths_rank_the_links(tmp_path, engine):
    """The paths table reads each prefix under the baseline, signs it as
    the controller's entry rules would, and puts the signed ones first."""
    s = store.Store(str(tmp_path / "records"), "h")
    s.write(synthetic(LINKS))
    s.close()
    files = store.snapshot(str(tmp_path / "records"), str(tmp_path))
    rows = report.paths(engine, queries.file_source(files), 0, 2**32 - 1,
                        "cubic")
    assert [(r["peer_prefix"], r["cc"], r["path"]) for r in rows] == [
        ("10.90.1.0/24", "cubic", "policed+lossy"),
        ("10.90.0.0/24", "cubic", "bloated"),
        ("10.90.2.0/24", "cubic", "lossy"),
        ("10.90.3.0/24", "cubic", None)]
    assert rows[0]["why"].startswith("retransmitted 6")
    assert 1.5 < rows[1]["qdelay_ratio"] < 2.5
    assert all(r["connections"] == CONNS for r in rows)
