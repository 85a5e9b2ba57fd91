#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Copa keeps the queue short: 12 Mbit/s, 40 ms RTT, a 4 BDP FIFO.

Each flow runs alone on the link. Queueing delay is the bottleneck FIFO's
mean backlog divided by its rate, sampled every 100 ms: with one flow it is
that flow's queueing delay, and unlike srtt it does not include the guest's
timer jitter (the srtt-based figure is printed beside it). Each flow runs
once: a TCG guest stalls now and then for a few hundred ms, which moves a
single 20 s run's utilisation by up to 15%, so the bounds leave at least
twice that (copa's utilisation was 0.838 to 0.908 in three runs at
da710bc, its delay a fortieth of cubic's). The figures themselves, with
their spread, are make bench's (the demo link).

- low_delay: copa reaches >= 60% link utilisation, and its mean
  queueing delay is <= 1/3 of CUBIC's (CUBIC fills the 4 BDP FIFO).
- delta_dial: delta 0.8 queues less than delta 0.1. Copa's standing
  queue is 1/delta packets, so the two queues differ by 10 - 1.25 =
  8.75 frames (8.8 ms) whatever the guest adds to both: the gap must be
  at least half of that. A dial that did nothing would leave no gap.
- policer_transparent: with no policer on the path, copa_policer meets
  low_delay's bounds too and never enters the policed mode (4): the mode
  is sampled every 100 ms and a hold lasts 48 rounds (~2 s).
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from test_copa_link import Flow, Link, run_once  # noqa: E402
from ksft import ksft_exit, ksft_ge, ksft_pr, ksft_run  # noqa: E402
from copa_tools import params  # noqa: E402
from copa_tools.eval.lab import FRAME_BYTES  # noqa: E402
from copa_tools.eval.metrics import serialization_ms  # noqa: E402

LOW_DELAY_LINK = Link(rate_mbit=12, rtt_ms=40, buffer_bdp=4)
MIN_UTILISATION = 0.60
DELAY_RATIO = 1 / 3             # copa / cubic queueing delay
DIAL_DELTAS = (0.1, 0.8)
DIAL_GAP_SHARE = 0.5            # of the difference in target queues
MODE_POLICED = params.load().mode("policed")


def alone(cc, delta=None):
    """The run of ``cc`` alone on the low-delay link (run_once: once)."""
    sysctls = {"net.ipv4.tcp_copa.delta": delta} if delta else None
    label = f"{cc} alone" + (f", delta {delta}" if delta else "")
    return run_once(label, LOW_DELAY_LINK, [Flow(cc, sysctls=sysctls)])


def wire_util(result):
    return result.link_stats.wire_utilisation or 0.0


def queue_delay_ms(result):
    """Mean queueing delay at the bottleneck, from its backlog."""
    return result.link_stats.qdelay_mean_ms


def fills_link_with_short_queue(cc):
    """``cc`` alone: utilisation and a fraction of CUBIC's queue."""
    run, cubic = alone(cc), alone("cubic")
    # Utilisation of the link, in the link's own units: frame bytes through
    # the bottleneck over its capacity in frames. Goodput over that
    # capacity tops out at 0.956 (1448 payload bytes per 1514-byte frame).
    util = wire_util(run)
    d_run, d_cubic = queue_delay_ms(run), queue_delay_ms(cubic)
    ksft_pr(f"link utilisation: {cc} {util:.3f}, cubic "
            f"{wire_util(cubic):.3f}")
    ksft_pr(f"mean queueing delay: {cc} {d_run:.2f} ms, cubic "
            f"{d_cubic:.2f} ms, ratio {d_run / d_cubic:.3f}")
    ksft_ge(util, MIN_UTILISATION, f"{cc} utilisation", ideal=1)
    ksft_ge(DELAY_RATIO * d_cubic, d_run, f"{cc} delay <= 1/3 of cubic's")


def low_delay():
    """Copa fills the link with a fraction of CUBIC's queue."""
    fills_link_with_short_queue("copa")


def delta_dial():
    """A larger delta means a shorter queue, by the difference in 1/delta
    packets."""
    small, large = DIAL_DELTAS
    d_small = queue_delay_ms(alone("copa", str(small)))
    d_large = queue_delay_ms(alone("copa", str(large)))
    target_gap = (1 / small - 1 / large) * serialization_ms(
        FRAME_BYTES, LOW_DELAY_LINK.rate_mbit)
    ksft_pr(f"mean queueing delay: delta {small} {d_small:.2f} ms, delta "
            f"{large} {d_large:.2f} ms, target queues {target_gap:.2f} ms "
            f"apart")
    ksft_ge(d_small - d_large, DIAL_GAP_SHARE * target_gap,
            "queue at the smaller delta longer by its target's excess",
            ideal=target_gap)


def policer_transparent():
    """Without a policer, copa_policer is copa."""
    fills_link_with_short_queue("copa_policer")
    modes = sorted(set(alone("copa_policer").flows[0].series.get("mode", [])))
    ksft_pr(f"copa_policer modes seen {modes}")
    ksft_ge(len(modes), 1, "copa_policer mode sampled")
    ksft_ge(MODE_POLICED - 1, max(modes, default=MODE_POLICED),
            "no false policer detection")


if __name__ == "__main__":
    ksft_run([low_delay, delta_dial, policer_transparent])
    ksft_exit()
