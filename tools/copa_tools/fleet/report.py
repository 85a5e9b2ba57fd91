# SPDX-License-Identifier: GPL-2.0
"""copa-fleet report: the metrics Spotify and Facebook judged congestion
control by, per congestion control and per peer prefix, from queries.py
on any engine (``engine.rows(sql)``).

Tables (Markdown or CSV): delivery rate at the median, p10 and p1 (not
application-limited), srtt and min_rtt at p50, p75, p90, p95 and p99,
retransmission overhead (bytes retransmitted / bytes acked), and each
cc's RTT reduction at each percentile against a baseline cc, and the
peer prefixes by their paths, worst first, as copa-fleet control reads
them (high loss at low delay, a policer's mark; a standing queue). Plots
(matplotlib): CDFs per cc, the worst prefixes over time, delivery rate
against RTT per prefix (high loss at low delay is a policer's mark).
"""

import csv
import dataclasses
import io
import os

from . import control, queries

RATE_NAMES = tuple(f"rate_p{round(q * 100)}_mbps"
                   for q in queries.RATE_LEVELS)
RTT_NAMES = tuple(f"p{round(q * 100)}" for q in queries.RTT_LEVELS)


class ReportError(ValueError):
    """The records cannot answer what was asked."""


def _num(v):
    """A JSONEachRow number (18.16 quotes 64-bit integers), None for
    null or NaN."""
    if v is None:
        return None
    v = float(v)
    return None if v != v else v


def _scaled(values, scale):
    return [None if _num(v) is None else _num(v) / scale for v in values]


def table(engine, source, group, start, end):
    """Rows of dicts, one per group (queries.GROUPS[group]): its keys,
    connections, records, RATE_NAMES in Mbit/s, srtt_* and min_rtt_* at
    RTT_NAMES in ms, retrans_overhead."""
    keys = queries.GROUPS[group]
    retrans = {tuple(r[k] for k in keys): r for r in engine.rows(
        queries.retrans(source, keys, start, end))}
    out = []
    for r in engine.rows(queries.summary(source, keys, start, end)):
        row = {k: r[k] for k in keys}
        row["connections"] = int(r["connections"])
        row["records"] = int(r["records"])
        rate = _scaled(r["rate_q"], 1e6) \
            if int(r["rate_records"]) else [None] * len(RATE_NAMES)
        row.update(zip(RATE_NAMES, rate))
        for metric in ("srtt", "min_rtt"):
            row.update(zip((f"{metric}_{n}_ms" for n in RTT_NAMES),
                           _scaled(r[f"{metric}_q"], 1e3)))
        rt = retrans.get(tuple(r[k] for k in keys))
        row["retrans_overhead"] = _num(rt["retrans_overhead"]) if rt \
            else None
        out.append(row)
    return out


def rtt_reduction(cc_rows, baseline):
    """Per cc other than ``baseline``: (baseline - cc) / baseline of srtt
    and min_rtt at each percentile, as fractions (0.2: 20% lower)."""
    by_cc = {r["cc"]: r for r in cc_rows}
    if baseline not in by_cc:
        raise ReportError(f"baseline {baseline!r} has no records; the "
                          f"records have {sorted(by_cc)}")
    base = by_cc[baseline]
    out = []
    for cc, row in sorted(by_cc.items()):
        if cc == baseline:
            continue
        red = {"cc": cc, "baseline": baseline}
        for metric in ("srtt", "min_rtt"):
            for n in RTT_NAMES:
                col = f"{metric}_{n}_ms"
                b, v = base[col], row[col]
                red[f"{metric}_{n}"] = None if not b or v is None \
                    else (b - v) / b
        out.append(red)
    return out


def _fmt(v):
    if v is None:
        return "-"
    if v == "":
        return "(unknown)"
    if isinstance(v, float):
        return f"{v:.3g}" if abs(v) < 1000 else f"{v:.0f}"
    return str(v)


def markdown(rows, title):
    """``rows`` as a Markdown table under a heading."""
    if not rows:
        return f"## {title}\n\n(no records)\n"
    cols = list(rows[0])
    lines = [f"## {title}", "", "| " + " | ".join(cols) + " |",
             "|" + "|".join("---" for _ in cols) + "|"]
    lines += ["| " + " | ".join(_fmt(r[c]) for c in cols) + " |"
              for r in rows]
    return "\n".join(lines) + "\n"


def to_csv(rows):
    out = io.StringIO()
    if rows:
        w = csv.DictWriter(out, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    return out.getvalue()


def _path_key(row):
    """Worst first: the prefixes with a path sign in the order the
    controller acts on them, each group by the figure that signed it;
    then the rest by queueing delay."""
    signs = (row["path"] or "").split("+")
    rank = min((control.PATH_SIGNS.index(s) for s in signs
                if s in control.PATH_SIGNS), default=len(control.PATH_SIGNS))
    lossy = signs[0] in ("policed", "lossy")
    return (rank, -((row["retrans"] if lossy else row["qdelay_ratio"]) or 0))


def paths(engine, source, start, end, baseline=None):
    """Rows per peer prefix, worst first (_path_key): the numbers
    copa-fleet control reads (control.measure(): connections that acked
    its --min-bytes) under ``baseline``, else under the prefix's most
    used cc; Edgio's duty cycle and flap rate; and the path signs its
    entry rules find (control.path_signs()): high loss at low delay
    (policed, lossy), queueing delay over the base RTT (bloated)."""
    now = end - 1               # measure() reads [now - hours, now + 1)
    cfg = dataclasses.replace(control.Config(), hours=(now - start) / 3600)
    prefixes, _ = control.measure(engine, source, now, cfg)
    rows = []
    for prefix, p in sorted(prefixes.items()):
        n = p.under(baseline) if baseline else max(
            p.groups.values(), key=lambda g: g.connections)
        signs = control.path_signs(n, cfg)
        row = {"peer_prefix": prefix, "cc": n.cc}
        row.update(n.brief())
        row.update(duty=round(p.duty, 3), flap=round(p.flap, 3),
                   path="+".join(s for s, _ in signs) if signs else None,
                   why=signs[0][1] if signs else None)
        rows.append(row)
    return sorted(rows, key=_path_key)


def build(engine, source, start, end, baseline=None):
    """{table name: rows} for the report: by_cc, by_prefix, paths and,
    with a ``baseline``, rtt_reduction."""
    tables = {"by_cc": table(engine, source, "cc", start, end),
              "by_prefix": table(engine, source, "prefix", start, end),
              "paths": paths(engine, source, start, end, baseline)}
    if baseline is not None:
        tables["rtt_reduction"] = rtt_reduction(tables["by_cc"], baseline)
    return tables


TITLES = {"by_cc": "Per congestion control",
          "by_prefix": "Per peer prefix and congestion control",
          "paths": "Peer prefixes by their paths, worst first (as "
                   "copa-fleet control reads them)",
          "rtt_reduction": "RTT reduction against the baseline "
                           "(fraction of its RTT)"}


def plots(engine, source, start, end, directory, window_s=300, worst=5):
    """Write cdf.png, worst_prefixes.png and rate_vs_rtt.png into
    ``directory``; returns their paths."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    def save(fig, name):
        fig.tight_layout()
        fig.savefig(os.path.join(directory, name), dpi=100)
        plt.close(fig)
        return os.path.join(directory, name)

    paths = []
    # CDFs per cc.
    fig, axes = plt.subplots(1, 3, figsize=(15, 4))
    for ax, (column, label, scale) in zip(axes, (
            ("delivery_rate_bps", "delivery rate (Mbit/s), not app-limited",
             1e6),
            ("srtt_us", "srtt (ms)", 1e3),
            ("min_rtt_us", "min_rtt (ms)", 1e3))):
        for r in engine.rows(queries.cdf(source, column, start, end)):
            pts = _scaled(r["points"], scale)
            xs = [(x, q) for x, q in zip(pts, queries.CDF_LEVELS)
                  if x is not None]
            if xs:
                ax.plot([x for x, _ in xs], [q for _, q in xs],
                        label=r["cc"] or "(closed before a sweep)")
        ax.set_xlabel(label)
        ax.set_ylabel("CDF")
        ax.set_xscale("log")
        ax.legend(fontsize="small")
    paths.append(save(fig, "cdf.png"))

    # The worst prefixes (highest p90 srtt) over time.
    rows = engine.rows(queries.windows(source, window_s, start, end))
    series = {}
    for r in rows:
        p90 = _scaled(r["srtt_q"], 1e3)[1]
        if p90 is not None:
            series.setdefault((r["peer_prefix"], r["cc"]), []).append(
                (int(r["window_start"]), p90))
    ranked = sorted(series, key=lambda k: -max(v for _, v in series[k]))
    fig, ax = plt.subplots(figsize=(10, 4))
    t0 = min((t for s in series.values() for t, _ in s), default=0)
    for key in ranked[:worst]:
        ax.plot([(t - t0) / 60 for t, _ in series[key]],
                [v for _, v in series[key]], marker=".",
                label=f"{key[0]} {key[1]}")
    ax.set_xlabel(f"minutes ({window_s} s windows)")
    ax.set_ylabel("srtt p90 (ms)")
    ax.set_title(f"The {worst} worst prefix and cc pairs")
    ax.legend(fontsize="small")
    paths.append(save(fig, "worst_prefixes.png"))

    # Delivery rate against RTT per prefix, coloured by retransmissions.
    prefix_rows = table(engine, source, "prefix", start, end)
    fig, ax = plt.subplots(figsize=(8, 6))
    pts = [r for r in prefix_rows
           if r["srtt_p50_ms"] is not None and r[RATE_NAMES[0]] is not None]
    sc = ax.scatter([r["srtt_p50_ms"] for r in pts],
                    [r[RATE_NAMES[0]] for r in pts],
                    c=[r["retrans_overhead"] or 0 for r in pts],
                    cmap="viridis", vmin=0)
    for r in pts:
        ax.annotate(f"{r['peer_prefix']} {r['cc']}",
                    (r["srtt_p50_ms"], r[RATE_NAMES[0]]), fontsize=7)
    fig.colorbar(sc, label="retransmission overhead")
    ax.set_xlabel("srtt median (ms)")
    ax.set_ylabel("delivery rate median (Mbit/s)")
    ax.set_xscale("log")
    ax.set_yscale("log")
    paths.append(save(fig, "rate_vs_rtt.png"))
    return paths

