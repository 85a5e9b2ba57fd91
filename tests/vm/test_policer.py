#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""copa_policer against a token-bucket policer.

Runs in the project VM (tests/run-vm) with tcp_copa and tcp_copa_policer
loaded. Retransmission overhead is bytes_retrans / bytes_acked from the
sender's tcp_info at the end of the flow.

- policed: 20 Mbit/s, 40 ms, 1 BDP FIFO, and on the router
  ``police rate 4mbit burst 20k drop``. With the loss reaction off
  (net.ipv4.tcp_copa.loss_reaction=0 for both, so that only the detector
  differs), copa_policer's overhead is <= 1/3 of copa's, its goodput >= 90%
  of copa's, and it is seen in the policed mode (4). CUBIC's and BBR's
  figures on the same link are printed beside them.
- policer_removed: the same policed link; the policer is removed 10 s
  into a copa_policer flow, which then reaches 80% of the link rate (1 s
  average goodput) within 5 s.
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from test_copa_link import Flow, Link, overhead, run_and_report, run_once, \
    throughput  # noqa: E402
from ksft import ksft_ge, ksft_pr, ksft_run  # noqa: E402

POLICED_LINK = Link(rate_mbit=20, rtt_ms=40, buffer_bdp=1, policer_mbit=4,
                    policer_burst=20000)
NO_LOSS_REACTION = {"net.ipv4.tcp_copa.loss_reaction": "0"}
OVERHEAD_CUT = 1 / 3            # copa_policer / copa retransmissions
GOODPUT_KEPT = 0.90             # copa_policer / copa goodput
REMOVE_AT_S = 10
REGAIN_S = 5
REGAIN_SHARE = 0.80             # of the link rate
REGAIN_AVERAGE_S = 1.0
MODE_POLICED = 4


def policed(name):
    """The run of flow ``name`` alone on the policed link."""
    flows = {"copa_policer": Flow("copa_policer", sysctls=NO_LOSS_REACTION),
             "copa": Flow("copa", sysctls=NO_LOSS_REACTION),
             "cubic": Flow("cubic"), "bbr": Flow("bbr")}
    return run_once(f"{name}, policed", POLICED_LINK, [flows[name]])


def print_policed_figures():
    for name in ("copa_policer", "copa", "cubic", "bbr"):
        res = policed(name)
        ksft_pr(f"policed link, {name}: goodput {throughput(res):.2f} "
                f"Mbit/s, retransmission overhead {overhead(res):.4f}")


def policer_detected():
    """copa_policer enters the policed mode (4) behind a policer."""
    modes = policed("copa_policer").flows[0].series.get("mode", [])
    ksft_pr(f"copa_policer mode every 100 ms: {modes}")
    ksft_ge(modes.count(MODE_POLICED), 1, "copa_policer detected the policer")


def policed_retransmits_less():
    """Detection cuts Copa's retransmissions under a policer."""
    print_policed_figures()
    pol, copa = overhead(policed("copa_policer")), overhead(policed("copa"))
    ksft_pr(f"overhead ratio copa_policer/copa: "
            f"{pol / copa if copa else float('inf'):.3f}")
    ksft_ge(OVERHEAD_CUT * copa, pol,
            "copa_policer overhead <= 1/3 of copa's")


def policed_keeps_goodput():
    """... without giving up goodput."""
    pol = throughput(policed("copa_policer"))
    copa = throughput(policed("copa"))
    ksft_pr(f"goodput copa_policer {pol:.2f}, copa {copa:.2f} Mbit/s")
    ksft_ge(pol, GOODPUT_KEPT * copa, "copa_policer goodput >= 90% of copa's")


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
        [Flow("copa_policer")], duration_s=REMOVE_AT_S + 10,
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
    ksft_ge(REGAIN_S, took, "copa_policer regains 80% of the link in 5 s")


if __name__ == "__main__":
    ksft_run([policer_detected, policed_retransmits_less,
              policed_keeps_goodput, policer_removed])
