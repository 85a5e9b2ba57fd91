# SPDX-License-Identifier: GPL-2.0
"""Command line of scripts/copa-eval; see ``copa-eval --help``."""

import argparse
import datetime
import hashlib
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import time
import tomllib

from . import lab, report, runner, scenarios
from .scenarios import ROOT, ScenarioError
from .variants import VariantError

VM_RUN = os.path.join(ROOT, "scripts", "vm-run")
BENCH_FILE = os.path.join(ROOT, "scripts", "scenarios", "bench.toml")
BENCH_DOC = os.path.join(ROOT, "Documentation", "results", "bench.md")

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
    p.add_argument("--vm", action="store_true",
                   help="run inside the project VM (scripts/vm-run)")
    sub = p.add_subparsers(dest="command", required=True)
    sub.add_parser("list", help="list the shipped scenarios")
    for name, text in (("show", "validate a scenario and list its runs"),
                       ("run", "run a scenario (root, netem)")):
        sp = sub.add_parser(name, help=text)
        sp.add_argument("scenario", help="name in scripts/scenarios/ or path")
        sp.add_argument("--variants", help="comma-separated, e.g. "
                        "cubic,bbr,copa,copa:delta=0.2")
        sp.add_argument("--repeats", type=int)
        sp.add_argument("--set", action="append", default=[],
                        metavar="PATH=VALUE", help="override a scenario "
                        "field (TOML value); repeatable")
        if name == "run":
            sp.add_argument("--out", help="results directory (default "
                            "results/<scenario>-<digest>; resumes)")
            sp.add_argument("--no-plots", action="store_true")
    sp = sub.add_parser("report", help="rebuild tables and plots of a "
                        "results directory")
    sp.add_argument("outdir")
    sp.add_argument("--no-plots", action="store_true")
    sp = sub.add_parser("bench", help="the fixed benchmark set (make bench)")
    sp.add_argument("--out", help="results directory (default "
                    "results/bench-<digest>; resumes)")
    sp.add_argument("--doc", default=BENCH_DOC,
                    help=f"copy the Markdown results here (default "
                    f"{os.path.relpath(BENCH_DOC, ROOT)}; '' for none)")
    sp.add_argument("--no-plots", action="store_true")
    return p


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
          f"repeat(s) of {scenario.duration_s} s; results in "
          f"{os.path.relpath(runner.default_outdir(scenario))}")
    for case in scenario.cases:
        link = lab.Link(**case.link)
        capped = " (capped)" if case.meta.get("capped") else ""
        print(f"  {case.id}: {link.rate_mbit} Mbit/s{capped}, "
              f"{link.rtt_ms} ms, FIFO {link.buffer_bytes} B, loss "
              f"{link.loss_pct}%, flows "
              + ", ".join(f"{t.count}x{t.cc}" for t in case.flows))
    for spec in runner.plan(scenario):
        print(f"  run {spec.id}")


def plots_wanted(args):
    """Whether to draw PNGs: not with --no-plots, nor without matplotlib."""
    if args.no_plots:
        return False
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        print("copa-eval: matplotlib is missing (run scripts/deps): no "
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


def bench_plan():
    """[(scenario, title)] of the benchmark set in bench.toml."""
    with open(BENCH_FILE, "rb") as f:
        spec = tomllib.load(f)
    default_variants = spec.get("variants")
    out = []
    for i, entry in enumerate(spec.get("runs", [])):
        try:
            out.append(scenarios.load(
                entry["scenario"], entry.get("set", []),
                variants=entry.get("variants", default_variants)))
        except (KeyError, ScenarioError, VariantError) as exc:
            raise ScenarioError(f"{BENCH_FILE}: runs.{i}: {exc}") from None
    return out


def bench_outdir(plan):
    digests = "-".join(runner.digest(s) for s in plan)
    return os.path.join(ROOT, "results", "bench-" + hashlib.sha1(
        digests.encode()).hexdigest()[:8])


def cmd_bench(args):
    plan = bench_plan()
    outdir = args.out or bench_outdir(plan)
    require_lab()
    total = sum(len(runner.plan(s)) for s in plan)
    progress = runner.Progress(total)
    plot = plots_wanted(args)
    t0 = time.monotonic()
    sections = []
    for scenario in plan:
        sub = os.path.join(outdir, scenario.name)
        runner.prepare(scenario, sub, command_line())
        runner.execute(scenario, sub, progress, plot=plot)
        _, _, agg = report.write_reports(sub, plot=plot)
        sections.append(bench_section(scenario, agg))
        print(sections[-1], flush=True)
    text = bench_markdown(sections, time.monotonic() - t0)
    with open(os.path.join(outdir, "bench.md"), "w") as f:
        f.write(text)
    copy_doc(outdir, args.doc)
    print(f"results: {outdir}")


def bench_section(scenario, agg):
    ratios = report.ratio_table(report.headline_ratios(agg))
    return "\n".join([
        f"### {scenario.name}", "", scenario.description, "",
        report.markdown_table(agg, ("case", "variant")), "",
        "Headline figures as ratios against cubic and bbr in the same "
        "case:" if ratios else "", "", ratios, ""])


def bench_markdown(sections, seconds):
    head = [
        "<!-- Generated by scripts/copa-eval bench; do not edit. -->",
        "# Benchmark results", "",
        f"Command: `make bench` (`scripts/copa-eval --vm bench`), "
        f"{datetime.date.today().isoformat()}, kernel "
        f"{os.uname().release}, git {runner.git_revision()}, "
        f"{seconds / 60:.0f} min. Scenario files: scripts/scenarios/; the "
        f"set: scripts/scenarios/bench.toml.", "",
        "Utilisation is goodput over the configured capacity (0.956 is the "
        "ceiling with 1514-byte frames); qdelay is srtt minus the "
        "configured base RTT; retrans is bytes retransmitted per byte "
        "acknowledged; share is throughput over the equal share.", ""]
    return "\n".join(head + sections) + "\n"


def copy_doc(outdir, doc):
    if doc:
        os.makedirs(os.path.dirname(os.path.abspath(doc)), exist_ok=True)
        shutil.copyfile(os.path.join(outdir, "bench.md"), doc)
        print(f"wrote {doc}")


def command_line():
    return "scripts/copa-eval " + " ".join(shlex.quote(a)
                                           for a in sys.argv[1:])


def run_in_vm(args, argv):
    """Re-run this command in the VM with the results directory writable
    there; validation happens here first, so errors do not cost a boot."""
    if args.command == "run":
        outdir = args.out or runner.default_outdir(load_scenario(args))
    elif args.command == "bench":
        outdir = args.out or bench_outdir(bench_plan())
    else:
        raise SystemExit(f"copa-eval: --vm is for run and bench, not "
                         f"{args.command}")
    with open(VM_RUN) as f:
        if "--rwdir" not in f.read():
            raise SystemExit("copa-eval: scripts/vm-run has no --rwdir "
                             "option, which --vm needs to write results on "
                             "the host; run copa-eval inside "
                             "scripts/vm-run with --out under /tmp instead")
    outdir = os.path.abspath(outdir)
    os.makedirs(outdir, exist_ok=True)
    prime_font_cache()
    inner = [a for a in argv if a != "--vm"]
    if "--out" not in inner:
        inner += ["--out", outdir]
    if args.command == "bench":
        inner += ["--doc", ""]
    cmd = [VM_RUN, "--rwdir", outdir, "--", "scripts/copa-eval"] + inner
    rc = subprocess.call(cmd)
    if rc == 0 and args.command == "bench":
        copy_doc(outdir, args.doc)
    return rc


def prime_font_cache():
    """Build matplotlib's font cache on the host, where it takes a second:
    the guest sees the host's /tmp (MPLCONFIGDIR, see scripts/copa-eval)
    and would otherwise rebuild it on every boot, slowly."""
    try:
        import matplotlib.font_manager  # noqa: F401
    except ImportError:
        pass


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
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
            RuntimeError) as exc:
        print(f"copa-eval: {exc}", file=sys.stderr)
        return 2
    except (FileNotFoundError, json.JSONDecodeError) as exc:
        print(f"copa-eval: {exc}", file=sys.stderr)
        return 2
    return 0
