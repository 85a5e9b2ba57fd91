# SPDX-License-Identifier: GPL-2.0
"""What a run measured: FlowResult, LinkStats and Result, computed from
the samples (metrics.py has the arithmetic), and format_table().

Figures
=======
The samples come from sampling.py (tcp_info of each flow's data socket,
the bottleneck tbf's counters). A flow's window starts at its first
sample (its iperf3 data connection exists) and lasts its duration.
Throughput is bytes_acked over that window; utilisation is throughput
over Link.capacity_mbit; queueing delay is each srtt sample minus the
flow's configured base RTT (link rtt_ms + extra_rtt_ms), floored at 0.
The bottleneck's queueing delay is its backlog / rate.
"""

import os
from dataclasses import asdict, dataclass, field

from .. import metrics
from .config import Link


@dataclass
class FlowResult:
    """Figures of one flow over its own window."""
    index: int
    cc: str
    cc_observed: str    # the algorithm sock_diag reported for the socket
    select: str
    sysctls: dict
    start_s: float
    duration_s: float
    base_rtt_ms: float
    throughput_mbit: float
    utilisation: float
    bytes_acked: int
    bytes_retrans: int
    retrans_overhead: float
    qdelay_mean_ms: float
    qdelay_p50_ms: float
    qdelay_p95_ms: float
    series: dict
    iperf: dict
    samples: dict       # raw tcp_info samples, one list per field
    measure_from_s: float = 0   # figures count samples from here on


@dataclass
class LinkStats:
    """Figures of the bottleneck over the whole run."""
    utilisation: float
    wire_utilisation: float
    drops: int
    qdelay_mean_ms: float
    qdelay_p50_ms: float
    qdelay_p95_ms: float
    backlog: dict
    measure_from_s: float = 0   # figures count samples from here on


@dataclass
class Result:
    """Everything one run() measured, plus what is needed to redo it."""
    link: Link
    duration_s: float
    sample_ms: int
    flows: list
    link_stats: LinkStats
    jain_index: float
    cpu_busy: float
    sample_lag_p95_ms: float
    kernel: str
    layout: str
    events: list = field(default_factory=list)

    def to_dict(self):
        """A JSON-ready dict of the whole result."""
        d = asdict(self)
        d["link"] = self.link.to_dict()
        return d


def flow_result(i, flow, seconds, link, samples, cc_seen, iperf,
                measure_from_s=0):
    base = link.rtt_ms + flow.extra_rtt_ms
    figures = metrics.flow_figures(samples, seconds, base,
                                   link.capacity_mbit, measure_from_s)
    columns = ["t", "bytes_acked", "bytes_retrans", "rtt_us", "cwnd",
               "state"] + (["mode"] if any("mode" in s for s in samples)
                           else [])
    raw = {key: [s.get(key) for s in samples] for key in columns}
    return FlowResult(
        index=i, cc=flow.cc, select=flow.select, sysctls=flow.sysctls,
        start_s=flow.start_s, duration_s=seconds, base_rtt_ms=base,
        cc_observed=cc_seen, iperf=iperf, samples=raw,
        measure_from_s=measure_from_s, **figures)


def link_stats(link, duration_s, flow_results, samples, measure_from_s=0):
    """Bottleneck figures over [measure_from_s, duration_s] of the run;
    the backlog series covers the whole run."""
    every = metrics.in_window(samples, 0, duration_s)
    samples = metrics.in_window(samples, measure_from_s, duration_s)
    goodput_bytes = 0.0
    for fr in flow_results:
        if fr.throughput_mbit is not None:
            end = fr.start_s + fr.duration_s
            seconds = max(0.0, end - max(fr.start_s, measure_from_s))
            goodput_bytes += fr.throughput_mbit * 1e6 / 8 * seconds
    delays = [metrics.backlog_delay_ms(s["backlog"], s["rate_mbit"])
              for s in samples]
    dist = metrics.distribution(delays)
    wire = metrics.counter_rate_mbit(samples, "bytes")
    return LinkStats(
        utilisation=metrics.utilisation(
            metrics.mbit_per_s(goodput_bytes, duration_s - measure_from_s),
            link.capacity_mbit),
        wire_utilisation=metrics.utilisation(wire, link.capacity_mbit),
        drops=samples[-1]["drops"] if samples else None,
        qdelay_mean_ms=dist["mean"], qdelay_p50_ms=dist["p50"],
        qdelay_p95_ms=dist["p95"],
        backlog={"t": [round(s["t"], 3) for s in every],
                 "bytes": [s["backlog"] for s in every]},
        measure_from_s=measure_from_s)


def result(link, flows, durations, duration_s, sample_ms, recorder, iperf,
           load, layout, events, measure_from_s=0):
    flow_results = [
        flow_result(i, f, durations[i], link, recorder.flow_samples[i],
                    recorder.cc_seen[i], iperf[i], measure_from_s)
        for i, f in enumerate(flows)]
    throughputs = [fr.throughput_mbit or 0.0 for fr in flow_results]
    return Result(
        link=link, duration_s=duration_s, sample_ms=sample_ms,
        flows=flow_results,
        link_stats=link_stats(link, duration_s, flow_results,
                              recorder.link_samples, measure_from_s),
        jain_index=metrics.jain_index(throughputs) if len(flows) > 1
        else None,
        cpu_busy=load[0], sample_lag_p95_ms=load[1],
        kernel=os.uname().release, layout=layout,
        events=[(t, getattr(fn, "__name__", repr(fn))) for t, fn in events])


def format_table(result):
    """A plain-text table of the per-flow figures of ``result``."""
    head = (f"{'flow':>4} {'cc':<14} {'Mbit/s':>7} {'util':>6} "
            f"{'qdelay mean':>11} {'p95 ms':>7} {'retrans':>8}")
    rows = [head]
    for fr in result.flows:
        rows.append(
            f"{fr.index:>4} {fr.cc:<14} {_fmt(fr.throughput_mbit, 2):>7} "
            f"{_fmt(fr.utilisation, 3):>6} {_fmt(fr.qdelay_mean_ms, 1):>11} "
            f"{_fmt(fr.qdelay_p95_ms, 1):>7} "
            f"{_fmt(fr.retrans_overhead, 4):>8}")
    ls = result.link_stats
    rows.append(f"link: util {_fmt(ls.utilisation, 3)} wire "
                f"{_fmt(ls.wire_utilisation, 3)} backlog delay mean "
                f"{_fmt(ls.qdelay_mean_ms, 1)} p95 {_fmt(ls.qdelay_p95_ms, 1)}"
                f" ms, drops {ls.drops}, jain {_fmt(result.jain_index, 3)}, "
                f"cpu busy {_fmt(result.cpu_busy, 2)}, tick lag p95 "
                f"{_fmt(result.sample_lag_p95_ms, 1)} ms")
    return "\n".join(rows)


def _fmt(value, digits):
    return "-" if value is None else f"{value:.{digits}f}"
