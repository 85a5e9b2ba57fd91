# SPDX-License-Identifier: GPL-2.0
"""Metric computations shared by the lab and the harness.

Pure functions on plain numbers and lists, so that they are unit-tested on
recorded fixture data without root or a VM. Conventions:

- rates in Mbit/s (10^6 bit/s), sizes in bytes, delays in ms, times in s;
- ``samples`` are lists of dicts with at least ``t`` (s since the run
  started) and the counters named by each function;
- percentiles interpolate linearly between closest ranks (as numpy's
  default), so p50 of [1, 2, 3, 4] is 2.5;
- a function returns None when its figure is undefined (no samples,
  nothing acknowledged), never 0, so tables show a gap instead of a lie.
"""

import math

TCP_ESTABLISHED = 1


def mean(values):
    """Arithmetic mean, or None for an empty sequence."""
    values = list(values)
    return sum(values) / len(values) if values else None


def percentile(values, pct):
    """The ``pct``-th percentile (0..100) with linear interpolation."""
    if not 0 <= pct <= 100:
        raise ValueError(f"percentile must be within 0..100, got {pct}")
    ordered = sorted(values)
    if not ordered:
        return None
    rank = (len(ordered) - 1) * pct / 100.0
    low = math.floor(rank)
    high = math.ceil(rank)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def distribution(values):
    """{"mean", "p50", "p95"} of ``values`` (each None when empty)."""
    values = list(values)
    return {"mean": mean(values), "p50": percentile(values, 50),
            "p95": percentile(values, 95)}


def jain_index(values):
    """Jain's fairness index (sum x)^2 / (n sum x^2), in [1/n, 1].

    None when there is no value or every value is zero.
    """
    values = list(values)
    squares = sum(v * v for v in values)
    if not values or squares == 0:
        return None
    return sum(values) ** 2 / (len(values) * squares)


def mbit_per_s(nbytes, seconds):
    """Average rate in Mbit/s of ``nbytes`` over ``seconds``."""
    if seconds <= 0:
        return None
    return nbytes * 8 / seconds / 1e6


def utilisation(throughput_mbit, capacity_mbit):
    """Fraction of the configured capacity used (0..1, None if unknown)."""
    if throughput_mbit is None or not capacity_mbit:
        return None
    return throughput_mbit / capacity_mbit


def retrans_overhead(bytes_retrans, bytes_acked):
    """Bytes retransmitted per byte acknowledged (tcp_info counters)."""
    if not bytes_acked:
        return None
    return bytes_retrans / bytes_acked


def in_window(samples, start, end):
    """Samples whose ``t`` lies within [start, end]."""
    return [s for s in samples if start <= s["t"] <= end]


def counter_rate_mbit(samples, key):
    """Average rate of byte counter ``key`` between first and last sample."""
    if len(samples) < 2:
        return None
    first, last = samples[0], samples[-1]
    return mbit_per_s(last[key] - first[key], last["t"] - first["t"])


def rate_series(samples, key):
    """[(t, Mbit/s)] of byte counter ``key`` between consecutive samples.

    Each point is stamped with the later sample's time.
    """
    out = []
    for prev, cur in zip(samples, samples[1:]):
        rate = mbit_per_s(cur[key] - prev[key], cur["t"] - prev["t"])
        if rate is not None:
            out.append((cur["t"], rate))
    return out


def queueing_delays_ms(rtt_us_values, base_rtt_ms):
    """Queueing delay of each RTT sample: RTT minus the configured base RTT.

    Samples a little below the base (timer granularity of the emulation)
    count as zero queueing delay.
    """
    return [max(0.0, rtt / 1000.0 - base_rtt_ms) for rtt in rtt_us_values]


def backlog_delay_ms(backlog_bytes, rate_mbit):
    """Time to drain ``backlog_bytes`` at ``rate_mbit``, in ms."""
    return backlog_bytes * 8 / (rate_mbit * 1e3)


def serialization_ms(frame_bytes, rate_mbit):
    """Time to put one ``frame_bytes`` frame on a ``rate_mbit`` link, in ms:
    the floor of any queueing delay measured from RTT samples (a packet
    waits for at least the one ahead of it, and its own transmission is
    in its RTT). None for an unknown rate."""
    if not rate_mbit:
        return None
    return frame_bytes * 8 / (rate_mbit * 1e3)


def spread(values):
    """{"n", "median", "min", "max", "range"} of the per-repeat values of
    one figure (Nones are left out; every entry None when none is left).
    ``range`` is max - min, in the figure's own unit."""
    values = sorted(v for v in values if v is not None)
    if not values:
        return {"n": 0, "median": None, "min": None, "max": None,
                "range": None}
    return {"n": len(values), "median": percentile(values, 50),
            "min": values[0], "max": values[-1],
            "range": values[-1] - values[0]}


def jain_series(rate_series_by_flow, bin_s):
    """Jain's index over time among the flows active in each time bin.

    ``rate_series_by_flow`` is a list of [(t, Mbit/s)] lists (one per
    flow); a flow counts as active in a bin when it has a point there.
    Returns [(bin end time, index)] for bins with at least one flow.
    """
    bins = {}
    for series in rate_series_by_flow:
        per_bin = {}
        for t, rate in series:
            per_bin.setdefault(math.floor(t / bin_s), []).append(rate)
        for b, rates in per_bin.items():
            bins.setdefault(b, []).append(sum(rates) / len(rates))
    points = []
    for b, rates in sorted(bins.items()):
        index = jain_index(rates)
        if index is not None:
            points.append(((b + 1) * bin_s, index))
    return points


def convergence_time(jain_points, event_t, threshold=0.9, hold_s=2.0):
    """Seconds after ``event_t`` until Jain's index reaches ``threshold``
    and stays there for ``hold_s`` (or to the end of ``jain_points``,
    which the caller cuts at the next event); None if it never does.
    """
    after = [(t, j) for t, j in jain_points if t > event_t]
    for i, (t, _) in enumerate(after):
        window = [j for tt, j in after[i:] if tt <= t + hold_s]
        if all(j >= threshold for j in window):
            return t - event_t
    return None


def fair_share_mbit(capacity_mbit, windows, index):
    """Time-averaged equal share of ``capacity_mbit`` for flow ``index``.

    ``windows`` are the (start, end) times of every flow; over each stretch
    of flow ``index``'s window the capacity is split equally among the
    flows active then. None for an empty window.
    """
    start, end = windows[index]
    if end <= start:
        return None
    cuts = sorted({start, end} | {t for w in windows for t in w
                                  if start < t < end})
    total = 0.0
    for low, high in zip(cuts, cuts[1:]):
        mid = (low + high) / 2
        active = sum(1 for s, e in windows if s <= mid < e)
        total += capacity_mbit / active * (high - low)
    return total / (end - start)


def flow_figures(samples, seconds, base_rtt_ms, capacity_mbit,
                 measure_from_s=0):
    """The figures of one flow from its tcp_info samples.

    ``samples``: dicts with t, bytes_acked, bytes_retrans, rtt_us (srtt),
    cwnd, state and optionally mode. The flow's window starts at its first
    sample (when iperf3's data connection exists) and lasts ``seconds``;
    samples after the connection left ESTABLISHED are ignored when there
    are established ones. ``measure_from_s`` (run time, s) excludes a
    warm-up: the figures count only samples from then on (throughput and
    retransmissions as counter differences over what is left), while the
    series keep the whole window. Returns throughput_mbit, utilisation,
    bytes_acked, bytes_retrans, retrans_overhead, qdelay_{mean,p50,p95}_ms
    and series (t, throughput_mbit, rtt_ms, cwnd[, mode]).
    """
    first = samples[0]["t"] if samples else 0.0
    window = in_window(samples, first, first + seconds)
    window = [s for s in window if s["state"] == TCP_ESTABLISHED] or window
    measured = window
    if measure_from_s and measure_from_s > first:
        measured = [s for s in window if s["t"] >= measure_from_s]
    throughput = counter_rate_mbit(measured, "bytes_acked")
    last = window[-1] if window else {"bytes_acked": 0, "bytes_retrans": 0}
    if measured is window:
        overhead = retrans_overhead(last["bytes_retrans"],
                                    last["bytes_acked"])
    elif len(measured) >= 2:
        overhead = retrans_overhead(
            measured[-1]["bytes_retrans"] - measured[0]["bytes_retrans"],
            measured[-1]["bytes_acked"] - measured[0]["bytes_acked"])
    else:
        overhead = None
    qdelay = distribution(queueing_delays_ms(
        [s["rtt_us"] for s in measured], base_rtt_ms))
    rates = rate_series(window, "bytes_acked")
    series = {"t": [round(t, 3) for t, _ in rates],
              "throughput_mbit": [round(r, 4) for _, r in rates],
              "rtt_ms": [s["rtt_us"] / 1000.0 for s in window[1:]],
              "cwnd": [s["cwnd"] for s in window[1:]]}
    if any(s.get("mode") is not None for s in window):
        series["mode"] = [s.get("mode") for s in window[1:]]
    return {"throughput_mbit": throughput,
            "utilisation": utilisation(throughput, capacity_mbit),
            "bytes_acked": last["bytes_acked"],
            "bytes_retrans": last["bytes_retrans"],
            "retrans_overhead": overhead,
            "qdelay_mean_ms": qdelay["mean"], "qdelay_p50_ms": qdelay["p50"],
            "qdelay_p95_ms": qdelay["p95"], "series": series}
