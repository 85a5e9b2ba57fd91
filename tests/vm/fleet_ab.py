#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""copa-fleet ab against copa-eval, in the project VM (issue 35): an A/B
of copa against cubic on the bloated household link gives an RTT
difference whose sign and size agree with the same link measured one
flow at a time by copa-eval's lab.

fleet_control.py's server namespace sends objects (50 KB to 5 MB) to four
clients, each behind its own bloated link (2 Mbit/s, 40 ms, 2 BDP FIFO),
one fetcher each: a connection at a time, so no two connections share a
bottleneck and per-connection assignment is fair. The server runs in a
cgroup with the sock_ops program (the guest's prebuilt object,
``vm-run --bpf``), and ``copa-fleet ab start bloat --unit connection``
gives each connection cubic or copa (the module); the collector records
the arms. After AB_S, ``copa-fleet ab report`` gives each metric's
difference (treatment - control) with its bootstrap interval.

copa-eval's lab (``copa_tools.eval.lab.run``, what ``copa-eval run``
runs) then measures the same link with one bulk flow, cubic alone and
copa alone, EVAL_S each. Checks: the A/B labelled both arms, with at
least MIN_CONNS connections each; for srtt p50 and p90 the A/B's
relative difference (treatment - control) / control and copa-eval's
(copa - cubic) / cubic are both negative and agree (copa_tools.fleet.ab's
agrees(), scripts/ab-bench's rule: within a quarter of copa-eval's).

Not a test_*.py, so not in make check (about 5 minutes). By hand::

    scripts/vm-run --bpf --timeout 900 -- tests/run-vm --timeout 800 \\
        tests/vm/fleet_ab.py
"""

import csv
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import fleet_control as fc  # noqa: E402
from copa_tools.eval.lab import Flow, Link, run  # noqa: E402
from copa_tools.eval.metrics import percentile  # noqa: E402
from copa_tools.fleet.ab import agrees  # noqa: E402
from ksft import (KsftSkipEx, cmd, ksft_eq, ksft_ge, ksft_exit,  # noqa: E402
                  ksft_pr, ksft_run, ksft_true, load_copa)

AB_S = 180
EVAL_S = 30
MIN_CONNS = 10
CONTROL, TREATMENT = "cubic", "copa"
SCOPE = "10.90.0.0/16"
SALT = 35
CGROUP = "/sys/fs/cgroup/copa-fleet-ab"
RATE, RTT_MS, FIFO_BDP = fc.BLOATED[:3]
METRICS = (("srtt_p50_ms", 0.5), ("srtt_p90_ms", 0.9))


def copa_bpf(*args, check=True):
    return cmd([os.path.join(fc.VENV_BIN, "copa-bpf"), *args], check=check)


def fleet(*args):
    return cmd([fc.COPA_FLEET, *args], timeout=600)


def sock_ops():
    """The sock_ops program on CGROUP, from the guest's prebuilt objects."""
    prebuilt = os.environ.get("COPA_BPF_PREBUILT")
    if not prebuilt:
        raise KsftSkipEx("no prebuilt BPF objects: run under vm-run --bpf")
    os.environ["COPA_BPF_DIR"] = os.path.dirname(prebuilt)  # its bpf/
    if not os.path.exists("/sys/fs/cgroup/cgroup.subtree_control"):
        cmd(["mount", "-t", "cgroup2", "none", "/sys/fs/cgroup"])
    os.makedirs(CGROUP, exist_ok=True)
    copa_bpf("sockops", "attach", CGROUP)


def eval_reference():
    """{metric: (cubic, copa)} from one bulk flow of each, alone."""
    link = Link(rate_mbit=RATE, rtt_ms=RTT_MS, buffer_bdp=FIFO_BDP)
    out = {}
    for cc in (CONTROL, TREATMENT):
        res = run(link, [Flow(cc)], duration_s=EVAL_S)
        rtts = [r / 1e3 for r in res.flows[0].samples["rtt_us"] if r]
        for name, q in METRICS:
            out.setdefault(name, []).append(percentile(rtts, 100 * q))
    return out


def ab_phase():
    """The A/B's rows of ab_differences.csv for the whole experiment,
    {metric: row}, and each arm's connections."""
    with fc.Lab((fc.BLOATED,) * 4, "ab", cgroup=CGROUP) as lab:
        state = lab.state
        fleet("ab", "start", "bloat", "--state-dir", state,
              "--control", f"cc={CONTROL}", "--treatment",
              f"cc={TREATMENT}", "--unit", "connection", "--scope", SCOPE,
              "--salt", str(SALT))
        try:
            time.sleep(AB_S)
        finally:
            fleet("ab", "stop", "--state-dir", state)
        time.sleep(3)
        lab.stop(lab.collector)
        r = fleet("ab", "report", "bloat", "--state-dir", state,
                  "--csv", state)
        ksft_pr(r.stdout)
        with open(os.path.join(state, "ab_differences.csv")) as f:
            diffs = {row["metric"]: row for row in csv.DictReader(f)
                     if row["group"] == "all"}
        with open(os.path.join(state, "ab_arms.csv")) as f:
            arms = {row["arm"]: int(row["connections"])
                    for row in csv.DictReader(f) if row["group"] == "all"}
    return diffs, arms


def test_ab_agrees_with_copa_eval():
    fc.need_chdb()
    diffs, arms = ab_phase()
    ksft_pr(f"connections per arm: {arms}")
    ksft_eq(sorted(arms), ["control", "treatment"], "arms recorded")
    ksft_ge(min(arms.values()), MIN_CONNS, "connections in each arm")
    ref = eval_reference()
    for name, _ in METRICS:
        d = diffs[name]
        estimate = float(d["relative"])
        cubic, copa = ref[name]
        reference = (copa - cubic) / cubic
        ksft_pr(f"{name}: A/B control {float(d['control']):.1f} ms, "
                f"treatment {float(d['treatment']):.1f} ms "
                f"({estimate:+.2f}, interval of the difference "
                f"{float(d['low']):.1f} to {float(d['high']):.1f} ms); "
                f"copa-eval "
                f"cubic {cubic:.1f} ms, copa {copa:.1f} ms "
                f"({reference:+.2f})")
        ksft_true(estimate < 0 and reference < 0, f"{name}: copa lower")
        ksft_true(agrees(estimate, reference),
                  f"{name}: {estimate:+.2f} agrees with {reference:+.2f}")


def main():
    fc.under_venv(__file__)
    load_copa()
    sock_ops()
    try:
        ksft_run([test_ab_agrees_with_copa_eval])
    finally:
        copa_bpf("sockops", "detach", CGROUP, check=False)
    ksft_exit()


if __name__ == "__main__":
    main()
