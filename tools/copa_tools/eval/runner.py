# SPDX-License-Identifier: GPL-2.0
"""Running a scenario: every case x variant x repeat, resumably.

Layout of a results directory (default
results/<scenario>-<digest>-<revision>/, the digest covering the resolved
scenario and the revision the code, so the same command on the same code
resumes the same directory and a changed one gets a new directory):

    manifest.json           scenario as resolved, command, kernel, git
    runs/<run id>/          one per case x variant x repeat, complete or
        run.json            absent (written under a temporary name and
        flow<i>.json        renamed when the run has finished)
        timeseries.png
    summary.csv, summary.md, scatter.png (+ households.png)   report.py
"""

import contextlib
import datetime
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import time
from dataclasses import asdict, dataclass

from .. import files, paths
from . import lab, metrics
from .scenarios import build_flows

RUN_OVERHEAD_S = 12     # first ETA guess: set-up, iperf3 start, teardown


@dataclass
class RunSpec:
    case: object
    variant: object
    repeat: int
    seq: int            # position in the plan: reports keep this order

    @property
    def id(self):
        raw = f"{self.case.id}__{self.variant.slug}__r{self.repeat}"
        return re.sub(r"[^A-Za-z0-9_.,=+-]", "_", raw)


def plan(scenario):
    """Every run of ``scenario``: cases x variants x repeats."""
    combos = [(case, variant, repeat)
              for case in scenario.cases for variant in scenario.variants
              for repeat in range(1, scenario.repeats + 1)]
    return [RunSpec(*combo, seq=i) for i, combo in enumerate(combos)]


def digest(scenario):
    """A short hash of everything that determines the scenario's runs."""
    text = json.dumps(scenario.raw, sort_keys=True, default=str)
    return hashlib.sha1(text.encode()).hexdigest()[:8]


def results_dir():
    """Where results go by default: the source tree's results/, or
    results/ in the current directory for an installed copa-eval."""
    return os.path.join(paths.source_tree() or os.curdir, "results")


def default_outdir(scenario):
    return os.path.join(results_dir(), f"{scenario.name}-"
                        f"{digest(scenario)}-{revision_tag()}")


def revision_tag():
    """The code's part of a default results directory's name."""
    return git_revision() or "nogit"


def git_revision():
    """``git describe --always --dirty`` of the source tree, or None."""
    tree = paths.source_tree()
    if not tree:
        return None
    with contextlib.suppress(OSError):
        proc = subprocess.run(["git", "-C", tree, "describe", "--always",
                               "--dirty"], capture_output=True, text=True)
        if proc.returncode == 0:
            return proc.stdout.strip()
    return None


def module_info():
    """Version and current parameters of the Copa modules, if loaded."""
    info = {}
    for mod in ("tcp_copa", "tcp_copa_policer"):
        base = f"/sys/module/{mod}"
        if not os.path.isdir(base):
            continue
        entry = {}
        for name in ("version", "srcversion"):
            with contextlib.suppress(OSError):
                entry[name] = open(os.path.join(base, name)).read().strip()
        params = os.path.join(base, "parameters")
        with contextlib.suppress(OSError):
            entry["parameters"] = {
                p: open(os.path.join(params, p)).read().strip()
                for p in sorted(os.listdir(params))}
        info[mod] = entry
    return info


def _write_json(path, data):
    files.write_json(path, data)


class Progress:
    """Counts runs across one or more sweeps and prints an ETA."""

    def __init__(self, total, out=sys.stderr):
        self.total = total
        self.done = 0
        self.spent = 0.0
        self.measured = 0
        self.out = out
        self.t0 = time.monotonic()

    def skip(self, label):
        self.done += 1
        print(f"[{self.done}/{self.total}] {label}: already done",
              file=self.out, flush=True)

    def start(self, label, guess_s):
        remaining = self.total - self.done
        per_run = self.spent / self.measured if self.measured else guess_s
        eta = _hms(per_run * remaining)
        print(f"[{self.done + 1}/{self.total}] {label} "
              f"(elapsed {_hms(time.monotonic() - self.t0)}, ETA {eta})",
              file=self.out, flush=True)
        return time.monotonic()

    def finish(self, started):
        self.done += 1
        self.measured += 1
        self.spent += time.monotonic() - started


def _hms(seconds):
    seconds = int(seconds)
    return f"{seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"


def event_callable(event):
    """A Topology callback for one scenario [[events]] entry."""
    action, value = event["action"], event.get("value")

    def fire(topo):
        if action == "remove_policer":
            topo.remove_policer()
        elif action == "set_buffer":
            topo.set_buffer(int(value))
        else:
            getattr(topo, action)(value)
    fire.__name__ = f"{action}({'' if value is None else value})"
    return fire


def prepare(scenario, outdir, command):
    """Create ``outdir`` and its manifest, or check that it belongs to
    the same resolved scenario and the same code (so resuming never mixes
    experiments, nor reports one revision's runs as another's)."""
    os.makedirs(os.path.join(outdir, "runs"), exist_ok=True)
    path = os.path.join(outdir, "manifest.json")
    manifest = {"scenario": scenario.name, "digest": digest(scenario),
                "resolved": scenario.raw, "command": command,
                "kernel": os.uname().release, "git": git_revision(),
                "created": datetime.datetime.now().isoformat(
                    timespec="seconds")}
    if os.path.exists(path):
        old = files.load_manifest(path)
        if old.get("digest") != manifest["digest"]:
            raise RuntimeError(
                f"{outdir} holds results of a different scenario "
                f"(digest {old.get('digest')}, now {manifest['digest']}); "
                f"choose another --out")
        if old.get("git") != manifest["git"]:
            raise RuntimeError(
                f"{outdir} holds results measured at git {old.get('git')},"
                f" the tree is at {manifest['git']}; resuming would mix the"
                f" two: choose another --out or remove it")
        return old
    _write_json(path, manifest)
    return manifest


def run_dir(outdir, spec):
    return os.path.join(outdir, "runs", spec.id)


def execute(scenario, outdir, progress, plot=True):
    """Run every not yet finished run of ``scenario`` into ``outdir``."""
    for spec in plan(scenario):
        label = f"{scenario.name} {spec.case.id} {spec.variant.spec} " \
            f"r{spec.repeat}"
        final = run_dir(outdir, spec)
        if os.path.exists(os.path.join(final, "run.json")):
            progress.skip(label)
            continue
        started = progress.start(label, scenario.duration_s + RUN_OVERHEAD_S)
        tmp = final + ".partial"
        shutil.rmtree(tmp, ignore_errors=True)
        os.makedirs(tmp)
        record = run_one(scenario, spec, tmp)
        if plot:
            from . import plots
            plots.timeseries(record, os.path.join(tmp, "timeseries.png"))
        shutil.rmtree(final, ignore_errors=True)
        os.rename(tmp, final)
        progress.finish(started)


def run_one(scenario, spec, directory):
    """Run one case x variant x repeat; write its JSON files; return the
    run record (run.json content with the flows included)."""
    link = lab.Link(**spec.case.link)
    flows, roles = build_flows(spec.case.flows, spec.variant)
    events = [(e["t_s"], event_callable(e)) for e in scenario.events]
    started = datetime.datetime.now().isoformat(timespec="seconds")
    t0 = time.monotonic()
    result = lab.run(link, flows, scenario.duration_s, events=events,
                     sample_ms=scenario.sample_ms,
                     measure_from_s=scenario.measure_from_s)
    record = run_record(scenario, spec, result, roles)
    record.update(started=started, wall_s=round(time.monotonic() - t0, 1),
                  modules=module_info())
    for flow in record["flows"]:
        _write_json(os.path.join(directory, f"flow{flow['index']}.json"),
                    flow)
    _write_json(os.path.join(directory, "run.json"),
                {k: v for k, v in record.items() if k != "flows"})
    return record


def run_record(scenario, spec, result, roles):
    """The JSON-ready description of one finished run."""
    data = result.to_dict()
    windows = [(f["start_s"], f["start_s"] + f["duration_s"])
               for f in data["flows"]]
    for i, flow in enumerate(data["flows"]):
        share = metrics.fair_share_mbit(result.link.capacity_mbit, windows, i)
        flow.update(role=roles[i], variant=spec.variant.spec,
                    run=spec.id, fair_share_mbit=share,
                    share=(flow["throughput_mbit"] / share
                           if flow["throughput_mbit"] is not None and share
                           else None))
    data.update(fairness(data["flows"]))
    data.update(scenario=scenario.name, run=spec.id, case=spec.case.id,
                case_params=spec.case.params, case_meta=spec.case.meta,
                repeat=spec.repeat, seq=spec.seq,
                variant=asdict(spec.variant))
    return data


def fairness(flows):
    """Jain's index over time (1 s bins) and convergence after each flow
    joins or leaves, for runs with several flows."""
    if len(flows) < 2:
        return {"jain_series": [], "convergence": []}
    series = [list(zip(f["series"]["t"], f["series"]["throughput_mbit"]))
              for f in flows]
    points = metrics.jain_series(series, 1.0)
    changes = sorted({t for f in flows for t in
                      (f["start_s"], f["start_s"] + f["duration_s"])} -
                     {0})
    convergence = []
    for k, t in enumerate(changes):
        end = changes[k + 1] if k + 1 < len(changes) else float("inf")
        active = sum(1 for f in flows
                     if f["start_s"] <= t < f["start_s"] + f["duration_s"])
        if active < 2:
            continue
        within = [(tt, j) for tt, j in points if tt <= end]
        convergence.append({"t_s": t, "flows": active,
                            "seconds": metrics.convergence_time(within, t)})
    return {"jain_series": points, "convergence": convergence}
