#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""copa-eval end to end: one short sweep, every output file, consistency.

Runs in the project VM (root, netem, tcp_copa loaded). A two-run sweep
(cubic and copa:delta=0.2, each sharing a 10 Mbit/s, 30 ms link with a
cubic competitor for 6 s) is run through the venv's copa-eval into a scratch
directory, then run again to check that it resumes without redoing
anything. Both runs pass --no-plots: drawing under TCG costs more VM
time than the flows, and tests/unit/test_report.py draws every plot from
recorded runs on the host.

- outputs: manifest, summary.csv/.md and, per run, run.json and one JSON
  file per flow all exist and are non-empty.
- consistency: the CSV repeats the flow files' figures; utilisation is
  throughput over capacity; retransmission overhead is bytes_retrans /
  bytes_acked; bytes_acked agrees with iperf3's received byte count; Jain's
  index lies in [1/2, 1]; p50 <= p95 queueing delay.
- variants: the copa flow ran copa with net.ipv4.tcp_copa.delta=0.2 set in
  its namespace, as sock_diag and the sysctl record show.
- resume: the second invocation reports both runs as already done.
"""

import csv
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
sys.path[:0] = [os.path.join(ROOT, "tests")]

from ksft import (VENV_BIN, ksft_eq, ksft_ge, ksft_pr, ksft_exit, ksft_run,  # noqa: E402
                  ksft_true)

SCENARIO = """
description = "copa-eval end-to-end test"
variants = ["cubic", "copa:delta=0.2"]
duration_s = 6
[link]
rate_mbit = 10
rtt_ms = 30
buffer_bdp = 2
[[flows]]
cc = "variant"
[[flows]]
cc = "cubic"
"""
RUN_FILES = ("run.json", "flow0.json", "flow1.json")
SWEEP_FILES = ("manifest.json", "summary.csv", "summary.md")
IPERF_AGREEMENT = (0.7, 1.05)   # bytes_acked / iperf3 received bytes

COPA_EVAL = os.path.join(VENV_BIN, "copa-eval")
STATE = {}


def copa_eval(*args):
    proc = subprocess.run([COPA_EVAL, *args], capture_output=True,
                          text=True)
    for line in (proc.stdout + proc.stderr).splitlines()[-12:]:
        ksft_pr(line)
    ksft_eq(proc.returncode, 0, f"copa-eval {args[0]} exit status")
    return proc.stdout + proc.stderr


def run_dirs():
    runs = os.path.join(STATE["out"], "runs")
    return [os.path.join(runs, d) for d in sorted(os.listdir(runs))]


def outputs():
    """A sweep writes every file, for every run."""
    work = tempfile.mkdtemp(prefix="copa-e2e-")
    STATE["scenario"] = os.path.join(work, "e2e.toml")
    STATE["out"] = os.path.join(work, "out")
    with open(STATE["scenario"], "w") as f:
        f.write(SCENARIO)
    copa_eval("run", STATE["scenario"], "--out", STATE["out"], "--no-plots")
    for name in SWEEP_FILES:
        path = os.path.join(STATE["out"], name)
        ksft_true(os.path.exists(path) and os.path.getsize(path) > 0, name)
    dirs = run_dirs()
    ksft_eq(len(dirs), 2, "run directories")
    for d in dirs:
        for name in RUN_FILES:
            path = os.path.join(d, name)
            ksft_true(os.path.exists(path) and os.path.getsize(path) > 0,
                      f"{os.path.basename(d)}/{name}")


def load_flows(d):
    return [json.load(open(os.path.join(d, f"flow{i}.json"))) for i in (0, 1)]


def consistency():
    """Figures agree across the flow files, the CSV and iperf3."""
    with open(os.path.join(STATE["out"], "summary.csv")) as f:
        rows = {(r["case"], r["variant"], r["flow"]): r
                for r in csv.DictReader(f)}
    ksft_eq(len(rows), 4, "summary.csv rows (2 runs x 2 flows)")
    for d in run_dirs():
        record = json.load(open(os.path.join(d, "run.json")))
        capacity = record["link"]["capacity_mbit"]
        jain = record["jain_index"]
        ksft_true(0.5 <= jain <= 1, f"Jain's index of two flows {jain} "
                  f"in [1/2, 1]")
        for flow in load_flows(d):
            name = f"{os.path.basename(d)} flow {flow['index']}"
            ksft_pr(f"{name}: {flow['cc_observed']} "
                    f"{flow['throughput_mbit']:.2f} Mbit/s, qdelay p95 "
                    f"{flow['qdelay_p95_ms']:.1f} ms, retrans "
                    f"{flow['retrans_overhead']:.4f}")
            row = rows[(record["case"], record["variant"]["spec"],
                        str(flow["index"]))]
            ksft_eq(round(float(row["throughput_mbit"]), 3),
                    round(flow["throughput_mbit"], 3), f"{name}: CSV")
            ksft_eq(round(flow["utilisation"], 6),
                    round(flow["throughput_mbit"] / capacity, 6),
                    f"{name}: utilisation = throughput / capacity")
            ksft_eq(round(flow["retrans_overhead"], 9),
                    round(flow["bytes_retrans"] / flow["bytes_acked"], 9),
                    f"{name}: retrans overhead = retrans / acked")
            ratio = flow["bytes_acked"] / flow["iperf"]["received_bytes"]
            ksft_ge(ratio, IPERF_AGREEMENT[0], f"{name}: acked vs iperf3",
                    ideal=1)
            ksft_ge(IPERF_AGREEMENT[1], ratio, f"{name}: acked vs iperf3",
                    ideal=1)
            p50, p95 = flow["qdelay_p50_ms"], flow["qdelay_p95_ms"]
            ksft_true(p95 >= p50, f"{name}: p95 {p95} >= p50 {p50}")


def variants():
    """The copa variant ran copa with its delta sysctl."""
    copa = [d for d in run_dirs() if "copa_delta-0.2" in d]
    ksft_eq(len(copa), 1, "one copa:delta=0.2 run")
    flow = load_flows(copa[0])[0]
    ksft_eq(flow["cc_observed"], "copa", "sock_diag reports copa")
    ksft_eq(flow["sysctls"], {"net.ipv4.tcp_copa.delta": "0.2"},
            "delta sysctl set in the flow's namespace")
    ksft_eq(load_flows(copa[0])[1]["cc_observed"], "cubic",
            "the competitor runs cubic")


def resume():
    """A second invocation redoes nothing."""
    before = {d: os.path.getmtime(os.path.join(d, "run.json"))
              for d in run_dirs()}
    out = copa_eval("run", STATE["scenario"], "--out", STATE["out"],
                    "--no-plots")
    ksft_eq(out.count("already done"), 2, "both runs reported done")
    ksft_eq(before, {d: os.path.getmtime(os.path.join(d, "run.json"))
                     for d in run_dirs()}, "run files untouched")


if __name__ == "__main__":
    ksft_run([outputs, consistency, variants, resume])
    ksft_exit()
