# SPDX-License-Identifier: GPL-2.0
"""Tables from a results directory: summary.csv, summary.md and the
headline ratios of the benchmark. Everything here reads the run and flow
JSON files, so a report can be rebuilt at any time (``copa-eval report``).
"""

import csv
import json
import os

from .. import files
from . import metrics

FRAME_BYTES = 1514      # lab.FRAME_BYTES: a full frame as tbf counts it

CSV_COLUMNS = (
    "scenario", "case", "variant", "repeat", "flow", "cc", "role",
    "rate_mbit", "rtt_ms", "buffer_bytes", "loss_pct", "throughput_mbit",
    "utilisation", "share", "qdelay_mean_ms", "qdelay_p50_ms",
    "qdelay_p95_ms", "retrans_overhead", "bytes_acked", "bytes_retrans",
    "jain_index", "link_utilisation", "link_qdelay_p95_ms", "cpu_busy",
    "sample_lag_p95_ms", "group", "direction", "link_qdelay_mean_ms",
    "measure_from_s")

# (column title, key in an aggregated row, digits)
TABLE_COLUMNS = (
    ("Mbit/s", "throughput_mbit", 2), ("util", "utilisation", 3),
    ("qdelay mean ms", "qdelay_mean_ms", 1),
    ("qdelay p95 ms", "qdelay_p95_ms", 1),
    ("backlog qdelay mean ms", "link_qdelay_mean_ms", 1),
    ("backlog qdelay p95 ms", "link_qdelay_p95_ms", 1),
    ("retrans", "retrans_overhead", 4), ("Jain", "jain_index", 3),
    ("share", "share", 2), ("competitor share", "competitor_share", 2))
HEADLINES = (("throughput", "throughput_mbit"),
             ("mean qdelay", "qdelay_mean_ms"),
             ("p95 qdelay", "qdelay_p95_ms"),
             ("retrans", "retrans_overhead"))
# Figures whose spread over repeats the tables show: (title, key, digits,
# scale of the spread: utilisation in percentage points)
SPREAD_COLUMNS = (("util", "utilisation", 3, 100),
                  ("qdelay mean ms", "qdelay_mean_ms", 1, 1),
                  ("qdelay p95 ms", "qdelay_p95_ms", 1, 1))


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
                link_qdelay_mean_ms=rec["link_stats"].get("qdelay_mean_ms"),
                measure_from_s=rec["link_stats"].get("measure_from_s", 0),
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
    """One row per ``keys``: within each run (repeat) the variant's flows
    are averaged (the competitor flows, fixed algorithms, give
    competitor_share), then the runs' figures give the median (the row's
    figure) and, under "spread", metrics.spread() of each figure over the
    runs. Returns a list of dicts in first-seen order; "runs" counts the
    repeats."""
    groups = {}
    for row in rows:
        groups.setdefault(tuple(row[k] for k in keys), []).append(row)
    out = []
    for key, members in groups.items():
        by_run = {}
        for r in members:
            by_run.setdefault((r["case"], r["variant"], r["repeat"]),
                              []).append(r)
        per_run = []
        for run_rows in by_run.values():
            own = [r for r in run_rows if r["role"] == "variant"]
            other = [r for r in run_rows if r["role"] == "competitor"]
            figures = {field: _mean_of(own, field)
                       for _, field, _ in TABLE_COLUMNS[:-1]}
            figures["competitor_share"] = _mean_of(other, "share")
            per_run.append(figures)
        agg = dict(zip(keys, key))
        agg["spread"] = {}
        for _, field, _ in TABLE_COLUMNS:
            spread = metrics.spread(f[field] for f in per_run)
            agg[field] = spread["median"]
            agg["spread"][field] = spread
        agg["runs"] = len(by_run)
        out.append(agg)
    return out


def spread_cell(spread, digits, scale=1):
    """"min-max (range)" of one figure over repeats, e.g. "0.925-0.936
    (1.1 pts)" for utilisation (``scale`` 100: percentage points); "-"
    without values."""
    if not spread or spread.get("min") is None:
        return "-"
    unit = " pts" if scale == 100 else ""
    return (f"{spread['min']:.{digits}f}-{spread['max']:.{digits}f} "
            f"({spread['range'] * scale:.1f}{unit})")


def markdown_table(agg_rows, keys):
    """A Markdown table of aggregated rows; empty columns are dropped.
    With repeats (a row of more than one run), figures are medians over
    the runs, and "runs" plus min-max columns of SPREAD_COLUMNS follow."""
    columns = [c for c in TABLE_COLUMNS
               if any(r.get(c[1]) is not None for r in agg_rows)]
    repeated = any(r.get("runs", 1) > 1 for r in agg_rows)
    head = [k for k in keys] + [title for title, _, _ in columns]
    if repeated:
        head += ["runs"] + [f"{title} min-max (range)"
                            for title, _, _, _ in SPREAD_COLUMNS]
    lines = ["| " + " | ".join(head) + " |",
             "|" + "|".join("---" for _ in head) + "|"]
    for row in agg_rows:
        cells = [str(row[k]) for k in keys]
        cells += [_fmt(row.get(field), digits) for _, field, digits in columns]
        if repeated:
            cells.append(str(row.get("runs", 1)))
            cells += [spread_cell(row.get("spread", {}).get(field), digits,
                                  scale)
                      for _, field, digits, scale in SPREAD_COLUMNS]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def spread_rows(agg_rows):
    """The rows of a spread table (bench summary): per case and variant
    run more than once, the median and min-max of SPREAD_COLUMNS."""
    out = []
    for row in agg_rows:
        if row.get("runs", 1) < 2:
            continue
        entry = {"case": row["case"], "variant": row["variant"],
                 "runs": str(row["runs"])}
        for title, field, digits, scale in SPREAD_COLUMNS:
            spread = row.get("spread", {}).get(field)
            entry[f"{title} median"] = _fmt(row.get(field), digits)
            entry[f"{title} min-max (range)"] = spread_cell(spread, digits,
                                                            scale)
        out.append(entry)
    return out


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


HOUSEHOLD_RATIOS = (("throughput", "throughput_mbit"),
                    ("mean qdelay", "qdelay_mean_ms"),
                    ("p95 qdelay", "qdelay_p95_ms"),
                    ("backlog mean", "link_qdelay_mean_ms"),
                    ("backlog p95", "link_qdelay_p95_ms"))


def household_rows(rows, agg_rows, baseline="cubic"):
    """Households: per household, direction and variant, the link (rate,
    base RTT and the serialization time of one full frame, the floor of
    RTT-based queueing delay on slow links), the figures (medians over
    repeats) with queueing delay from srtt and from the bottleneck
    backlog side by side, and each figure over ``baseline``'s in the same
    case. [] when no row belongs to a household."""
    links = {}
    for row in rows:
        if row.get("group"):
            links.setdefault(row["case"], row)
    by_key = {(r["case"], r["variant"]): r for r in agg_rows}
    out = []
    for agg in agg_rows:
        link = links.get(agg["case"])
        if link is None:
            continue
        ref = by_key.get((agg["case"], baseline))
        entry = {"household": agg["case"], "group": link["group"],
                 "Mbit/s": link["rate_mbit"], "base RTT ms": link["rtt_ms"],
                 "1 frame ms": metrics.serialization_ms(FRAME_BYTES,
                                                        link["rate_mbit"]),
                 "variant": agg["variant"],
                 "util": agg.get("utilisation"),
                 "qdelay mean ms": agg.get("qdelay_mean_ms"),
                 "qdelay p95 ms": agg.get("qdelay_p95_ms"),
                 "backlog mean ms": agg.get("link_qdelay_mean_ms"),
                 "backlog p95 ms": agg.get("link_qdelay_p95_ms")}
        for title, field in HOUSEHOLD_RATIOS:
            entry[f"{title} / {baseline}"] = (
                None if agg["variant"] == baseline or ref is None
                else _ratio(agg.get(field), ref.get(field)))
        out.append(entry)
    return out


def household_table(entries):
    """Markdown of household_rows(); "" without households."""
    if not entries:
        return ""
    digits = {"Mbit/s": 3, "base RTT ms": 1, "1 frame ms": 1, "util": 3}
    head = list(entries[0])
    lines = ["| " + " | ".join(head) + " |",
             "|" + "|".join("---" for _ in head) + "|"]
    for e in entries:
        lines.append("| " + " | ".join(
            e[k] if isinstance(e[k], str)
            else _fmt(e[k], digits.get(k, 2 if " / " in k else 1))
            for k in head) + " |")
    return "\n".join(lines)


def drawn_links(records):
    """kind = "random_links": one entry per drawn link (case), in plan
    order, with the seed that drew it and its parameters: rate, base RTT,
    FIFO (BDP of the link and bytes) and, with a policer, its rate (Mbit/s
    and share of the link's), burst (bytes and the time it lasts at the
    policed rate). [] when no case was drawn."""
    out = {}
    for rec in records:
        seed = rec.get("case_meta", {}).get("seed")
        if seed is None or rec["case"] in out:
            continue
        link = rec["link"]
        entry = {"link": rec["case"], "seed": seed,
                 "Mbit/s": link["rate_mbit"], "RTT ms": link["rtt_ms"],
                 "FIFO BDP": link["buffer_bdp"],
                 "FIFO bytes": link["buffer_bytes"]}
        if link.get("policer_mbit"):
            entry.update({
                "policer Mbit/s": link["policer_mbit"],
                "policer / rate": link["policer_mbit"] / link["rate_mbit"],
                "burst bytes": link["policer_burst"],
                "burst ms": metrics.serialization_ms(link["policer_burst"],
                                                     link["policer_mbit"])})
        out[rec["case"]] = entry
    return list(out.values())


# Issue 32: behind a policer, a Copa variant should retransmit no more
# than cubic and deliver at least 95 % of bbr's goodput (bbr's lt_bw
# holds the policed rate), each on the same link in the same run:
# (title, key of headline_ratios(), comparison, bound, digits shown).
POLICER_GOALS = (("retrans / cubic", "retrans / cubic", "<=", 1.0, 2),
                 ("goodput / bbr", "throughput / bbr", ">=", 0.95, 3))
# the digits of the goal tables' columns (goodput: 0.946 is not 0.95)
GOAL_DIGITS = {f"{title}{suffix}": digits
               for title, _, _, _, digits in POLICER_GOALS
               for suffix in ("", " median")}


def goal_bounds():
    """The goals in words: "retrans / cubic <= 1 and goodput / bbr >=
    0.95"."""
    return " and ".join(f"{title} {op} {bound:g}"
                        for title, _, op, bound, _ in POLICER_GOALS)


def _meets(value, op, bound):
    if value is None:
        return None
    return value <= bound if op == "<=" else value >= bound


def policer_goals(ratios, records):
    """Per policed case and Copa variant (the rows of headline_ratios()
    whose link has a policer): each POLICER_GOALS ratio and the goals it
    meets. [] without a policed case."""
    policed = {r["case"] for r in records if r["link"].get("policer_mbit")}
    out = []
    for row in ratios:
        if row["case"] not in policed:
            continue
        entry = {"link": row["case"], "variant": row["variant"]}
        met = []
        for title, key, op, bound, _ in POLICER_GOALS:
            entry[title] = row.get(key)
            if _meets(row.get(key), op, bound):
                met.append(title.split(" /")[0])
        entry["goals met"] = ", ".join(met) or "none"
        out.append(entry)
    return out


def policer_goal_summary(per_link):
    """Per variant over the policed cases of policer_goals(): the number
    of links and, for each goal, the median, the min-max and how many
    links meet it ("links <= 1": "3/5")."""
    by_variant = {}
    for entry in per_link:
        by_variant.setdefault(entry["variant"], []).append(entry)
    out = []
    for variant, entries in by_variant.items():
        row = {"variant": variant, "links": str(len(entries))}
        for title, _, op, bound, digits in POLICER_GOALS:
            values = [e[title] for e in entries]
            spread = metrics.spread(values)
            met = sum(1 for v in values if _meets(v, op, bound))
            row[f"{title} median"] = spread["median"]
            row[f"{title} min-max"] = "-" if spread["min"] is None else \
                f"{spread['min']:.{digits}f}-{spread['max']:.{digits}f}"
            row[f"links {op} {bound:g}"] = f"{met}/{len(values)}"
        out.append(row)
    return out


def table_of(entries, digits=None):
    """A Markdown table of dicts (the first one's keys): strings as they
    are, integers whole, other numbers with digits[key] (default 2)
    decimals, None as "-"; "" without entries."""
    if not entries:
        return ""
    digits = digits or {}
    head = list(entries[0])

    def cell(key, value):
        if isinstance(value, str):
            return value
        if isinstance(value, int) and not isinstance(value, bool):
            return str(value)
        return _fmt(value, digits.get(key, 2))
    lines = ["| " + " | ".join(head) + " |",
             "|" + "|".join("---" for _ in head) + "|"]
    for e in entries:
        lines.append("| " + " | ".join(cell(k, e.get(k)) for k in head)
                     + " |")
    return "\n".join(lines)


def random_links_sections(records, ratios, heading):
    """Markdown lines for the drawn links (the seed and every link's
    parameters) and the policer goals, each under ``heading`` + title;
    [] when the runs have neither."""
    lines = []
    links = drawn_links(records)
    if links:
        seeds = sorted({e["seed"] for e in links})
        lines += [f"{heading}Links drawn with seed "
                  f"{', '.join(map(str, seeds))}", "",
                  "The scenario's [random_links] ranges, drawn from this "
                  "seed: the same seed draws the same links on every "
                  "machine. Burst ms is the bucket's depth at the policed "
                  "rate.", "",
                  table_of([{k: v for k, v in e.items() if k != "seed"}
                            for e in links], {"burst ms": 1}), ""]
    goals = policer_goals(ratios, records)
    if goals:
        lines += [f"{heading}Policer goals", "",
                  f"Each Copa variant against cubic and bbr on the same "
                  f"policed link in the same run; the goals: "
                  f"{goal_bounds()} "
                  f"(goodput is throughput, bytes acknowledged). Per "
                  f"link:", "", table_of(goals, GOAL_DIGITS), "",
                  "Over the policed links: the median and min-max of each "
                  "ratio, and how many links meet its goal:", "",
                  table_of(policer_goal_summary(goals), GOAL_DIGITS), ""]
    return lines


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
    measure_from = manifest.get("resolved", {}).get("measure_from_s") or 0
    if measure_from:
        out.append(f"Every figure leaves out the first {measure_from:g} s of "
                   f"each run (measure_from_s): throughput, retransmissions "
                   f"and queueing delay count only the samples after it; "
                   f"the time series show the whole run.")
    if any(r.get("repeat", 1) > 1 for r in records):
        out.append("With repeats, each figure is the median over the runs "
                   "of a case and variant; min-max gives the lowest and "
                   "highest run and, in brackets, their difference "
                   "(utilisation in percentage points).")
    out.append("Utilisation is goodput over the configured capacity "
               "(bottleneck or policer rate, counted on 1514-byte frames, "
               "so 0.956 is the ceiling); queueing delay is each srtt "
               "sample minus the flow's configured base RTT; backlog "
               "queueing delay is the bottleneck FIFO's backlog over its "
               "rate, sampled every sample_ms, for the whole link (all "
               "flows of the run); share is throughput over the "
               "time-averaged equal share.")
    return out


HOUSEHOLD_INTRO = (
    "Queueing delay from srtt samples (qdelay) beside the bottleneck "
    "backlog's (backlog), and each variant's figures over cubic's in the "
    "same household. \"1 frame ms\" is the serialization time of one "
    "1514-byte frame at the household's rate: srtt-based delay cannot go "
    "below it, so on slow links it sets a floor under the ratios.")


def write_reports(outdir, plot=True):
    """(Re)write summary.csv, summary.md and the sweep's plots."""
    manifest = files.load_manifest(os.path.join(outdir, "manifest.json"))
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
    houses = household_table(household_rows(rows, agg))
    if houses:
        parts += ["## Per household", "", HOUSEHOLD_INTRO, "", houses, ""]
    parts += random_links_sections(records, headline_ratios(agg), "## ")
    conv = convergence_table(records)
    if conv:
        parts += ["## Convergence", "", conv, ""]
    parts += [f"- {line}" for line in notes(records, manifest)]
    files.write_atomic(os.path.join(outdir, "summary.md"),
                       "\n".join(parts) + "\n")
    if plot and records:
        from . import plots
        plots.scatter(rows, os.path.join(outdir, "scatter.png"),
                      manifest["scenario"])
        if groups:
            plots.households(rows, os.path.join(outdir, "households.png"))
    return records, rows, agg
