# SPDX-License-Identifier: GPL-2.0
"""copa-fleet ab report: an experiment's arms compared, per arm and per
region or prefix group.

Per arm: connections, clusters (units of assignment), records, delivery
rate p50, p10 and p1 (not application-limited), srtt p50 to p99 and the
retransmission overhead, as copa-fleet report computes them. Per metric:
treatment minus control, with a bootstrap interval that resamples the
clusters (stats.py): connections for --unit connection, clients, prefixes,
or (prefix, period) pairs under switchback; the p-values of the whole
report adjusted by Benjamini-Hochberg. Checks: the sample-ratio-mismatch
chi-square over the clusters, the records whose recorded arm is not the
hash's (none expected), and under switchback the records left out as
washout or carryover (a connection of the previous period's arm).
"""

import ipaddress
import os
import sys
import tempfile
import time

import numpy as np

from . import ab, queries, report, stats

SRM_ALPHA = 0.001               # a mismatch this unlikely stops the reading
METRICS = (
    [(n, "rate", q, 1e6) for n, q in zip(report.RATE_NAMES,
                                         queries.RATE_LEVELS)]
    + [(f"srtt_{n}_ms", "srtt", q, 1e3) for n, q in zip(report.RTT_NAMES,
                                                       queries.RTT_LEVELS)])


class Groups:
    """A peer's group: the longest of ``prefixes`` ({network: group})
    holding it, else 'other'; by_prefix: the experiment's prefix."""

    def __init__(self, prefixes=None, exp=None):
        self.nets = sorted(prefixes.items(), key=lambda kv: -kv[0].prefixlen) \
            if prefixes else None
        self.exp = exp
        self.cache = {}

    @classmethod
    def read(cls, path):
        prefixes = {}
        with open(path) as f:
            for n, line in enumerate(f, 1):
                words = line.split("#")[0].split()
                if not words:
                    continue
                try:
                    if len(words) != 2:
                        raise ValueError("expected 'PREFIX GROUP'")
                    prefixes[ipaddress.ip_network(words[0],
                                                  strict=False)] = words[1]
                except ValueError as err:
                    raise ab.AbError(f"{path}:{n}: {err}") from err
        return cls(prefixes)

    def of(self, peer):
        g = self.cache.get(peer)
        if g is None:
            ip = ipaddress.ip_address(peer)
            if ip.version == 6 and ip.ipv4_mapped:
                ip = ip.ipv4_mapped
            if self.exp:
                plen = self.exp.prefix_v4 if ip.version == 4 \
                    else self.exp.prefix_v6
                g = str(ipaddress.ip_network(f"{ip}/{plen}", strict=False))
            else:
                g = next((name for net, name in self.nets
                          if net.version == ip.version and ip in net),
                         "other")
            self.cache[peer] = g
        return g


class Assigner:
    """Each row's arm, cluster and whether it counts, from the
    experiment's hash (ab.Experiment.arm), with the checks' counts."""

    def __init__(self, exp):
        self.exp = exp
        self.index = {label: i for i, label in enumerate(exp.labels())}
        self.cache = {}
        self.counts = {"mismatched": 0, "washout": 0, "carryover": 0}

    def __call__(self, cookie, peer, t, label, count=True):
        """(arm, cluster) of a row, or None if it is left out; ``count``
        it in the checks' counts (records are, connections not)."""
        exp, recorded = self.exp, self.index[label]
        counts = self.counts if count else dict(self.counts)
        if exp.in_washout(t):
            counts["washout"] += 1
            return None
        words = exp.unit_words(cookie, peer)
        key = (words, exp.period(t))
        expected = self.cache.get(key)
        if expected is None:
            expected = self.cache[key] = ab.arm(
                exp.salt, exp.share_units(), *words, key[1])
        if expected != recorded:
            counts["carryover" if exp.switchback_s else "mismatched"] += 1
            if exp.switchback_s:
                return None
        return recorded, key


def collect(engine, source, exp, start, end, groups):
    """The experiment's records and connections as arrays per field:
    arm, cluster (an integer id), group, and the metrics."""
    assign = Assigner(exp)
    clusters = {}

    def table(rows, time_field, fields, count):
        out = {k: [] for k in ("arm", "cluster", "group") + fields}
        for r in rows:
            got = assign(int(r["cookie"]), r["peer"], int(r[time_field]),
                         r["arm"], count)
            if got is None:
                continue
            out["arm"].append(got[0])
            out["cluster"].append(clusters.setdefault(got[1],
                                                      len(clusters)))
            out["group"].append(groups.of(r["peer"]) if groups else "all")
            for f in fields:
                out[f].append(float(r[f]))
        return {k: np.asarray(v) for k, v in out.items()}

    labels = exp.labels()
    recs = table(engine.rows(queries.ab_records(source, labels, start, end)),
                 "t", ("rate", "rate_ok", "srtt", "srtt_ok"), True)
    conns = table(engine.rows(queries.ab_connections(source, labels,
                                                         start, end)),
                  "first_time", ("acked", "retrans"), False)
    return recs, conns, assign.counts


def _pick(table, mask):
    return {k: v[mask] for k, v in table.items()}


def _quantile_stat(recs, metric, q, scale):
    ok = recs[f"{metric}_ok"] > 0
    return stats.Quantiles(recs[metric][ok] / scale, recs["cluster"][ok],
                           (q,))


def _arm_row(group, arm_name, recs, conns):
    row = {"group": group, "arm": arm_name,
           "connections": len(conns["arm"]),
           "clusters": len(np.unique(recs["cluster"])),
           "records": len(recs["arm"])}
    for name, metric, q, scale in METRICS:
        s = _quantile_stat(recs, metric, q, scale)
        row[name] = float(s()[0]) if s.size else None
    row["retrans_overhead"] = (float(conns["retrans"].sum()
                                     / max(conns["acked"].sum(), 1))
                               if len(conns["arm"]) else None)
    return row


def _differences(group, recs, conns, alpha, resamples, rng, poisson):
    arms = [_pick(recs, recs["arm"] == i) for i in range(2)]
    carms = [_pick(conns, conns["arm"] == i) for i in range(2)]
    tests = [(name, [_quantile_stat(a, metric, q, scale) for a in arms])
             for name, metric, q, scale in METRICS]
    tests.append(("retrans_overhead",
                  [stats.Ratio(c["retrans"], c["acked"], c["cluster"])
                   for c in carms]))
    out = []
    for name, (control, treatment) in tests:
        row = {"group": group, "metric": name}
        try:
            d = stats.difference(control, treatment, alpha, resamples,
                                 rng, poisson)
        except ValueError:
            d = None
        if d is None:
            row.update(control=None, treatment=None, difference=None,
                       low=None, high=None, relative=None, p=None)
        else:
            c, t = float(control()[0]), float(treatment()[0])
            row.update(control=c, treatment=t,
                       difference=float(d["estimate"][0]),
                       low=float(d["low"][0]), high=float(d["high"][0]),
                       relative=(t - c) / c if c else None,
                       p=float(d["p"][0]))
            row["method"] = d["method"]
        row.setdefault("method", None)
        out.append(row)
    return out


def analyse(exp, recs, conns, counts, alpha=0.05, resamples=2000, seed=0,
            poisson=None):
    """{table: rows}: arms, differences and checks."""
    rng = np.random.default_rng(seed)
    names = ["all"] + sorted(set(recs["group"]) - {"all"})
    arms, diffs = [], []
    for g in names:
        rmask = np.ones(len(recs["arm"]), bool) if g == "all" \
            else recs["group"] == g
        cmask = np.ones(len(conns["arm"]), bool) if g == "all" \
            else conns["group"] == g
        r, c = _pick(recs, rmask), _pick(conns, cmask)
        for i, arm_name in enumerate(ab.ARMS):
            arms.append(_arm_row(g, arm_name, _pick(r, r["arm"] == i),
                                 _pick(c, c["arm"] == i)))
        diffs += _differences(g, r, c, alpha, resamples, rng, poisson)
    reject, adjusted = stats.benjamini_hochberg(
        [np.nan if d["p"] is None else d["p"] for d in diffs], alpha)
    for d, rej, adj in zip(diffs, reject, adjusted):
        d["p_bh"] = None if np.isnan(adj) else float(adj)
        d["significant"] = bool(rej)
    units = [len(np.unique(recs["cluster"][recs["arm"] == i]))
             for i in range(2)]
    srm = stats.sample_ratio(units, (1 - exp.share, exp.share))
    checks = [{"check": "clusters per arm (control, treatment)",
               "value": f"{units[0]}, {units[1]}"},
              {"check": "expected treatment share", "value": exp.share},
              {"check": "sample ratio mismatch: chi-square p", "value": srm},
              {"check": f"sample ratio mismatch (p < {SRM_ALPHA})",
               "value": "YES: do not read the differences"
               if srm < SRM_ALPHA else "no"},
              {"check": "records whose arm is not the hash's",
               "value": counts["mismatched"]}]
    if exp.switchback_s:
        checks += [{"check": "records left out: washout",
                    "value": counts["washout"]},
                   {"check": "records left out: carryover",
                    "value": counts["carryover"]}]
    return {"arms": arms, "differences": diffs, "checks": checks}


TITLES = {"arms": "Per arm",
          "differences": "Treatment minus control, with bootstrap "
                         "intervals (p_bh: Benjamini-Hochberg)",
          "checks": "Checks"}


def plot(tables, path):
    """ab_differences.png: each metric's difference with its interval,
    one row of panels per group."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    groups = list(dict.fromkeys(d["group"] for d in tables["differences"]))
    panels = (("delivery rate (Mbit/s)", report.RATE_NAMES),
              ("srtt (ms)", tuple(f"srtt_{n}_ms" for n in report.RTT_NAMES)),
              ("retransmission overhead", ("retrans_overhead",)))
    fig, axes = plt.subplots(len(groups), 3, squeeze=False,
                             figsize=(14, 2.8 * len(groups)))
    by = {(d["group"], d["metric"]): d for d in tables["differences"]}
    for row, g in zip(axes, groups):
        for ax, (label, names) in zip(row, panels):
            ds = [(n, by.get((g, n))) for n in names]
            ds = [(n, d) for n, d in ds if d and d["difference"] is not None]
            xs = range(len(ds))
            ax.errorbar(xs, [d["difference"] for _, d in ds],
                        yerr=[[d["difference"] - d["low"] for _, d in ds],
                              [d["high"] - d["difference"] for _, d in ds]],
                        fmt="o", capsize=4)
            for x, (_, d) in zip(xs, ds):
                if d["significant"]:
                    ax.annotate("*", (x, d["high"]), ha="center")
            ax.axhline(0, color="grey", lw=0.8)
            ax.set_xticks(list(xs), [n for n, _ in ds], fontsize=7)
            ax.set_title(f"{g}: {label}", fontsize=9)
            ax.set_ylabel("treatment - control")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def main(args):
    """copa-fleet ab report (args: ab.add_parser's)."""
    from . import cli

    exp = ab.Experiment.load(ab.experiment_path(args.state_dir, args.name))
    if not 0 < args.alpha < 1 or args.resamples < 100:
        raise ab.AbError("--alpha in (0, 1), --resamples at least 100")
    groups = Groups.read(args.groups) if args.groups else \
        Groups(exp=exp) if args.by_prefix else None
    start, end = exp.started, (exp.stopped or time.time()) + 1
    try:
        with tempfile.TemporaryDirectory(prefix="copa-fleet-") as scratch:
            engine, source = cli.report_source(args, scratch)
            recs, conns, counts = collect(engine, source, exp, start, end,
                                          groups)
    except (report.ReportError, queries.QueryError) as err:
        raise ab.AbError(str(err)) from err
    if not len(recs["arm"]):
        raise ab.AbError(f"no records of {exp.name} between "
                         f"{time.ctime(start)} and {time.ctime(end)}")
    tables = analyse(exp, recs, conns, counts, args.alpha, args.resamples,
                     args.seed)
    for name, rows in tables.items():
        if args.csv:
            os.makedirs(args.csv, exist_ok=True)
            with open(os.path.join(args.csv, f"ab_{name}.csv"), "w") as f:
                f.write(report.to_csv(rows))
        print(report.markdown(rows, TITLES[name]))
    if args.plots:
        os.makedirs(args.plots, exist_ok=True)
        print(plot(tables, os.path.join(args.plots, "ab_differences.png")),
              file=sys.stderr)
