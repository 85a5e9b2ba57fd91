# SPDX-License-Identifier: GPL-2.0
"""Tables from a results directory: summary.csv, summary.md and the
headline ratios of the benchmark. Everything here reads the run and flow
JSON files, so a report can be rebuilt at any time (``copa-eval report``).
"""

import csv
import json
import os

from . import metrics

CSV_COLUMNS = (
    "scenario", "case", "variant", "repeat", "flow", "cc", "role",
    "rate_mbit", "rtt_ms", "buffer_bytes", "loss_pct", "throughput_mbit",
    "utilisation", "share", "qdelay_mean_ms", "qdelay_p50_ms",
    "qdelay_p95_ms", "retrans_overhead", "bytes_acked", "bytes_retrans",
    "jain_index", "link_utilisation", "link_qdelay_p95_ms", "cpu_busy",
    "sample_lag_p95_ms", "group", "direction")

# (column title, key in an aggregated row, digits)
TABLE_COLUMNS = (
    ("Mbit/s", "throughput_mbit", 2), ("util", "utilisation", 3),
    ("qdelay mean ms", "qdelay_mean_ms", 1),
    ("qdelay p95 ms", "qdelay_p95_ms", 1),
    ("retrans", "retrans_overhead", 4), ("Jain", "jain_index", 3),
    ("share", "share", 2), ("competitor share", "competitor_share", 2))
HEADLINES = (("throughput", "throughput_mbit"),
             ("p95 qdelay", "qdelay_p95_ms"),
             ("retrans", "retrans_overhead"))


def load_records(outdir):
    """Run records (run.json with its flows) of every finished run."""
    records = []
    runs = os.path.join(outdir, "runs")
    for name in sorted(os.listdir(runs)) if os.path.isdir(runs) else []:
        path = os.path.join(runs, name, "run.json")
        if not os.path.exists(path):
            continue
        with open(path) as f:
            record = json.load(f)
        flows = []
        index = 0
        while os.path.exists(os.path.join(runs, name, f"flow{index}.json")):
            with open(os.path.join(runs, name, f"flow{index}.json")) as f:
                flows.append(json.load(f))
            index += 1
        record["flows"] = flows
        records.append(record)
    return sorted(records, key=lambda r: r.get("seq", 0))


def flow_rows(records):
    """One dict per flow per run, with the CSV_COLUMNS keys."""
    rows = []
    for rec in records:
        link, meta = rec["link"], rec.get("case_meta", {})
        for flow in rec["flows"]:
            row = {k: flow.get(k) for k in CSV_COLUMNS}
            row.update(
                scenario=rec["scenario"], case=rec["case"],
                variant=rec["variant"]["spec"], repeat=rec["repeat"],
                flow=flow["index"], rate_mbit=link["rate_mbit"],
                rtt_ms=link["rtt_ms"], buffer_bytes=link["buffer_bytes"],
                loss_pct=link["loss_pct"], jain_index=rec["jain_index"],
                link_utilisation=rec["link_stats"]["utilisation"],
                link_qdelay_p95_ms=rec["link_stats"]["qdelay_p95_ms"],
                cpu_busy=rec["cpu_busy"],
                sample_lag_p95_ms=rec["sample_lag_p95_ms"],
                group=meta.get("group"), direction=meta.get("direction"))
            rows.append(row)
    return rows


def write_csv(rows, path):
    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=CSV_COLUMNS)
        writer.writeheader()
        for row in rows:
            writer.writerow({k: _csv_value(row.get(k)) for k in CSV_COLUMNS})


def _csv_value(value):
    if isinstance(value, float):
        return f"{value:.6g}"
    return "" if value is None else value


def _mean_of(rows, key):
    return metrics.mean(r[key] for r in rows if r.get(key) is not None)


def aggregate(rows, keys=("case", "variant")):
    """Rows averaged per ``keys``: the variant's flows give the figures,
    the competitor flows (fixed algorithms) give competitor_share.
    Returns a list of dicts in first-seen order."""
    groups = {}
    for row in rows:
        groups.setdefault(tuple(row[k] for k in keys), []).append(row)
    out = []
    for key, members in groups.items():
        own = [r for r in members if r["role"] == "variant"]
        other = [r for r in members if r["role"] == "competitor"]
        agg = dict(zip(keys, key))
        for _, field, _ in TABLE_COLUMNS[:-1]:
            agg[field] = _mean_of(own, field)
        agg["competitor_share"] = _mean_of(other, "share")
        agg["runs"] = len({(r["case"], r["variant"], r["repeat"])
                           for r in members})
        out.append(agg)
    return out


def markdown_table(agg_rows, keys):
    """A Markdown table of aggregated rows; empty columns are dropped."""
    columns = [c for c in TABLE_COLUMNS
               if any(r.get(c[1]) is not None for r in agg_rows)]
    head = [k for k in keys] + [title for title, _, _ in columns]
    lines = ["| " + " | ".join(head) + " |",
             "|" + "|".join("---" for _ in head) + "|"]
    for row in agg_rows:
        cells = [str(row[k]) for k in keys]
        cells += [_fmt(row.get(field), digits) for _, field, digits in columns]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _fmt(value, digits):
    return "-" if value is None else f"{value:.{digits}f}"


def headline_ratios(agg_rows, baselines=("cubic", "bbr")):
    """Per case and variant: each headline figure divided by the same
    figure of each baseline in the same case (same results directory)."""
    by_key = {(r["case"], r["variant"]): r for r in agg_rows}
    out = []
    for row in agg_rows:
        if row["variant"] in baselines:
            continue
        ratios = {"case": row["case"], "variant": row["variant"]}
        for base in baselines:
            ref = by_key.get((row["case"], base))
            for title, field in HEADLINES:
                ratios[f"{title} / {base}"] = _ratio(
                    row.get(field), ref.get(field) if ref else None)
        out.append(ratios)
    return out


def _ratio(value, ref):
    if value is None or ref is None:
        return None
    if ref == 0:
        return None if value else 1.0
    return value / ref


def ratio_table(ratios):
    if not ratios:
        return ""
    head = list(ratios[0])
    lines = ["| " + " | ".join(head) + " |",
             "|" + "|".join("---" for _ in head) + "|"]
    for r in ratios:
        lines.append("| " + " | ".join(
            r[k] if isinstance(r[k], str) else _fmt(r[k], 2)
            for k in head) + " |")
    return "\n".join(lines)


def group_summary(rows):
    """Households: per price group, direction and variant, the medians
    over households of normalised throughput (utilisation) and of the
    mean and p95 self-induced delay."""
    groups = {}
    for row in rows:
        if row["role"] != "variant" or not row.get("group"):
            continue
        key = (row["group"], row["direction"], row["variant"])
        groups.setdefault(key, []).append(row)
    out = []
    for (group, direction, variant), members in sorted(groups.items()):
        out.append({
            "group": group, "direction": direction, "variant": variant,
            "households": len({r["case"] for r in members}),
            "utilisation": metrics.percentile(
                [r["utilisation"] for r in members
                 if r["utilisation"] is not None], 50),
            "qdelay_mean_ms": metrics.percentile(
                [r["qdelay_mean_ms"] for r in members
                 if r["qdelay_mean_ms"] is not None], 50),
            "qdelay_p95_ms": metrics.percentile(
                [r["qdelay_p95_ms"] for r in members
                 if r["qdelay_p95_ms"] is not None], 50)})
    return out


def group_table(groups):
    head = ("group", "direction", "variant", "households",
            "median util", "median qdelay mean ms", "median qdelay p95 ms")
    lines = ["| " + " | ".join(head) + " |",
             "|" + "|".join("---" for _ in head) + "|"]
    for g in groups:
        lines.append(
            f"| {g['group']} | {g['direction']} | {g['variant']} | "
            f"{g['households']} | {_fmt(g['utilisation'], 3)} | "
            f"{_fmt(g['qdelay_mean_ms'], 1)} | "
            f"{_fmt(g['qdelay_p95_ms'], 1)} |")
    return "\n".join(lines)


def convergence_table(records):
    lines = []
    for rec in records:
        for c in rec.get("convergence", []):
            lines.append(f"| {rec['case']} | {rec['variant']['spec']} | "
                         f"{rec['repeat']} | {c['t_s']:g} | {c['flows']} | "
                         f"{_fmt(c['seconds'], 1)} |")
    if not lines:
        return ""
    return ("| case | variant | repeat | change at s | active flows | "
            "convergence s (Jain >= 0.9) |\n|---|---|---|---|---|---|\n"
            + "\n".join(lines))


def notes(records, manifest):
    """Caveats that every reader of the tables must see."""
    out = [f"Kernel {manifest.get('kernel')}, git {manifest.get('git')}, "
           f"command `{manifest.get('command')}`."]
    capped = sorted({r["case"] for r in records
                     if r.get("case_meta", {}).get("capped")})
    if capped:
        out.append(f"Rates above max_rate_mbit = "
                   f"{manifest['resolved'].get('max_rate_mbit', 50)} Mbit/s "
                   f"were capped to it, the fastest the VM emulates "
                   f"faithfully: {', '.join(capped)}.")
    starved = sorted({r["run"] for r in records
                      if (r.get("sample_lag_p95_ms") or 0) > 50})
    if starved:
        out.append(f"The machine was starved during {len(starved)} run(s) "
                   f"(sampling ticks late by > 50 ms at p95); treat their "
                   f"figures with suspicion: {', '.join(starved[:8])}"
                   f"{' ...' if len(starved) > 8 else ''}.")
    out.append("Utilisation is goodput over the configured capacity "
               "(bottleneck or policer rate, counted on 1514-byte frames, "
               "so 0.956 is the ceiling); queueing delay is each srtt "
               "sample minus the flow's configured base RTT; share is "
               "throughput over the time-averaged equal share.")
    return out


def write_reports(outdir, plot=True):
    """(Re)write summary.csv, summary.md and the sweep's plots."""
    with open(os.path.join(outdir, "manifest.json")) as f:
        manifest = json.load(f)
    records = load_records(outdir)
    rows = flow_rows(records)
    write_csv(rows, os.path.join(outdir, "summary.csv"))
    agg = aggregate(rows)
    parts = [f"# {manifest['scenario']}", "",
             manifest["resolved"].get("description", ""), "",
             markdown_table(agg, ("case", "variant")), ""]
    groups = group_summary(rows)
    if groups:
        parts += ["## Per price group (medians over households)", "",
                  group_table(groups), ""]
    conv = convergence_table(records)
    if conv:
        parts += ["## Convergence", "", conv, ""]
    parts += [f"- {line}" for line in notes(records, manifest)]
    with open(os.path.join(outdir, "summary.md"), "w") as f:
        f.write("\n".join(parts) + "\n")
    if plot and records:
        from . import plots
        plots.scatter(rows, os.path.join(outdir, "scatter.png"),
                      manifest["scenario"])
        if groups:
            plots.households(rows, os.path.join(outdir, "households.png"))
    return records, rows, agg
