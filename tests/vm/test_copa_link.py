#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Copa on emulated links: competitive mode against CUBIC, random loss.

Runs in the project VM (tests/run-vm) with tcp_copa loaded; each flow is an
iperf3 flow of copa_tools.eval.lab sampled through sock_diag.

- competitive: one copa and one cubic flow share a 12 Mbit/s, 40 ms link
  with a 2 BDP FIFO. With competitive mode on (the default) copa gets at
  least 12% of the link, and at least twice (and 1 Mbit/s more than)
  what it gets with net.ipv4.tcp_copa.competitive=0 (3 to 5%). Since
  competitive mode keeps RTTmin (copa.rst, "RTTmin while competing"),
  fifteen runs on 2026-11-24 gave 0.349 to 0.527 (five with the final
  algorithm: 0.359 to 0.457). Before, RTTmin's 10 s window expired onto
  cubic's queue and shares were 0.20 to 0.49 over twenty runs, 0.247 to
  0.259 in four traced ones; the gate runs of issue 33 (results/gates)
  0.267 to 0.46. The bound is under half the lowest share since, and
  three times the share without the mode.
- random_loss: 1% random loss on a 20 Mbit/s, 40 ms link. Copa alone moves
  at least LOSS_ADVANTAGE times CUBIC's throughput alone (losses with the
  queue low are not congestion to Copa; CUBIC halves on every loss): 3.3
  to 4.7 times in eight runs (copa 18.0 to 18.7 Mbit/s, cubic 4.0 to 5.7),
  and the bound is under half the least; a Copa that backed off on
  random loss as CUBIC does would move about what CUBIC moves.
- light_loss_keeps_delta: 0.5% random loss on a 10 Mbit/s, 100 ms link
  (86-packet BDP, under half a loss per round), with loss_reaction=20: a
  round must lose more than 20 / 4 = 5% to raise delta, which this loss
  rate almost never reaches once slow start is over (the first third of
  the tracepoint's events). Delta may be raised in at most half of the
  other events: one loss in a small round (after a timeout's restart)
  legitimately raises it for the 32 rounds (3.2 s) of its regrowth, 22%
  of the events in one make check run. Raising it on every lossy round,
  as before, kept it raised in 98% of them.
"""

import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
sys.path[:0] = [os.path.join(ROOT, "tools"), os.path.join(ROOT, "tests")]

from copa_tools.eval.lab import Flow, Link, run  # noqa: E402
from ksft import KsftFailEx, copa_traced, ksft_ge, ksft_pr, \
    ksft_exit, ksft_run  # noqa: E402

RUN_S = 20
COMPETE_LINK = Link(rate_mbit=12, rtt_ms=40, buffer_bdp=2)
LOSSY_LINK = Link(rate_mbit=20, rtt_ms=40, buffer_bdp=1, loss_pct=1)
COMPETE_MIN_SHARE = 0.12        # of the link rate, competitive mode on
COMPETE_GAIN = 2.0              # on / off, relative ...
COMPETE_GAIN_MBIT = 1.0         # ... and absolute
LOSS_ADVANTAGE = 1.5            # copa / cubic at 1% random loss
LIGHT_LOSS_LINK = Link(rate_mbit=10, rtt_ms=100, buffer_bdp=1, loss_pct=0.5)
LIGHT_LOSS_REACTION = {"net.ipv4.tcp_copa.loss_reaction": "20"}
LIGHT_LOSS_SETTLE = 1 / 3       # share of events until slow start is over
LIGHT_LOSS_RAISED = 0.5         # max share of events with a raised delta
DEFAULT_DELTA_MILLI = 500


def run_and_report(label, link, flows, duration_s=RUN_S, events=None):
    """Run ``flows`` on ``link`` and print the per-flow table."""
    result = run(link, flows, duration_s, events=events)
    ksft_pr(f"{label}: {describe_link(link)}, {duration_s} s")
    for fr in result.flows:
        ksft_pr(f"  flow {fr.index} {fr.cc}: {fmt(fr.throughput_mbit)} "
                f"Mbit/s, utilisation {fmt(fr.utilisation, 3)}, srtt "
                f"queueing delay mean {fmt(fr.qdelay_mean_ms)} p95 "
                f"{fmt(fr.qdelay_p95_ms)} ms, retransmitted/acked "
                f"{fmt(fr.retrans_overhead, 4)}")
    ls = result.link_stats
    ksft_pr(f"  bottleneck: backlog delay mean {fmt(ls.qdelay_mean_ms)} "
            f"p95 {fmt(ls.qdelay_p95_ms)} ms, drops {ls.drops}, guest cpu "
            f"busy {fmt(result.cpu_busy)}")
    return result


def fmt(value, digits=2):
    return "-" if value is None else f"{value:.{digits}f}"


_runs = {}


def run_once(label, link, flows, duration_s=RUN_S, events=None):
    """run_and_report() once per label in this process: cases that share
    a run look at the same Result; if it failed, each of them fails."""
    if label not in _runs:
        try:
            _runs[label] = run_and_report(label, link, flows, duration_s,
                                          events)
        except Exception as exc:
            _runs[label] = f"{type(exc).__name__}: {exc}"
            raise
    if isinstance(_runs[label], str):
        raise KsftFailEx(f"run '{label}' failed: {_runs[label]}")
    return _runs[label]


def describe_link(link):
    parts = [f"{link.rate_mbit:g} Mbit/s", f"{link.rtt_ms:g} ms",
             f"FIFO {link.buffer_bytes} B"]
    if link.loss_pct:
        parts.append(f"loss {link.loss_pct:g}%")
    if link.policer_mbit:
        parts.append(f"policer {link.policer_mbit:g} Mbit/s burst "
                     f"{link.policer_burst} B")
    return ", ".join(parts)


def print_series(result, index=0, every_s=1.0):
    """Print flow ``index``'s samples every ``every_s`` seconds: goodput,
    srtt, cwnd, bytes retransmitted since the previous line and (copa)
    mode, so that a failure shows what the algorithm did."""
    raw = result.flows[index].samples
    modes = raw.get("mode") or [None] * len(raw["t"])
    last_t, last_acked, last_retrans = None, None, None
    for t, acked, retrans, rtt, cwnd, mode in zip(
            raw["t"], raw["bytes_acked"], raw["bytes_retrans"],
            raw["rtt_us"], raw["cwnd"], modes):
        if last_t is not None and t - last_t < every_s - 0.05:
            continue
        if last_t is not None:
            mbit = (acked - last_acked) * 8e-6 / (t - last_t)
            ksft_pr(f"    t {t:5.1f} s: {mbit:6.2f} Mbit/s, srtt "
                    f"{rtt / 1000:6.1f} ms, cwnd {cwnd:4}, retrans "
                    f"{retrans - last_retrans:7} B, mode {mode}")
        last_t, last_acked, last_retrans = t, acked, retrans


def overhead(result, index=0):
    """Bytes retransmitted per byte acked of flow ``index`` (0 if none)."""
    return result.flows[index].retrans_overhead or 0.0


def throughput(result, index=0):
    """Goodput of flow ``index`` in Mbit/s (0 if it moved nothing)."""
    return result.flows[index].throughput_mbit or 0.0


def copa_share(competitive):
    res = run_and_report(
        f"competitive={competitive}", COMPETE_LINK,
        [Flow("copa", sysctls={"net.ipv4.tcp_copa.competitive":
                               str(competitive)}),
         Flow("cubic")])
    return throughput(res, 0) / COMPETE_LINK.rate_mbit


def competitive():
    """Competitive mode holds a fair-ish share against CUBIC."""
    on = copa_share(1)
    off = copa_share(0)
    ksft_pr(f"copa share of the link against cubic: competitive on "
            f"{on:.3f}, off {off:.3f}")
    ksft_ge(on, COMPETE_MIN_SHARE, "copa share with competitive mode on")
    rate = COMPETE_LINK.rate_mbit
    ksft_ge(on, max(off * COMPETE_GAIN, off + COMPETE_GAIN_MBIT / rate),
            "competitive mode gains over competitive=0")


def random_loss():
    """Copa ignores random loss that CUBIC backs off from."""
    copa = throughput(run_and_report("copa, 1% loss", LOSSY_LINK,
                                     [Flow("copa")]))
    cubic = throughput(run_and_report("cubic, 1% loss", LOSSY_LINK,
                                      [Flow("cubic")]))
    ksft_pr(f"throughput at 1% loss: copa {copa:.2f} Mbit/s, cubic "
            f"{cubic:.2f} Mbit/s, ratio "
            f"{copa / cubic if cubic else float('inf'):.2f}")
    ksft_ge(copa, LOSS_ADVANTAGE * cubic,
            f"copa >= {LOSS_ADVANTAGE:g}x cubic at 1% loss")


def light_loss_keeps_delta():
    """Light random loss on a long path leaves delta alone."""
    with copa_traced(buffer_kb=16384) as events:
        res = run_and_report("copa:loss_reaction=20, 0.5% loss",
                             LIGHT_LOSS_LINK,
                             [Flow("copa", sysctls=LIGHT_LOSS_REACTION)])
    settled = events[int(len(events) * LIGHT_LOSS_SETTLE):]
    raised = sum(d > DEFAULT_DELTA_MILLI for _, d, _ in settled)
    share = raised / len(settled) if settled else 1.0
    ksft_pr(f"throughput {throughput(res):.2f} Mbit/s; delta above "
            f"{DEFAULT_DELTA_MILLI / 1000} in {raised} of {len(settled)} "
            f"events after the first third ({share:.3f})")
    ksft_ge(LIGHT_LOSS_RAISED, share, "delta raised in at most half")


if __name__ == "__main__":
    ksft_run([competitive, random_loss, light_loss_keeps_delta])
    ksft_exit()
