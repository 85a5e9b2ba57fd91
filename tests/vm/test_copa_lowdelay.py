#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Copa keeps the queue short: 12 Mbit/s, 40 ms RTT, a 4 BDP FIFO.

Each flow runs alone on the link. Queueing delay is the bottleneck FIFO's
mean backlog divided by its rate, sampled every 100 ms: with one flow it is
that flow's queueing delay, and unlike srtt it does not include the guest's
timer jitter (the srtt-based figure is printed beside it). copa and
copa_policer run three times each, alternately, and their figures are the
medians: a TCG guest stalls now and then for a few hundred ms, which moves
a single 20 s run by up to 15%.

- low_delay: copa reaches >= 85% link utilisation (median), and its mean
  queueing delay is <= 1/3 of CUBIC's (CUBIC fills the 4 BDP FIFO).
- delta_dial: delta 0.8 queues less than delta 0.1 (about 1.25 against
  10 packets): at most half the delay, and at least 2 ms less.
- policer_transparent: with no policer on the path, copa_policer moves the
  same throughput as copa (within 10%) with the same queueing delay (within
  10% or 2 ms, whichever is larger: both are a few ms, where 10% is below
  the measurement's resolution), and never enters the policed mode (4)
  in any run:
  the mode is sampled every 100 ms and a hold lasts 48 rounds (~2 s).
"""

import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from test_copa_link import Flow, Link, run_once, throughput  # noqa: E402
from ksft import ksft_ge, ksft_pr, ksft_run  # noqa: E402
from copa_tools import params  # noqa: E402

LOW_DELAY_LINK = Link(rate_mbit=12, rtt_ms=40, buffer_bdp=4)
MIN_UTILISATION = 0.85
DELAY_RATIO = 1 / 3             # copa / cubic queueing delay
DELTA_RATIO = 0.5               # delay at delta 0.8 / delay at delta 0.1
DELTA_GAP_MS = 2.0              # and at least this much lower
SAME_THROUGHPUT = 0.10          # copa_policer vs copa, relative
SAME_DELAY = 0.10               # relative ...
SAME_DELAY_FLOOR_MS = 2.0       # ... or absolute, whichever is larger
MODE_POLICED = params.load().mode("policed")
REPEATS = 3                     # runs of copa and copa_policer, medians


def alone(cc, delta=None, rep=1):
    """Run ``rep`` of ``cc`` alone on the low-delay link."""
    sysctls = {"net.ipv4.tcp_copa.delta": delta} if delta else None
    label = f"{cc} alone" + (f", delta {delta}" if delta else "") + \
        (f", run {rep}" if rep > 1 else "")
    return run_once(label, LOW_DELAY_LINK, [Flow(cc, sysctls=sysctls)])


def copa_runs():
    """REPEATS runs each of copa and copa_policer, alternating."""
    runs = {"copa": [], "copa_policer": []}
    for rep in range(1, REPEATS + 1):
        for cc in runs:
            runs[cc].append(alone(cc, rep=rep))
    return runs["copa"], runs["copa_policer"]


def median(results, figure):
    return statistics.median(figure(r) for r in results)


def wire_util(result):
    return result.link_stats.wire_utilisation or 0.0


def queue_delay_ms(result):
    """Mean queueing delay at the bottleneck, from its backlog."""
    return result.link_stats.qdelay_mean_ms


def low_delay():
    """Copa fills the link with a fraction of CUBIC's queue."""
    copa, _ = copa_runs()
    cubic = alone("cubic")
    # Utilisation of the link, in the link's own units: frame bytes through
    # the bottleneck over its capacity in frames. Goodput over that
    # capacity tops out at 0.956 (1448 payload bytes per 1514-byte frame).
    util = median(copa, wire_util)
    d_copa, d_cubic = median(copa, queue_delay_ms), queue_delay_ms(cubic)
    ksft_pr(f"link utilisation: copa {util:.3f} (median of "
            f"{[round(wire_util(r), 3) for r in copa]}), cubic "
            f"{wire_util(cubic):.3f}")
    ksft_pr(f"mean queueing delay: copa {d_copa:.2f} ms, cubic "
            f"{d_cubic:.2f} ms, ratio copa/cubic {d_copa / d_cubic:.3f}")
    ksft_ge(util, MIN_UTILISATION, "copa utilisation")
    ksft_ge(DELAY_RATIO * d_cubic, d_copa, "copa delay <= 1/3 of cubic's")


def delta_dial():
    """A larger delta means a shorter queue."""
    d_small = queue_delay_ms(alone("copa", "0.1"))
    d_large = queue_delay_ms(alone("copa", "0.8"))
    ksft_pr(f"mean queueing delay: delta 0.1 {d_small:.2f} ms, delta 0.8 "
            f"{d_large:.2f} ms")
    ksft_ge(min(DELTA_RATIO * d_small, d_small - DELTA_GAP_MS), d_large,
            "delta 0.8 queues less than delta 0.1")


def policer_transparent():
    """Without a policer, copa_policer is copa."""
    copa, pol = copa_runs()
    t_copa, t_pol = median(copa, throughput), median(pol, throughput)
    d_copa, d_pol = median(copa, queue_delay_ms), median(pol, queue_delay_ms)
    modes = sorted({m for r in pol for m in r.flows[0].series.get("mode", [])})
    ksft_pr(f"median throughput: copa {t_copa:.2f} "
            f"{[round(throughput(r), 2) for r in copa]}, copa_policer "
            f"{t_pol:.2f} {[round(throughput(r), 2) for r in pol]} Mbit/s")
    ksft_pr(f"median queueing delay: copa {d_copa:.2f}, copa_policer "
            f"{d_pol:.2f} ms; copa_policer modes seen {modes}")
    ksft_ge(SAME_THROUGHPUT * t_copa, abs(t_pol - t_copa),
            "copa_policer throughput within 10% of copa's")
    ksft_ge(max(SAME_DELAY * d_copa, SAME_DELAY_FLOOR_MS),
            abs(d_pol - d_copa),
            "copa_policer delay within 10% or 2 ms of copa's")
    ksft_ge(len(modes), 1, "copa_policer mode sampled")
    ksft_ge(MODE_POLICED - 1, max(modes, default=MODE_POLICED),
            "no false policer detection")


if __name__ == "__main__":
    ksft_run([low_delay, delta_dial, policer_transparent])
