#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""copa_policer against a token-bucket policer.

Runs in the project VM (tests/run-vm) with tcp_copa and tcp_copa_policer
loaded. Retransmission overhead is bytes_retrans / bytes_acked from the
sender's tcp_info at the end of the flow; goodput is bytes acked over the
flow's duration.

- policed links (issue 10's table): 20 Mbit/s, 40 ms, 1 BDP FIFO with
  ``police rate 4mbit burst 20k drop`` on the router, and 30 Mbit/s,
  30 ms with ``police rate 6mbit burst 30k``. On each, one flow at a time:
  cubic and copa_policer. The copa_policer flow is seen in the policed
  mode (4), retransmits at most POLICED_OVERHEAD x cubic's overhead and
  moves at least POLICED_GOODPUT of the policed rate. Issue 10's goals
  (cubic's overhead, 0.95 x bbr's goodput) are measured, with their
  spread and against bbr, by make bench's policer entries; here the
  bounds gate on what a broken detector cannot meet. Five runs in one VM
  boot at 1cd8eb0 measured 0.63x to 1.28x cubic's overhead and 0.87x to
  1.0x bbr's goodput (about 0.85 of the policed rate) over both links,
  and a CI run of the same algorithm 2.64x on the 4 Mbit/s link, where
  the start lost 222 packets in its first 1.3 s (the bimodal start
  described in Documentation/results/log.rst, "The loss matrix"): the
  bounds are twice the worst of those. A Copa that ignores loss
  retransmitted 131% there (issue 10's table), 70x cubic's.
- policer_removed: the 4 Mbit/s link; the policer is removed 10 s into a
  copa_policer flow, which then reaches 80% of the link rate (1 s
  average goodput) within REGAIN_S. A hold lasts up to 255 rounds (10.5 s
  at 41 ms) once probes keep meeting the policer, so the flow finds the
  policer gone at its next probe, up to 10.5 s later, and then climbs in
  about 1.5 s: at most 12 s, and REGAIN_S leaves 8 s for TCG's jitter
  (2.5 to 12.5 s in five runs at 1cd8eb0, 7.3 to 8.4 s in the five gate
  runs of issue 33 at 15 s). A hold that never ends never regains.
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from test_copa_link import Flow, Link, overhead, print_series, \
    run_and_report, run_once, throughput  # noqa: E402
from ksft import ksft_exit, ksft_ge, ksft_pr, ksft_run  # noqa: E402
from copa_tools import params  # noqa: E402

POLICED_LINKS = {
    "4 of 20 Mbit/s": Link(rate_mbit=20, rtt_ms=40, buffer_bdp=1,
                           policer_mbit=4, policer_burst=20000),
    "6 of 30 Mbit/s": Link(rate_mbit=30, rtt_ms=30, buffer_bdp=1,
                           policer_mbit=6, policer_burst=30000),
}
POLICED_LINK = POLICED_LINKS["4 of 20 Mbit/s"]
POLICED_OVERHEAD = 6.0          # copa_policer / cubic retransmissions
POLICED_GOODPUT = 0.40          # copa_policer goodput / the policed rate
REMOVE_AT_S = 10
REGAIN_S = 20
REGAIN_SHARE = 0.80             # of the link rate
REGAIN_AVERAGE_S = 1.0
MODE_POLICED = params.load().mode("policed")
FLOWS = {"cubic": Flow("cubic"), "copa_policer": Flow("copa_policer")}


def policed(link_name, flow_name):
    """The run of flow ``flow_name`` alone on policed link ``link_name``."""
    return run_once(f"{flow_name}, policed {link_name}",
                    POLICED_LINKS[link_name], [FLOWS[flow_name]])


def check_link(link_name):
    rate = POLICED_LINKS[link_name].policer_mbit
    cubic, res = policed(link_name, "cubic"), policed(link_name,
                                                      "copa_policer")
    for name, run in (("cubic", cubic), ("copa_policer", res)):
        ksft_pr(f"policed {link_name}, {name}: goodput "
                f"{throughput(run):.2f} Mbit/s, retransmission overhead "
                f"{overhead(run):.4f}")
    modes = res.flows[0].series.get("mode", [])
    ksft_pr(f"copa_policer mode every 100 ms: {modes}")
    if overhead(res) > POLICED_OVERHEAD * overhead(cubic):
        print_series(res)
    ksft_pr(f"{link_name}: overhead / cubic's "
            f"{overhead(res) / max(overhead(cubic), 1e-9):.2f}, goodput / "
            f"the policed rate {throughput(res) / rate:.3f}")
    ksft_ge(modes.count(MODE_POLICED), 1, "copa_policer detected the policer")
    ksft_ge(POLICED_OVERHEAD * overhead(cubic), overhead(res),
            f"copa_policer overhead <= {POLICED_OVERHEAD:g} x cubic's")
    ksft_ge(throughput(res), POLICED_GOODPUT * rate,
            f"copa_policer goodput >= {POLICED_GOODPUT:g} of the policed rate")


def policed_4_of_20():
    """Behind a 4 Mbit/s policer: cubic's loss, bbr's goodput."""
    check_link("4 of 20 Mbit/s")


def policed_6_of_30():
    """Behind a 6 Mbit/s policer: cubic's loss, bbr's goodput."""
    check_link("6 of 30 Mbit/s")


def rolling_mean(series, seconds):
    """(t, mean throughput over the ``seconds`` ending at t) pairs, for
    every sample time t with a full window behind it."""
    times, rates = series["t"], series["throughput_mbit"]
    out = []
    for end in times:
        if times and end - seconds >= times[0] - 0.05:
            window = [r for t, r in zip(times, rates)
                      if end - seconds < t <= end]
            out.append((end, sum(window) / len(window)))
    return out


def policer_removed():
    """Once the policer is gone, copa_policer climbs back to the link."""
    res = run_and_report(
        "copa_policer, policer removed at 10 s", POLICED_LINK,
        [Flow("copa_policer")], duration_s=REMOVE_AT_S + REGAIN_S + 3,
        events=[(REMOVE_AT_S, lambda topo: topo.remove_policer())])
    series = res.flows[0].series
    avg = rolling_mean(series, REGAIN_AVERAGE_S)
    goal = REGAIN_SHARE * POLICED_LINK.rate_mbit
    after = [(t, r) for t, r in avg if t >= REMOVE_AT_S]
    ksft_pr("1 s goodput after removal (t s: Mbit/s): " + ", ".join(
        f"{t:.1f}: {r:.1f}" for t, r in after[::5]))
    ksft_pr("mode after removal: " + str([
        m for t, m in zip(series["t"], series.get("mode", []))
        if t >= REMOVE_AT_S][::5]))
    regained = [t for t, r in after if r >= goal]
    took = regained[0] - REMOVE_AT_S if regained else float("inf")
    ksft_pr(f"reached {goal:.1f} Mbit/s {took:.1f} s after the removal")
    ksft_ge(REGAIN_S, took,
            f"copa_policer regains 80% of the link in {REGAIN_S} s")


if __name__ == "__main__":
    ksft_run([policed_4_of_20, policed_6_of_30, policer_removed])
    ksft_exit()
