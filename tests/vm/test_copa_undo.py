#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""A spurious timeout: the undo restores Copa's window and delta.

The lab link (tests/vm/test_copa_link.py) at 12 Mbit/s, 40 ms, 1 BDP
FIFO, one busy copa flow (iperf3) for RUN_S seconds. At SPIKE_AT_S the
router's ACK-path netem delay goes from 40 ms to SPIKE_MS, and back to
40 ms SPIKE_S after tc applied the change. The ACKs of the data in
flight at the spike are held 1.5 s: the retransmission timer (about
250 ms) fires, the stack enters Loss (cwnd 1, Copa restarts in slow
start after copa_ssthresh() saved cwnd and 1/delta), and when the held
ACKs arrive they acknowledge data
sent before the retransmission (its timestamp echo is older; F-RTO,
net.ipv4.tcp_frto=2, sees never-retransmitted data acknowledged): the
stack undoes the timeout and calls undo_cwnd. TcpExtTCPTimeouts,
TcpExtTCPLossUndo and TcpExtTCPSpuriousRTOs of the sender's namespace are
read before and after the spike.

In the copa_update tracepoint the spike is the longest silence (no ACK,
no event) after the first SPIKE_AT_S / 2 seconds. "Before" is the last
event before it (cwnd cannot change without an ACK), "the undo" the first
event after it.

- spurious_rto_undone: the timeout happened and the kernel undid it
  (TCPTimeouts and TCPLossUndo + TCPSpuriousRTOs each grew by at least 1).
- undo_restores_cwnd: within UNDO_RTTS x RTTmin of the undo (tracepoint
  time) some event shows cwnd within RESTORE_TOL of the cwnd before the
  spike, and delta_milli within RESTORE_TOL of its value before it. A
  restart from slow start (no undo, or an undo that ignores what
  ssthresh() saved) needs about log2(cwnd) = 5 RTTs to get back.
"""

import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from test_copa_link import Flow, Link, run_once  # noqa: E402
from copa_tools.eval.lab import BASE_CPORT  # noqa: E402
from copa_tools.netlink import in_netns  # noqa: E402
from ksft import copa_recorded, ksft_ge, ksft_pr, ksft_exit, ksft_run  # noqa: E402

RUN_S = 20
SPIKE_AT_S = 8
SPIKE_S = 1
SPIKE_MS = 1500
LINK = Link(rate_mbit=12, rtt_ms=40, buffer_bdp=1)
UNDO_RTTS = 2
RESTORE_TOL = 0.10
COUNTERS = ("TCPTimeouts", "TCPLossUndo", "TCPSpuriousRTOs")

_counters = {}
_run = {}


def netstat(topo):
    """TcpExt counters of the sender's namespace."""
    with in_netns(topo.senders[0]):
        with open("/proc/net/netstat") as f:
            lines = f.read().splitlines()
    for head, values in zip(lines[::2], lines[1::2]):
        if head.startswith("TcpExt:"):
            return dict(zip(head.split()[1:], map(int, values.split()[1:])))
    return {}


def snapshot(name):
    def take(topo):
        _counters[name] = netstat(topo)
    take.__name__ = f"netstat_{name}"
    return take


def spike(topo):
    """SPIKE_S of SPIKE_MS ACK delay, timed from when tc applied it (a tc
    process takes up to a second to start under TCG); the lab's sampling
    pauses meanwhile."""
    topo.set_rtt(SPIKE_MS)
    time.sleep(SPIKE_S)
    topo.set_rtt(LINK.rtt_ms)


def spike_run():
    if not _run:
        with copa_recorded(match=f"sport == {BASE_CPORT}") as events:
            res = run_once("copa, ACK delay spike", LINK, [Flow("copa")],
                           duration_s=RUN_S, events=[
                (SPIKE_AT_S - 1, snapshot("before")),
                (SPIKE_AT_S, spike),
                (RUN_S - 1, snapshot("after"))])
        _run.update(res=res, events=events)
    return _run["res"], _run["events"]


def spurious_rto_undone():
    """The delay spike fires the timer, and the stack undoes it."""
    spike_run()
    before, after = _counters.get("before", {}), _counters.get("after", {})
    grew = {c: after.get(c, 0) - before.get(c, 0) for c in COUNTERS}
    ksft_pr(f"TcpExt counters over the spike: {grew}")
    ksft_ge(grew["TCPTimeouts"], 1, "a retransmission timeout")
    ksft_ge(grew["TCPLossUndo"] + grew["TCPSpuriousRTOs"], 1,
            "the timeout was undone")


def undo_restores_cwnd():
    """The undo brings back cwnd and delta from before the spike."""
    _, events = spike_run()
    ksft_ge(len(events), 2, "copa_update events recorded")
    start = events[0]["t"]
    gaps = [(b["t"] - a["t"], i) for i, (a, b) in
            enumerate(zip(events, events[1:]))
            if a["t"] >= start + SPIKE_AT_S / 2]
    ksft_ge(len(gaps), 1, "events after the first seconds")
    gap, i = max(gaps)
    pre, undo = events[i], events[i + 1]
    rtt = pre["rtt_min_us"] / 1e6
    ksft_pr(f"longest silence {gap:.3f} s at {pre['t'] - start:.2f} s; "
            f"RTTmin {rtt * 1000:.1f} ms")
    ksft_pr(f"before: cwnd {pre['cwnd']} delta {pre['delta_milli']} mode "
            f"{pre['mode']}")
    window = [e for e in events[i + 1:]
              if e["t"] <= undo["t"] + UNDO_RTTS * rtt]
    for e in events[max(0, i - 3):i + 1] + window[:12]:
        ksft_pr(f"  {e['t'] - undo['t']:+8.4f} s: cwnd {e['cwnd']:4} delta "
                f"{e['delta_milli']:4} mode {e['mode']} rtt_standing "
                f"{e['rtt_standing_us'] / 1000:.1f} ms target {e['target']}")
    ksft_pr(f"... {len(window)} events within {UNDO_RTTS} RTTs of the "
            f"first event after the silence")

    def close(a, b):
        return abs(a - b) <= RESTORE_TOL * b

    restored = [e for e in window if close(e["cwnd"], pre["cwnd"]) and
                close(e["delta_milli"], pre["delta_milli"])]
    if restored:
        ksft_pr(f"restored {restored[0]['t'] - undo['t']:.4f} s after the "
                f"first event after the silence: cwnd "
                f"{restored[0]['cwnd']} delta {restored[0]['delta_milli']}")
    ksft_ge(len(restored), 1, f"cwnd and delta within 10% of their values "
            f"before the spike within {UNDO_RTTS} RTTs")


if __name__ == "__main__":
    ksft_run([spurious_rto_undone, undo_restores_cwnd])
    ksft_exit()
