# SPDX-License-Identifier: GPL-2.0
"""scripts/bpf-bench: which --perf samples count for a congestion
control, the summary, and --rates."""
import argparse
import os

import pytest

from conftest import load_script

PATH = os.path.join(os.path.dirname(__file__), "..", "..", "scripts",
                    "bpf-bench")
BENCH = load_script("bpf-bench", PATH)

# perf script -F ip,sym: an empty header line, then one frame per line.
SCRIPT = """
\tffffffff82099ff0 bbr_update_model
\tffffffff8209a100 bbr_main
\tffffffff82011111 tcp_ack

\tffffffff82011111 tcp_ack
\tffffffff81000000 ip_rcv

\tffffffffc0001000 bpf_prog_6deef7357e7b4530_copa_cong_control
\tffffffffc0002000 bpf__tcp_congestion_ops_cong_control
\tffffffff82011111 tcp_ack

\tffffffff81234567 tcp_slow_start
\tffffffff8209af80 cubictcp_cong_avoid
\tffffffff82011111 tcp_ack
"""


def test_a_sample_counts_once_if_its_chain_passes_through_the_cc():
    through = {cc: BENCH.samples_through(SCRIPT, frames)
               for cc, frames in BENCH.CC_FRAMES.items()}
    assert through == {"bbr": 1, "bpf_copa": 1, "cubic": 1}


def test_the_last_sample_counts_without_a_trailing_blank_line():
    assert BENCH.samples_through(SCRIPT.rstrip("\n"),
                                 BENCH.CC_FRAMES["cubic"]) == 1
    assert BENCH.samples_through("", BENCH.CC_FRAMES["bbr"]) == 0


def flow(rate, variant, gbps, rtt, cpu_s):
    return {"rate_gbit": rate, "variant": variant, "gbps": gbps,
            "rtt_mean_us": rtt, "cpu_s": cpu_s, "mbytes": 1000.0}


def test_the_summary_gives_each_figure_with_its_spread_and_over_cubics():
    rows = [flow(5, "cubic", 4.0, 1000, 0.5), flow(5, "bpf_copa d=0.5", 3.8,
                                                   100, 0.6),
            flow(5, "cubic", 4.2, 900, 0.7), flow(5, "bpf_copa d=0.5", 4.0,
                                                  140, 0.9),
            flow(0, "cubic", 50.0, 10, 1.0)]
    lines = BENCH.summary(rows)
    assert lines[2] == ("| 5 | cubic | 2 | 4.10 (4.00-4.20) | 1.00 | "
                        "950 (900-1000) | 1.00 | 0.600 (0.500-0.700) | 1.00 |")
    assert lines[3] == ("| 5 | bpf_copa d=0.5 | 2 | 3.90 (3.80-4.00) | 0.95 "
                        "| 120 (100-140) | 0.13 | 0.750 (0.600-0.900) | "
                        "1.25 |")
    assert lines[4].startswith("| loopback | cubic | 1 | 50.00 | 1.00 |")


def test_rates_are_positive_gbits_or_none():
    assert BENCH.rate_list("1,5,10") == [1.0, 5.0, 10.0]
    assert BENCH.rate_list("") == []
    for bad in ("x", "0", "-1", "nan", "inf"):
        with pytest.raises(argparse.ArgumentTypeError):
            BENCH.rate_list(bad)


def test_cwnd_clamps_are_windows_of_two_packets_or_more():
    assert BENCH.clamp_list("20,60") == [20, 60]
    assert BENCH.clamp_list("") == []
    for bad in ("x", "1", "0", "-5", "2.5"):
        with pytest.raises(argparse.ArgumentTypeError):
            BENCH.clamp_list(bad)


def test_a_flow_row_gives_the_data_each_ack_carries():
    row = dict(flow(1, "cubic cwnd<=20", 0.95, 240, 2.0), util=0.95,
               rtt_max_us=300, retrans=0, segs=100, acks=20000,
               softirq_s=1.0, sender_cpu_s=0.1)
    cells = [c.strip() for c in BENCH.fmt_row(row).split("|")[1:-1]]
    assert len(cells) == BENCH.HEAD.count("|") - 1
    assert cells[1] == "cubic cwnd<=20"
    assert cells[BENCH.HEAD.split("|")[1:-1].index(" KB/ack ")] == "50.0"
