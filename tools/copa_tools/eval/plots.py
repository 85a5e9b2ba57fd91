# SPDX-License-Identifier: GPL-2.0
"""PNG plots (matplotlib, Agg backend).

- timeseries: one run, per flow throughput, RTT and cwnd over time, the
  bottleneck's queueing delay, and Jain's index when there are several flows.
- scatter: Pantheon style, throughput against p95 queueing delay with the
  delay axis inverted (better is up and to the right); one panel per case,
  or normalised throughput over all cases when there are many.
- households: per price group, normalised throughput against self-induced
  delay, one point per household and direction, medians emphasised.
"""

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from . import metrics  # noqa: E402

MAX_PANELS = 9


def _save(fig, path):
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def _colours(names):
    cycle = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    return {name: cycle[i % len(cycle)] for i, name in enumerate(names)}


def timeseries(record, path):
    """Time series of one run (a run record with its flows)."""
    flows = record["flows"]
    panels = 5 if len(flows) > 1 else 4
    fig, axes = plt.subplots(panels, 1, figsize=(9, 2.1 * panels),
                             sharex=True)
    for flow in flows:
        s = flow["series"]
        label = f"{flow['index']}: {flow['cc']}"
        axes[0].plot(s["t"], s["throughput_mbit"], lw=0.9, label=label)
        axes[1].plot(s["t"], s["rtt_ms"], lw=0.9, label=label)
        axes[2].plot(s["t"], s["cwnd"], lw=0.9, label=label)
    backlog = record["link_stats"]["backlog"]
    rate = record["link"]["rate_mbit"]
    axes[3].plot(backlog["t"], [metrics.backlog_delay_ms(b, rate)
                                for b in backlog["bytes"]], lw=0.9,
                 color="black")
    if len(flows) > 1:
        points = record.get("jain_series", [])
        axes[4].plot([p[0] for p in points], [p[1] for p in points],
                     marker=".", color="black")
        axes[4].set_ylim(0, 1.05)
        axes[4].set_ylabel("Jain's index")
    measure_from = record["link_stats"].get("measure_from_s") or 0
    if measure_from:
        for ax in axes:
            ax.axvspan(0, measure_from, color="grey", alpha=0.15, lw=0)
        axes[0].text(measure_from / 2, 0.95, "warm-up, not measured",
                     transform=axes[0].get_xaxis_transform(), ha="center",
                     va="top", fontsize="small", color="grey")
    axes[0].set_ylabel("throughput\nMbit/s")
    axes[1].set_ylabel("srtt ms")
    axes[2].set_ylabel("cwnd pkts")
    axes[3].set_ylabel("bottleneck\nqdelay ms")
    axes[-1].set_xlabel("time s")
    axes[0].legend(fontsize="small", loc="upper right")
    link = record["link"]
    fig.suptitle(f"{record['scenario']} {record['case']} "
                 f"{record['variant']['spec']} r{record['repeat']}: "
                 f"{link['rate_mbit']} Mbit/s, {link['rtt_ms']} ms, "
                 f"{link['buffer_bytes']} B FIFO", fontsize="medium")
    _save(fig, path)


def _run_points(rows, x_key, y_key):
    """{variant: [(x, y)]}: per run, the mean over the variant's flows."""
    runs = {}
    for row in rows:
        if row["role"] != "variant" or row[x_key] is None or \
                row[y_key] is None:
            continue
        key = (row["variant"], row["case"], row["repeat"])
        runs.setdefault(key, []).append((row[x_key], row[y_key]))
    points = {}
    for (variant, _, _), pts in runs.items():
        points.setdefault(variant, []).append(
            (metrics.mean(p[0] for p in pts), metrics.mean(p[1] for p in pts)))
    return points


def _scatter_panel(ax, points, colours):
    for variant, pts in points.items():
        xs, ys = [p[0] for p in pts], [p[1] for p in pts]
        ax.scatter(xs, ys, s=14, alpha=0.5, color=colours[variant])
        ax.scatter([metrics.mean(xs)], [metrics.mean(ys)], s=70,
                   color=colours[variant], edgecolor="black", label=variant)
    if not ax.xaxis_inverted():
        ax.invert_xaxis()
    ax.grid(alpha=0.3)


def scatter(rows, path, title):
    """Throughput against p95 queueing delay, delay axis inverted."""
    variants = list(dict.fromkeys(r["variant"] for r in rows))
    colours = _colours(variants)
    cases = list(dict.fromkeys(r["case"] for r in rows))
    if len(cases) <= MAX_PANELS:
        cols = min(3, len(cases))
        nrows = (len(cases) + cols - 1) // cols
        fig, axes = plt.subplots(nrows, cols, squeeze=False, figsize=(
            max(6.5, 4.2 * cols), 3.4 * nrows + 0.4))
        for ax, case in zip(axes.flat, cases):
            _scatter_panel(ax, _run_points(
                [r for r in rows if r["case"] == case], "qdelay_p95_ms",
                "throughput_mbit"), colours)
            ax.set_title(case, fontsize="small")
            ax.set_xlabel("p95 queueing delay ms")
            ax.set_ylabel("throughput Mbit/s")
        for ax in list(axes.flat)[len(cases):]:
            ax.set_visible(False)
    else:
        fig, ax = plt.subplots(figsize=(6, 4.5))
        _scatter_panel(ax, _run_points(rows, "qdelay_p95_ms", "utilisation"),
                       colours)
        ax.set_xlabel("p95 queueing delay ms")
        ax.set_ylabel("throughput / capacity")
        axes = [[ax]]
    axes[0][0].legend(fontsize="small")
    fig.suptitle(f"{title}: throughput vs p95 queueing delay "
                 f"(better: up and right)", fontsize="medium")
    _save(fig, path)


def households(rows, path):
    """Per price group: normalised throughput vs mean self-induced delay."""
    from .households import PRICE_GROUPS
    variants = list(dict.fromkeys(r["variant"] for r in rows))
    colours = _colours(variants)
    fig, axes = plt.subplots(1, len(PRICE_GROUPS), figsize=(15, 3.8),
                             sharey=True)
    for ax, (label, _, _) in zip(axes, PRICE_GROUPS):
        members = [r for r in rows if r.get("group") == label]
        _scatter_panel(ax, _run_points(members, "qdelay_mean_ms",
                                       "utilisation"), colours)
        ax.set_title(f"{label}/month", fontsize="medium")
        ax.set_xlabel("self-induced delay ms (mean)")
    axes[0].set_ylabel("normalised throughput")
    axes[0].legend(fontsize="small")
    fig.suptitle("Households: self-induced delay vs normalised throughput "
                 "per price group (both directions)", fontsize="medium")
    _save(fig, path)
