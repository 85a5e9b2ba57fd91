#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Copa with a peer that does not do SACK (issue 32).

Without SACK the sender is Linux's NewReno: every duplicate ACK carries
an invalid rate sample (tcp_rate_gen(): rs->delivered = -1). Before
7e65c75, slow start's exit on a loss took max(rs->delivered, 0) = 0 as
what the path carried and set cwnd to 2 packets at every exit (the first
loss, and again after each retransmission timeout); now an invalid
sample leaves half the window.

The lab link (tests/vm/test_copa_link.py): 12 Mbit/s, 40 ms, a 1 BDP
FIFO. Each run is one iperf3 flow; "no SACK" runs set net.ipv4.tcp_sack=0
in the receiver's namespace before the connection, so its SYN-ACK does
not permit SACK. The sender namespace's TcpExt counters, read near the
end of each run, show which recovery ran (TCPSackRecovery or
TCPRenoRecovery) and how many retransmission timeouts there were
(TCPTimeouts). Ends of slow start come from the copa_update tracepoint:
an event in slow start followed by one that is not, "on a loss" if that
ACK cut cwnd by more than a tenth (Copa's end on the queue leaves it).

The tracepoint is recorded once for the whole test: enabling or
disabling a trace event starts or stops the recording of command lines,
which patches the sched_switch tracepoint's site in __schedule(). A
draft that recorded each run on its own stalled the VM (TCG) as the
seventh recording ended: vm-watch found vCPU 1 taking int3 at
__schedule+0x1bd over and over, in a netns teardown's rcu_barrier(),
and vCPU 0 spinning on a lock in try_to_wake_up() from the timer
interrupt.

- slow_start_exit_newreno: no SACK, no random loss, and a FIFO of
  SHALLOW_PKTS packets (SHALLOW_LINK), which slow start's doubling
  overflows before the queue it builds there (a few milliseconds) shows
  in RTTstanding: slow start ends on NewReno's third dupACK, on an
  invalid rate sample (with 1% random loss it ends on the queue in most
  runs). Some end of slow start in the run is on a loss, from EXIT_FROM
  packets or more, and every such end keeps at least EXIT_MIN of the
  window. The fixed modules kept half in each of seven runs (66 to 33,
  20 or 21 to 10 five times, 63 to 31; after a timeout 79 to 39 twice,
  81 to 40, 78 to 39, 90 to 45, 207 to 103); the modules of efce81c
  (before the fix) fell to 2 packets in each of four runs (from 77, 21
  twice, 79, and 81 twice).
- slow_start_exits_random_loss: 1% random loss (LINK); copa runs
  COPA_RUNS times with SACK and without, in turns, and cubic CUBIC_RUNS
  times each, for context (NewReno's recovery costs any congestion
  control throughput), each RUN_S seconds. In every copa run every end of
  slow start from EXIT_FROM packets or more keeps at least EXIT_MIN of
  the window, and the runs without SACK did NewReno recovery and no SACK
  recovery. EXIT_MIN is an eighth, EXIT_FROM 20 packets: the collapse
  this catches leaves 2 packets, under an eighth of 20, while an exit in
  the first rounds keeps what the round delivered, which can be under
  half (52 to 15, 0.29, with SACK in a CI-style run of b81e387; the
  model's worst in 1000 runs each way is 0.345).
  Most ends are on the queue, so this catches the old code only in some
  runs (three of four with the modules of efce81c). A loss in the first
  two rounds cut 22 packets to 4 with SACK in a CI-style run of ecc93f2:
  the sample then counted what arrived since the handshake. The
  model's slow_start_exit_random_loss runs this link 1000 times each way.
- nosack_throughput: in those runs copa without SACK moves at least
  NOSACK_VS_SACK x copa's own throughput with SACK (means over the runs):
  a window that collapses to its floor without SACK (2 packets a round
  trip, 0.58 Mbit/s, 0.05 of the SACK runs) cannot pass. Issue 32's
  goal is that NewReno Copa stays within the run-to-run spread of the
  SACK runs; the test prints every run, the ratio and whether the goal
  was met. It is not met: over seven runs of the test the ratio of the
  means was 0.25 to 0.92 (single runs without SACK 2.5 to 9.4 Mbit/s,
  with SACK 5.4 to 11.1, each run losing to timeouts): a NewReno sender
  takes few RTT samples under steady loss (none from a dupACK nor, by
  Karn, from an ACK that covers a retransmission), so Copa sees little of
  the queue it builds. Since a round without a sample restarts v at 1,
  the model (no_sack_stale_rtt) finds 0.88 of SACK's delivery on average
  over 100 seeds, 0.74 at the 10th percentile (0.81 and 0.64 before);
  issue 32's goal, 0.9 at the 10th percentile, waits
  (no_sack_random_loss_1pct_delivery, pending). Cubic's runs are printed
  for context, not compared: one 5 s run of cubic without SACK moved
  1.4 to 5.3 Mbit/s, and copa without SACK 0.59 to 4.9 times that. The
  bound leaves twice the worst ratio seen (0.25, the CI run of 3fa91d5)
  above it, and throughput does not tell the old code from the new (0.69
  to 0.89 of SACK with the modules of efce81c): the old slow start's
  ends cost a few round trips each.
"""

import contextlib
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from test_copa_link import Flow, Link, run_and_report, \
    throughput  # noqa: E402
from test_copa_undo import netstat  # noqa: E402
from copa_tools import params  # noqa: E402
from copa_tools.eval.lab import BASE_CPORT, Topology, experiment, \
    write_sysctls  # noqa: E402
from ksft import KsftFailEx, copa_recorded, ksft_ge, ksft_pr, \
    ksft_exit, ksft_run  # noqa: E402

LINK = Link(rate_mbit=12, rtt_ms=40, buffer_bdp=1, loss_pct=1)
SHALLOW_PKTS = 4
SHALLOW_LINK = Link(rate_mbit=12, rtt_ms=40, buffer_pkts=SHALLOW_PKTS)
RUN_S = 5
SHALLOW_RUN_S = 3
COPA_RUNS = 3
CUBIC_RUNS = 1
NO_SACK = {"net.ipv4.tcp_sack": "0"}
EXIT_FROM = 20              # packets: the floor of 2 is under EXIT_MIN
EXIT_MIN = 0.125            # of the window slow start ended from
LOSS_CUT = 0.9              # an end that leaves less of it is on a loss
NOSACK_VS_SACK = 0.12       # copa without SACK / copa with SACK (seen 0.25+)
COUNTERS = ("TCPTimeouts", "TCPSackRecovery", "TCPRenoRecovery")
MODE_SLOW_START = params.load().mode("slow_start")


@contextlib.contextmanager
def receiver_sysctls(sysctls):
    """Have run() also write ``sysctls`` in the receiver's namespace once
    its topology is built (the lab writes only the senders' sysctls)."""
    class Topo(Topology):
        def build(self):
            super().build()
            try:
                write_sysctls(self.receiver, sysctls)
            except BaseException:
                self.destroy()
                raise

    saved = experiment.Topology
    experiment.Topology = Topo
    try:
        yield
    finally:
        experiment.Topology = saved


def slow_start_exits(events):
    """(t, cwnd in slow start, cwnd after) of each end of slow start."""
    return [(b["t"] - events[0]["t"], a["cwnd"], b["cwnd"])
            for a, b in zip(events, events[1:])
            if a["mode"] == MODE_SLOW_START and
            b["mode"] != MODE_SLOW_START]


def on_loss(before, after):
    """Did slow start end on a loss? That ACK cut cwnd (to half, or to
    what the path delivered); the end on the queue leaves it, or trims
    it by the first step of draining."""
    return after < LOSS_CUT * before


def one_run(cc, sack, label, link=LINK, seconds=RUN_S):
    """Flow ``cc`` alone on ``link``, with SACK or without; a dict of its
    throughput, TcpExt counters and when it ran (time.monotonic())."""
    counters = {}

    def take(topo):
        counters.update(netstat(topo))

    start = time.monotonic()
    with receiver_sysctls({} if sack else NO_SACK):
        res = run_and_report(label, link, [Flow(cc)], duration_s=seconds,
                             events=[(seconds - 0.5, take)])
    run = {"label": label, "cc": cc, "mbit": throughput(res),
           "counters": {c: counters.get(c, 0) for c in COUNTERS},
           "during": (start, time.monotonic()), "exits": []}
    ksft_pr(f"  {label}: {run['mbit']:.2f} Mbit/s, {run['counters']}")
    return run


def add_exits(run, events):
    """Put the ends of slow start among ``events`` (copa_update of every
    run) that fall in ``run``'s time into it, and print them."""
    start, end = run["during"]
    run["exits"] = slow_start_exits([e for e in events
                                     if start <= e["t"] <= end])
    if run["cc"].startswith("copa"):
        ksft_pr(f"{run['label']}: ends of slow start")
    for t, before, after in run["exits"]:
        how = "on a loss" if on_loss(before, after) else "on the queue"
        ksft_pr(f"  at {t:.2f} s {how}: cwnd {before} -> {after} "
                f"({after / before:.2f})")


_runs = {}


def all_runs():
    """Every run, once per process: {"shallow": run, (cc, sack): [run,
    ...]}. One recording of the tracepoint covers them all: enabling and
    disabling a trace event patches the kernel's text (the sched_switch
    tracepoint, for the event's command lines), so the test does it once."""
    if _runs:
        return _runs
    runs = []
    with copa_recorded(match=f"sport == {BASE_CPORT}") as events:
        runs.append(one_run("copa", False, f"copa, no SACK, {SHALLOW_PKTS}-"
                            f"packet FIFO", SHALLOW_LINK, SHALLOW_RUN_S))
        _runs["shallow"] = runs[-1]
        for k in range(max(COPA_RUNS, CUBIC_RUNS)):
            for cc, count in (("copa", COPA_RUNS), ("cubic", CUBIC_RUNS)):
                for sack in (True, False):
                    if k < count:
                        runs.append(one_run(cc, sack, f"{cc}, "
                                            f"{'SACK' if sack else 'no SACK'}"
                                            f", 1% loss, run {k + 1}"))
                        _runs.setdefault((cc, sack), []).append(runs[-1])
    for run in runs:
        add_exits(run, events)
    if not all(r["mbit"] for r in runs):
        raise KsftFailEx("a run moved nothing")
    return _runs


def check_newreno(run):
    ksft_ge(run["counters"]["TCPRenoRecovery"] +
            run["counters"]["TCPTimeouts"], 1,
            f"{run['label']}: NewReno recovery or a timeout")
    ksft_ge(0, run["counters"]["TCPSackRecovery"],
            f"{run['label']}: no SACK recovery")


def slow_start_exit_newreno():
    """Slow start ends on NewReno dupACKs with half its window, not 2."""
    run = all_runs()["shallow"]
    check_newreno(run)
    lossy = [(before, after) for _, before, after in run["exits"]
             if on_loss(before, after) and before >= EXIT_FROM]
    ksft_ge(len(lossy), 1, f"slow start ended on a loss from "
            f"{EXIT_FROM}+ packets")
    for before, after in lossy:
        ksft_ge(after, EXIT_MIN * before,
                f"slow start from {before} packets keeps {EXIT_MIN:g} of "
                f"them")


def slow_start_exits_random_loss():
    """At 1% random loss no end of slow start drops to the floor."""
    runs = all_runs()
    for run in runs[("copa", False)] + runs[("cubic", False)]:
        check_newreno(run)
    exits = {sack: [e for r in runs[("copa", sack)] for e in r["exits"]
                    if e[1] >= EXIT_FROM] for sack in (True, False)}
    for sack in (True, False):
        worst = min((after / before for _, before, after in exits[sack]),
                    default=None)
        lossy = sum(on_loss(before, after) for _, before, after in
                    exits[sack])
        ksft_pr(f"copa {'with' if sack else 'without'} SACK: "
                f"{len(exits[sack])} ends of slow start from {EXIT_FROM}+ "
                f"packets ({lossy} on a loss), worst "
                f"{'-' if worst is None else f'{worst:.3f}'} of the window")
    for _, before, after in exits[True] + exits[False]:
        ksft_ge(after, EXIT_MIN * before,
                f"slow start from {before} packets keeps {EXIT_MIN:g} of "
                f"them")


def mean_mbit(runs):
    return statistics.mean(r["mbit"] for r in runs)


def nosack_throughput():
    """Copa without SACK keeps a share of its own throughput with SACK."""
    runs = all_runs()
    for (cc, sack), rs in sorted((k, v) for k, v in runs.items()
                                 if k != "shallow"):
        ksft_pr(f"{cc} {'with' if sack else 'without'} SACK: " + ", ".join(
            f"{r['mbit']:.2f}" for r in rs) + f" Mbit/s, mean "
            f"{mean_mbit(rs):.2f}; timeouts " + ", ".join(
            str(r["counters"]["TCPTimeouts"]) for r in rs))
    copa_sack = [r["mbit"] for r in runs[("copa", True)]]
    copa_nosack = mean_mbit(runs[("copa", False)])
    cubic_nosack = mean_mbit(runs[("cubic", False)])
    ratio = copa_nosack / statistics.mean(copa_sack)
    within = min(copa_sack) <= copa_nosack
    ksft_pr(f"copa without SACK / with SACK (means): {ratio:.3f}; "
            f"without SACK / cubic without SACK: "
            f"{copa_nosack / cubic_nosack:.3f}; issue 32's goal (within the "
            f"SACK runs' spread, {min(copa_sack):.2f} to "
            f"{max(copa_sack):.2f} Mbit/s): {'met' if within else 'not met'}")
    ksft_ge(ratio, NOSACK_VS_SACK,
            f"copa without SACK >= {NOSACK_VS_SACK:g} x copa with SACK")


if __name__ == "__main__":
    ksft_run([slow_start_exit_newreno, slow_start_exits_random_loss,
              nosack_throughput])
    ksft_exit()
