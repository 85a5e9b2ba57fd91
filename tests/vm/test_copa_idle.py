#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""After an idle period Copa does not send faster than it last delivered.

The lab path (tests/vm/test_copa_link.py) at 12 Mbit/s, 40 ms, 1 BDP FIFO.
One copa connection (tests/setcc --burst) sends BURSTS bursts of 1 MB;
after each it waits until everything is acknowledged and stays idle
IDLE_S = 1.5 s, longer than the retransmission timeout (about 250 ms),
before the next. With cong_control the stack does not shrink the window
after idle (tcp_slow_start_after_idle_check() leaves it to the module):
Copa keeps its window and, on CA_EVENT_TX_START, paces the first round at
1 x cwnd / RTTstanding (srtt once the RTT filters have expired), instead
of its usual 2 x.

For every burst after the first, setcc reports tcp_info once the previous
burst was acknowledged ("before": delivery_rate, the last measured
delivery rate) and right after the burst's first send() ("start":
pacing_rate as set at TX_START), and the bytes the socket transmitted in
the following half round (at least half the "before" srtt), excluding
what left during that first send().

- idle_restart_rate: in every burst, the rate of that first half round,
  and the pacing rate at its start, are at most RATE_SLACK x the delivery
  rate measured before the idle period. At 2 x pacing both would be about
  twice it.
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import test_copa_link  # noqa: E402,F401  (sys.path for copa_tools)
from copa_tools.eval.lab import RECEIVER_ADDR, Flow, Link, Topology  # noqa: E402
from ksft import SETCC, bg, ksft_ge, ksft_pr, ksft_exit, ksft_run, setcc  # noqa: E402

LINK = Link(rate_mbit=12, rtt_ms=40, buffer_bdp=1)
PORT = 5302
BURST = 1000000
BURSTS = 6
IDLE_S = 1.5
RATE_SLACK = 1.25


def idle_restart_rate():
    """The first half round after idle leaves at the last delivery rate."""
    with Topology(LINK, [Flow("copa")]) as topo:
        with bg([SETCC, "--sink", PORT], ns=topo.receiver) as sink:
            ksft_pr(f"sink: {sink.stdout.readline().strip()}")
            lines = setcc(["--cc", "copa", "--bytes", BURST * BURSTS,
                           "--burst", BURST, "--idle", IDLE_S, RECEIVER_ADDR,
                           PORT], ns=topo.senders[0], timeout=120)
    ksft_pr(f"sender: {lines[-1]}")
    bursts = [line for line in lines if "burst" in line]
    ksft_ge(len(bursts), BURSTS - 1, "a report per burst after the first")
    worst = 0.0
    for b in bursts:
        before, start = b["before"], b["start"]
        rate = b["window_bytes"] / b["window_s"]
        delivered = before["delivery_rate"]
        worst = max(worst, rate / delivered, start["pacing_rate"] / delivered)
        ksft_pr(f"burst {b['burst']}: before idle delivery "
                f"{delivered * 8e-6:.2f} Mbit/s, pacing "
                f"{before['pacing_rate'] * 8e-6:.2f}, cwnd {before['cwnd']}, "
                f"srtt {before['rtt_us'] / 1000:.1f} ms; after idle pacing "
                f"{start['pacing_rate'] * 8e-6:.2f} Mbit/s "
                f"({start['pacing_rate'] / delivered:.2f}x), cwnd "
                f"{start['cwnd']}, first {b['window_s'] * 1000:.1f} ms at "
                f"{rate * 8e-6:.2f} Mbit/s ({rate / delivered:.2f}x)")
    ksft_pr(f"largest ratio to the delivery rate before idle: {worst:.3f}")
    ksft_ge(RATE_SLACK, worst, f"after idle, at most {RATE_SLACK}x the "
            f"delivery rate measured before it", ideal=1)


if __name__ == "__main__":
    ksft_run([idle_restart_rate])
    ksft_exit()
