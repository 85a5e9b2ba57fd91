# SPDX-License-Identifier: GPL-2.0
"""Command line of copa-eval; see ``copa-eval --help``."""

import argparse
import contextlib
import datetime
import hashlib
import json
import os
import shlex
import signal
import subprocess
import sys
import time
import tomllib

from .. import files, paths
from . import lab, report, runner, scenarios
from .scenarios import SCENARIO_DIR, ScenarioError
from .variants import VariantError

# --vm and the bench's document are a source tree's; installed, neither.
TREE = paths.source_tree()
VM_RUN = TREE and os.path.join(TREE, "scripts", "vm-run")
BENCH_DOC = TREE and os.path.join(TREE, "Documentation", "results",
                                  "bench.md")
VERSION_FILE = paths.data("VERSION")
BENCH_FILE = os.path.join(SCENARIO_DIR, "bench.toml")

EPILOG = """examples:
  copa-eval list
  copa-eval show bufferbloat --set sweep.buffer_bdp=[1,4]
  copa-eval --vm run bufferbloat --variants cubic,bbr,copa:delta=0.2
  copa-eval run loss --repeats 3 --set duration_s=30      (root, netem)
  copa-eval report results/bufferbloat-1a2b3c4d
  copa-eval --vm bench                                     (make bench)
"""


def parser():
    p = argparse.ArgumentParser(
        prog="copa-eval", epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Run congestion-control variants over emulated links "
        "and write JSON, CSV, Markdown and PNG results.")
    p.add_argument("--version", action="version",
                   version=f"%(prog)s {version()}")
    p.add_argument("--vm", action="store_true",
                   help="run inside the project VM (scripts/vm-run)")
    p.add_argument("--vm-timeout", type=float, metavar="SEC",
                   help="stop the VM after SEC seconds (default: the "
                   "planned runs' durations plus overheads)")
    sub = p.add_subparsers(dest="command", required=True)
    sub.add_parser("list", help="list the shipped scenarios")
    for name, text in (("show", "validate a scenario and list its runs"),
                       ("run", "run a scenario (root, netem)")):
        sp = sub.add_parser(name, help=text)
        sp.add_argument("scenario", help="name (copa-eval list) or path")
        sp.add_argument("--variants", help="comma-separated, e.g. "
                        "cubic,bbr,copa,copa:delta=0.2")
        sp.add_argument("--repeats", type=int)
        sp.add_argument("--set", action="append", default=[],
                        metavar="PATH=VALUE", help="override a scenario "
                        "field (TOML value); repeatable")
        if name == "run":
            sp.add_argument("--out", help="results directory (default "
                            "results/<scenario>-<digest>-<revision>; "
                            "resumes)")
            sp.add_argument("--no-plots", action="store_true")
    sp = sub.add_parser("report", help="rebuild tables and plots of a "
                        "results directory")
    sp.add_argument("outdir")
    sp.add_argument("--no-plots", action="store_true")
    sp = sub.add_parser("bench", help="the fixed benchmark set (make bench)")
    sp.add_argument("--set-file", default=BENCH_FILE, metavar="TOML",
                    help="the set to run (default: the shipped bench.toml)")
    sp.add_argument("--out", help="results directory (default "
                    "results/bench-<digest>-<revision>; resumes)")
    sp.add_argument("--doc", default=BENCH_DOC or "",
                    help="copy the Markdown results here (default: "
                    "Documentation/results/bench.md of the source tree; "
                    "'' for none)")
    sp.add_argument("--no-plots", action="store_true")
    return p


def version(path=VERSION_FILE):
    """The project's version: the one line of VERSION."""
    try:
        with open(path) as f:
            return f.read().strip()
    except OSError as exc:
        return f"unknown ({exc.strerror}: {path})"


def split_list(text):
    return [item.strip() for item in text.split(",") if item.strip()]


def load_scenario(args):
    variants = split_list(args.variants) if args.variants else None
    return scenarios.load(args.scenario, args.set, variants=variants,
                          repeats=args.repeats)


def cmd_list(args):
    for name, description in scenarios.available():
        print(f"{name:14} {description}")


def cmd_show(args):
    scenario = load_scenario(args)
    print(f"{scenario.name}: {scenario.description}")
    print(f"kind {scenario.kind}, {len(scenario.cases)} case(s) x "
          f"{len(scenario.variants)} variant(s) x {scenario.repeats} "
          f"repeat(s) of {scenario.duration_s} s"
          + (f" (figures from {scenario.measure_from_s:g} s on)"
             if scenario.measure_from_s else "") + "; results in "
          f"{os.path.relpath(runner.default_outdir(scenario))}")
    seeds = sorted({c.meta["seed"] for c in scenario.cases
                    if "seed" in c.meta})
    if seeds:
        print(f"links drawn with seed {', '.join(map(str, seeds))}")
    for case in scenario.cases:
        link = lab.Link(**case.link)
        capped = " (capped)" if case.meta.get("capped") else ""
        group = f" [{case.meta['group']}]" if case.meta.get("group") else ""
        policer = f", policer {link.policer_mbit} Mbit/s burst " \
            f"{link.policer_burst} B" if link.policer_mbit else ""
        print(f"  {case.id}{group}: {link.rate_mbit} Mbit/s{capped}, "
              f"{link.rtt_ms} ms, FIFO {link.buffer_bytes} B, loss "
              f"{link.loss_pct}%{policer}, "
              "flows " + ", ".join(f"{t.count}x{t.cc}" for t in case.flows))
    for spec in runner.plan(scenario):
        print(f"  run {spec.id}")


def plots_wanted(args):
    """Whether to draw PNGs: not with --no-plots, nor without matplotlib."""
    if args.no_plots:
        return False
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        print("copa-eval: matplotlib is missing (apt install "
              "python3-matplotlib; in a source tree, scripts/deps): no "
              "plots", file=sys.stderr)
        return False
    return True


def require_lab():
    if os.geteuid() != 0:
        raise SystemExit("copa-eval: running experiments needs root and "
                         "netem; use --vm to run inside the project VM")


def cmd_run(args):
    scenario = load_scenario(args)
    outdir = args.out or runner.default_outdir(scenario)
    require_lab()
    runner.prepare(scenario, outdir, command_line())
    total = len(runner.plan(scenario))
    plot = plots_wanted(args)
    runner.execute(scenario, outdir, runner.Progress(total), plot=plot)
    report.write_reports(outdir, plot=plot)
    print(open(os.path.join(outdir, "summary.md")).read())
    print(f"results: {outdir}")


def cmd_report(args):
    report.write_reports(args.outdir, plot=plots_wanted(args))
    print(open(os.path.join(args.outdir, "summary.md")).read())


BENCH_ENTRY_FIELDS = ("scenario", "set", "variants", "repeats")


def bench_plan(path=BENCH_FILE):
    """The Scenarios of the benchmark set in bench.toml: each [[runs]]
    entry names a scenario and may give ``set`` (overrides), ``variants``
    and ``repeats`` (runs of each case x variant, 1-100); ScenarioError
    naming the entry and field otherwise."""
    try:
        with open(path, "rb") as f:
            spec = tomllib.load(f)
    except tomllib.TOMLDecodeError as exc:
        raise ScenarioError(f"{path}: not valid TOML: {exc}") from None
    default_variants = spec.get("variants")
    entries = spec.get("runs", [])
    if not isinstance(entries, list) or not entries:
        raise ScenarioError(f"{path}: expected [[runs]] entries")
    out = []
    for i, entry in enumerate(entries):
        where = f"{path}: runs.{i}"
        if not isinstance(entry, dict):
            raise ScenarioError(f"{where}: expected a table")
        extra = sorted(set(entry) - set(BENCH_ENTRY_FIELDS))
        if extra:
            raise ScenarioError(f"{where}.{extra[0]}: unknown field "
                                f"(allowed: {', '.join(BENCH_ENTRY_FIELDS)})")
        if not isinstance(entry.get("scenario"), str):
            raise ScenarioError(f"{where}.scenario: expected a scenario name"
                                f", got {entry.get('scenario')!r}")
        overrides = entry.get("set", [])
        if not isinstance(overrides, list) or any(
                not isinstance(o, str) for o in overrides):
            raise ScenarioError(f"{where}.set: expected a list of "
                                f"\"PATH=VALUE\" strings, got {overrides!r}")
        repeats = entry.get("repeats")
        if repeats is not None and (
                isinstance(repeats, bool) or not isinstance(repeats, int)
                or not 1 <= repeats <= 100):
            raise ScenarioError(f"{where}.repeats: expected an integer "
                                f"from 1 to 100, got {repeats!r}")
        try:
            scenario = scenarios.load(
                entry["scenario"], overrides,
                variants=entry.get("variants", default_variants),
                repeats=repeats)
        except (ScenarioError, VariantError) as exc:
            raise ScenarioError(f"{where}: {exc}") from None
        if any(s.name == scenario.name for s in out):
            raise ScenarioError(f"{where}: scenario {scenario.name!r} is "
                                f"already in the set; give this entry its "
                                f"own results name with set = "
                                f"[\"name=...\"]")
        out.append(scenario)
    return out


def bench_outdir(plan):
    digests = "-".join(runner.digest(s) for s in plan)
    return os.path.join(runner.results_dir(), "bench-" + hashlib.sha1(
        digests.encode()).hexdigest()[:8] + "-" + runner.revision_tag())


def cmd_bench(args):
    plan = bench_plan(args.set_file)
    outdir = args.out or bench_outdir(plan)
    require_lab()
    total = sum(len(runner.plan(s)) for s in plan)
    progress = runner.Progress(total)
    plot = plots_wanted(args)
    t0, revision = time.monotonic(), runner.git_revision()
    sections, summary, spreads, goals, records = [], [], [], [], []
    for scenario in plan:
        sub = os.path.join(outdir, scenario.name)
        runner.prepare(scenario, sub, command_line())
        runner.execute(scenario, sub, progress, plot=plot)
        recs, rows, agg = report.write_reports(sub, plot=plot)
        ratios = report.headline_ratios(agg)
        records += recs
        sections.append(bench_section(scenario, agg, ratios, rows, recs))
        summary += [{"scenario": scenario.name, **r} for r in ratios]
        spreads += [{"scenario": scenario.name, **r}
                    for r in report.spread_rows(agg)]
        goals += [{"scenario": scenario.name, **r} for r in
                  report.policer_goal_summary(
                      report.policer_goals(ratios, recs))]
        print(sections[-1], flush=True)
    head = bench_head(revision,
                      runs_span_s(records) or time.monotonic() - t0,
                      args.set_file)
    files.write_atomic(os.path.join(outdir, "bench.md"),
                       bench_markdown(head, sections))
    files.write_atomic(os.path.join(outdir, "summary.md"),
                       summary_markdown(head, summary, spreads, goals))
    publish(outdir, args.doc)
    print(f"results: {outdir}")


def bench_section(scenario, agg, ratios, rows=(), records=()):
    extra = report.random_links_sections(records, ratios, "#### ")
    ratios = report.ratio_table(ratios)
    lines = [f"### {scenario.name}", "", scenario.description, ""]
    if scenario.repeats > 1 or scenario.measure_from_s:
        lines += [", ".join(filter(None, [
            f"{scenario.repeats} runs of each case and variant: figures "
            f"are medians, min-max spans the runs" if scenario.repeats > 1
            else "", f"figures leave out the first "
            f"{scenario.measure_from_s:g} s of each run"
            if scenario.measure_from_s else ""])) + ".", ""]
    lines += [report.markdown_table(agg, ("case", "variant")), "",
              "Headline figures as ratios against cubic and bbr in the same "
              "case:" if ratios else "", "", ratios, ""]
    houses = report.household_table(report.household_rows(rows, agg))
    if houses:
        lines += ["Per household:", "", report.HOUSEHOLD_INTRO, "", houses,
                  ""]
    return "\n".join(lines + extra)


def runs_span_s(records):
    """Seconds from the first run's start to the last run's end (a resumed
    bench spans its earlier sessions); None without runs."""
    spans = []
    for rec in records:
        start = datetime.datetime.fromisoformat(rec["started"])
        spans.append((start, start + datetime.timedelta(
            seconds=rec.get("wall_s", 0))))
    if not spans:
        return None
    return (max(e for _, e in spans) - min(s for s, _ in spans)) \
        .total_seconds()


def bench_head(revision, seconds, set_file=BENCH_FILE):
    """The line naming the command, date, kernel, the revision measured
    (taken when the run started), the duration and the set."""
    command = "`make bench` (`copa-eval --vm bench`)" \
        if os.path.abspath(set_file) == BENCH_FILE else \
        f"`copa-eval --vm bench --set-file {set_file}`"
    return (f"Command: {command}, "
            f"{datetime.date.today().isoformat()}, kernel "
            f"{os.uname().release}, git {revision}, "
            f"{seconds / 60:.0f} min. Scenario files: "
            f"{tree_relative(SCENARIO_DIR)}/; the set: "
            f"{tree_relative(os.path.abspath(set_file))}.")


def tree_relative(path):
    """@path relative to the source tree, if it is in one."""
    if TREE and not os.path.relpath(path, TREE).startswith(os.pardir):
        return os.path.relpath(path, TREE)
    return path


def bench_markdown(head, sections):
    lines = [
        "<!-- Generated by copa-eval bench; do not edit. -->",
        "# Benchmark results", "", head, "",
        "Utilisation is goodput over the configured capacity (0.956 is the "
        "ceiling with 1514-byte frames); qdelay is srtt minus the "
        "configured base RTT; backlog qdelay is the bottleneck FIFO's "
        "backlog over its rate (all flows of the link); retrans is bytes "
        "retransmitted per byte acknowledged; share is throughput over the "
        "equal share. Entries run more than once show medians and the "
        "min-max over the runs (utilisation range in percentage points).",
        ""]
    return "\n".join(lines + sections) + "\n"


def summary_markdown(head, rows, spreads=(), goals=()):
    """Every headline ratio of the run in one table (the README's
    headline table is taken from it by hand), the
    spread over repeats of the entries run more than once and, over each
    entry's policed links, the policer goals
    (report.policer_goal_summary())."""
    lines = [
        head, "",
        "Each Copa variant's throughput, mean and p95 queueing delay and "
        "retransmission overhead divided by cubic's and bbr's in the same "
        "case (below 1 is less; with repeats, of the medians):", "",
        report.ratio_table(rows)]
    if spreads:
        lines += ["", "Spread over repeats: the median of the runs and "
                  "their min-max (in brackets, max - min; utilisation in "
                  "percentage points):", "", report.ratio_table(spreads)]
    if goals:
        lines += ["", f"Policer goals ({report.goal_bounds()}), over each "
                  f"entry's policed links: the median and min-max of each "
                  f"ratio and how many links meet its goal:", "",
                  report.table_of(goals, report.GOAL_DIGITS)]
    return "\n".join(lines) + "\n"


def publish(outdir, doc):
    """Copy bench.md to @doc ('' for nowhere). The README is not
    touched: its headline table is updated by hand from summary.md."""
    if not doc:
        return
    os.makedirs(os.path.dirname(os.path.abspath(doc)), exist_ok=True)
    with open(os.path.join(outdir, "bench.md")) as f:
        files.write_atomic(doc, f.read())
    print(f"wrote {doc}")


def command_line():
    return "copa-eval " + " ".join(shlex.quote(a) for a in sys.argv[1:])


def strip_vm_options(argv):
    """@argv without --vm and --vm-timeout (with its value)."""
    out, skip = [], False
    for arg in argv:
        if skip:
            skip = False
        elif arg == "--vm" or arg.startswith("--vm-timeout="):
            continue
        elif arg == "--vm-timeout":
            skip = True
        else:
            out.append(arg)
    return out


def run_in_vm(args, argv):
    """Re-run this command in the VM with the results directory writable
    there; validation happens here first, so errors do not cost a boot."""
    if args.command == "run":
        outdir = args.out or runner.default_outdir(load_scenario(args))
    elif args.command == "bench":
        outdir = args.out or bench_outdir(bench_plan(args.set_file))
    else:
        raise SystemExit(f"copa-eval: --vm is for run and bench, not "
                         f"{args.command}")
    if not VM_RUN:
        raise SystemExit("copa-eval: --vm runs the project VM of a source "
                         "tree (scripts/vm-run); this copa-eval is installed")
    with open(VM_RUN) as f:
        if "--rwdir" not in f.read():
            raise SystemExit("copa-eval: scripts/vm-run has no --rwdir "
                             "option, which --vm needs to write results on "
                             "the host; run copa-eval inside "
                             "scripts/vm-run with --out under /tmp instead")
    outdir = os.path.abspath(outdir)
    os.makedirs(outdir, exist_ok=True)
    prime_font_cache()
    inner = strip_vm_options(argv)
    if "--out" not in inner:
        inner += ["--out", outdir]
    if args.command == "bench":
        inner += ["--doc", ""]
    timeout = args.vm_timeout or vm_timeout_s(
        [load_scenario(args)] if args.command == "run" else
        bench_plan(args.set_file))
    cmd = [VM_RUN, "--timeout", str(int(timeout)), "--rwdir", outdir, "--",
           *GUEST_COPA_EVAL] + inner
    rc = run_vm_command(cmd)
    if rc == 0 and args.command == "bench":
        publish(outdir, args.doc)
    return rc


# The guest runs this copa-eval: the same Python (the venv's, which the
# guest sees through the host's root) and package.
GUEST_COPA_EVAL = (sys.executable, "-m", "copa_tools.eval")
VM_BOOT_S = 600          # boot, module install and slack under TCG
VM_RUN_OVERHEAD_S = 60   # per run: namespaces, links, reports


def vm_timeout_s(plan):
    """A bound for a --vm run of the scenarios in @plan: each planned run's
    duration plus its overhead, plus the boot; --vm-timeout overrides."""
    total = VM_BOOT_S
    for scenario in plan:
        total += len(runner.plan(scenario)) * (scenario.duration_s
                                               + VM_RUN_OVERHEAD_S)
    return total


def session_pids(sid):
    """Every process of session @sid (vm-run started it): timeout(1)
    moves qemu into a process group of its own, but not out of the
    session."""
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        # pid (comm) state ppid pgrp session ...; comm may hold spaces
        fields = stat[stat.rindex(")") + 2:].split()
        if int(fields[3]) == sid and fields[0] != "Z":  # zombies are done
            pids.append(int(entry))
    return pids


def stop_session(sid, grace_s=20.0):
    """SIGTERM every process of session @sid (qemu shuts down, vm-run
    removes its run directory), then SIGKILL what is left after @grace_s
    seconds. Returns the pids that needed SIGKILL."""
    for pid in session_pids(sid):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while session_pids(sid) and time.monotonic() < deadline:
        time.sleep(0.1)
    left = session_pids(sid)
    for pid in left:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    return left


def run_vm_command(cmd):
    """Run vm-run in a session of its own and return its exit status. On
    SIGINT or SIGTERM stop the whole session, so that no qemu outlives
    us, and exit 130 or 143."""
    proc = subprocess.Popen(cmd, start_new_session=True)
    got = []

    def interrupted(signum, _frame):
        got.append(signum)
        raise KeyboardInterrupt
    old = {s: signal.signal(s, interrupted)
           for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        return proc.wait()
    except KeyboardInterrupt:
        signum = got[0] if got else signal.SIGINT
        print(f"copa-eval: {signal.Signals(signum).name}: stopping the VM",
              file=sys.stderr, flush=True)
        stop_session(proc.pid)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=5)
        raise SystemExit(128 + signum) from None
    finally:
        for s, handler in old.items():
            signal.signal(s, handler)


def prime_font_cache():
    """Build matplotlib's font cache on the host, where it takes a second:
    the guest sees the host's /tmp (MPLCONFIGDIR, see main()) and would
    otherwise rebuild it on every boot, slowly."""
    try:
        import matplotlib.font_manager  # noqa: F401
    except ImportError:
        pass


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    # The VM's home directory is read-only: give matplotlib a writable
    # cache, private to the user (a fixed name in /tmp could be anyone's).
    if not os.environ.get("MPLCONFIGDIR"):
        os.environ["MPLCONFIGDIR"] = files.private_dir("copa-eval-matplotlib")
    args = parser().parse_args(argv)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    try:
        if args.vm:
            return run_in_vm(args, argv)
        handlers = {"list": cmd_list, "show": cmd_show, "run": cmd_run,
                    "report": cmd_report, "bench": cmd_bench}
        handlers[args.command](args)
    except (ScenarioError, VariantError, lab.LinkError, lab.LabError,
            RuntimeError) as exc:  # files.CorruptFileError included
        print(f"copa-eval: {exc}", file=sys.stderr)
        return 2
    except (FileNotFoundError, json.JSONDecodeError) as exc:
        print(f"copa-eval: {exc}", file=sys.stderr)
        return 2
    return 0
