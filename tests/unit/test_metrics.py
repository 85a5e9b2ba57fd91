# SPDX-License-Identifier: GPL-2.0
"""Metric computations: on hand-computed values and on a recorded run."""
import json
import os

import pytest

from copa_tools.eval import metrics

FIXTURES = os.path.join(os.path.dirname(__file__), "fixtures")


def test_percentile_interpolates_between_ranks():
    assert metrics.percentile([4, 1, 3, 2], 50) == 2.5
    assert metrics.percentile([1, 2, 3, 4, 5], 95) == pytest.approx(4.8)
    assert metrics.percentile([7], 95) == 7
    assert metrics.percentile([], 50) is None


def test_percentile_rejects_out_of_range():
    with pytest.raises(ValueError):
        metrics.percentile([1], 101)


def test_distribution():
    assert metrics.distribution([10, 20, 30]) == {"mean": 20, "p50": 20,
                                                  "p95": pytest.approx(29)}


def test_jain_index():
    assert metrics.jain_index([5, 5, 5]) == pytest.approx(1.0)
    assert metrics.jain_index([10, 0]) == pytest.approx(0.5)
    assert metrics.jain_index([1, 3]) == pytest.approx(16 / 20)
    assert metrics.jain_index([]) is None
    assert metrics.jain_index([0, 0]) is None


def test_utilisation_and_rates():
    assert metrics.mbit_per_s(1_500_000, 1.0) == 12.0
    assert metrics.utilisation(9.0, 12.0) == 0.75
    assert metrics.utilisation(None, 12.0) is None
    assert metrics.mbit_per_s(100, 0) is None


def test_retrans_overhead():
    assert metrics.retrans_overhead(1448, 144800) == 0.01
    assert metrics.retrans_overhead(0, 0) is None


def test_queueing_delay_from_rtt_floors_at_zero():
    assert metrics.queueing_delays_ms([41000, 39500, 100000], 40) == \
        [1.0, 0.0, 60.0]


def test_backlog_delay():
    # 150 kB at 12 Mbit/s drain in 100 ms
    assert metrics.backlog_delay_ms(150_000, 12) == pytest.approx(100)


def test_rate_series_and_counter_rate():
    samples = [{"t": 0.0, "b": 0}, {"t": 0.5, "b": 750_000},
               {"t": 1.0, "b": 1_500_000}]
    assert metrics.rate_series(samples, "b") == [(0.5, 12.0), (1.0, 12.0)]
    assert metrics.counter_rate_mbit(samples, "b") == 12.0
    assert metrics.counter_rate_mbit(samples[:1], "b") is None


def test_fair_share_of_staggered_flows():
    # flow 0 alone for 10 s then shares with flow 1 for 10 s
    windows = [(0, 20), (10, 20)]
    assert metrics.fair_share_mbit(12, windows, 0) == pytest.approx(9.0)
    assert metrics.fair_share_mbit(12, windows, 1) == pytest.approx(6.0)


def test_jain_series_and_convergence():
    a = [(t / 2, 10.0) for t in range(1, 41)]                 # 0.5 .. 20 s
    b = [(10 + t / 2, 2.0 if t < 8 else 10.0) for t in range(1, 21)]
    points = metrics.jain_series([a, b], 1.0)
    assert points[0] == (1.0, 1.0)
    assert [j for t, j in points if t == 11.0][0] < 0.9
    # bin [14, 15) is the first fair one; points carry the bin end time
    assert metrics.convergence_time(points, 10.0) == pytest.approx(5.0)
    assert metrics.convergence_time([(t, 0.5) for t in range(20)], 0) is None


def _rows(columns):
    keys = list(columns)
    return [dict(zip(keys, values)) for values in zip(*columns.values())]


@pytest.mark.parametrize("name", ["flow-cubic.json", "flow-copa.json"])
def test_recorded_run_figures(name):
    """Recompute a recorded flow's figures from its raw tcp_info samples."""
    with open(os.path.join(FIXTURES, name)) as f:
        flow = json.load(f)
    with open(os.path.join(FIXTURES, "run.json")) as f:
        capacity = json.load(f)["link"]["capacity_mbit"]
    figures = metrics.flow_figures(_rows(flow["samples"]), flow["duration_s"],
                                   flow["base_rtt_ms"], capacity)
    for key in ("throughput_mbit", "utilisation", "bytes_acked",
                "bytes_retrans", "retrans_overhead", "qdelay_mean_ms",
                "qdelay_p50_ms", "qdelay_p95_ms"):
        assert figures[key] == pytest.approx(flow[key]), key
    for key, values in flow["series"].items():
        assert figures["series"][key] == pytest.approx(values), key
    window = [r for r in _rows(flow["samples"])
              if r["t"] <= flow["samples"]["t"][0] + flow["duration_s"]
              and r["state"] == metrics.TCP_ESTABLISHED]
    assert figures["throughput_mbit"] == pytest.approx(
        (window[-1]["bytes_acked"] - window[0]["bytes_acked"]) * 8
        / (window[-1]["t"] - window[0]["t"]) / 1e6)
    assert figures["retrans_overhead"] == pytest.approx(
        window[-1]["bytes_retrans"] / window[-1]["bytes_acked"])


def test_spread_of_repeats():
    s = metrics.spread([0.93, None, 0.91, 0.94, 0.92, 0.95])
    assert s["n"] == 5 and s["median"] == 0.93
    assert (s["min"], s["max"]) == (0.91, 0.95)
    assert s["range"] == pytest.approx(0.04)
    assert metrics.spread([]) == {"n": 0, "median": None, "min": None,
                                  "max": None, "range": None}
    assert metrics.spread([None])["median"] is None
    one = metrics.spread([7.0])
    assert (one["median"], one["range"]) == (7.0, 0)


def test_serialization_time_of_one_frame():
    # 1514 bytes at 1 Mbit/s: 12.1 ms; at 24 Mbit/s: 0.5 ms
    assert metrics.serialization_ms(1514, 1.0) == pytest.approx(12.112)
    assert metrics.serialization_ms(1514, 24) == pytest.approx(0.50467,
                                                               rel=1e-4)
    assert metrics.serialization_ms(1514, None) is None


def _samples(rate_bytes_per_s, rtts_us, retrans_at=None):
    """One sample a second: bytes_acked growing at the given rate."""
    out = []
    for k, rtt in enumerate(rtts_us):
        out.append({"t": float(k), "bytes_acked": rate_bytes_per_s * k,
                    "bytes_retrans": 1000 * (k >= retrans_at)
                    if retrans_at is not None else 0,
                    "rtt_us": rtt, "cwnd": 10, "state": 1})
    return out


def test_flow_figures_leave_out_the_warm_up():
    # 10 s: the first 4 s at a slow rate with 500 ms of queueing delay
    # and a retransmission, then 1.5 MB/s (12 Mbit/s) with 10 ms of delay
    samples = []
    acked = 0
    for k in range(11):
        acked += 500_000 if k <= 4 else 1_500_000
        samples.append({"t": float(k), "bytes_acked": acked if k else 0,
                        "bytes_retrans": 3000 if k >= 2 else 0,
                        "rtt_us": 540_000 if k < 4 else 50_000,
                        "cwnd": 10, "state": 1})
    whole = metrics.flow_figures(samples, 10, 40, 12)
    cut = metrics.flow_figures(samples, 10, 40, 12, measure_from_s=4)
    # counted exactly: bytes from t=4 to t=10 over 6 s
    expect = (samples[10]["bytes_acked"] - samples[4]["bytes_acked"]) * 8 \
        / 6 / 1e6
    assert cut["throughput_mbit"] == pytest.approx(expect)
    assert whole["throughput_mbit"] < cut["throughput_mbit"]
    assert cut["qdelay_mean_ms"] == pytest.approx(10.0)
    assert cut["qdelay_p95_ms"] == pytest.approx(10.0)
    assert whole["qdelay_p95_ms"] > 400
    # the retransmission happened in the warm-up
    assert cut["retrans_overhead"] == 0.0
    assert whole["retrans_overhead"] > 0
    # totals and series still cover the whole flow
    assert cut["bytes_acked"] == whole["bytes_acked"]
    assert cut["series"] == whole["series"]


def test_flow_figures_measure_from_before_the_flow_changes_nothing():
    samples = _samples(1_000_000, [50_000] * 6)
    for s in samples:
        s["t"] += 5                 # the flow starts at 5 s
    assert metrics.flow_figures(samples, 5, 40, 12, measure_from_s=3) == \
        metrics.flow_figures(samples, 5, 40, 12)
    # a measure start after the flow's last sample: figures are undefined
    late = metrics.flow_figures(samples, 5, 40, 12, measure_from_s=30)
    assert late["throughput_mbit"] is None and late["qdelay_mean_ms"] is None
    assert late["retrans_overhead"] is None
