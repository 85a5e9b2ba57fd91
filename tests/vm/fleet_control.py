#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""copa-fleet control end to end (issue 35), in the project VM (root,
tcp_copa and tcp_copa_policer loaded, chDB in the venv).

A server namespace sends objects to clients in four /24 prefixes, each
behind its own link on a router (data direction: router -> client; the
base RTT is a netem delay on the client's ACKs):

  10.90.0.0/24  bloated cheap household: 2 Mbit/s, 40 ms, 2 BDP FIFO
  10.90.1.0/24  policed: 3 Mbit/s policer (clsact egress, 20 KB burst)
                on a 12 Mbit/s, 60 ms, 1 BDP link
  10.90.2.0/24  lossy: 6 Mbit/s, 60 ms, 0.5 BDP, 1% random loss
  10.90.3.0/24  clean fast: 8 Mbit/s, 20 ms, 0.7 BDP

together at most 19 Mbit/s, inside what TCG reproduces faithfully (about
24 Mbit/s). The controller calls a prefix policed or lossy only at a
queueing delay under a fifth of its base RTT, and the guest adds a few
ms of scheduling jitter to every RTT: so those two paths have 60 ms,
and the clean ones a FIFO well under the 1 x base RTT of queue that
makes a prefix bloated (the first run in the VM, with 1 BDP everywhere
and 30 to 40 ms, called the clean prefix bloated and neither the
policed nor the lossy one anything).

One fetcher per client loops over objects of 50 KB, 100 KB, 512 KB
(twice as often: Spotify's chunks), 1 MB and 5 MB, a connection each.
copa-fleet collect records the server's sockets every 2 s; copa-fleet
control runs in the server's namespace with the route backend (module
host: copa takes the namespace's delta, 0.5) on a clock 15 times the
defaults' speed: a round every 20 s, 3 minutes of lookback, 40 s of
hold, 8 connections a prefix, records at most 30 s old.

Not a test_*.py, so not in make check: its cases take about 18 minutes,
past run-vm's default timeout. Run it by hand (FLEET_CASES=NAME... runs
only those cases):
    scripts/vm-run --timeout 1600 -- tests/run-vm --timeout 1500 tests/vm/fleet_control.py

- converges: all-cubic for ALL_CUBIC_S, then the controller for
  CONTROL_ROUNDS rounds; no change in the last SETTLED_ROUNDS of them
  or in the AFTER_S that follow. The bloated, policed and lossy
  prefixes end on copa, copa_policer and copa; the clean one on the
  host default.
- better than cubic (the after phase against the all-cubic one, from the
  records): bloated srtt p90 at least a third lower at no more than 5%
  less median delivery rate; policed retransmission overhead at most
  cubic's; lossy median delivery rate higher; across the fleet,
  delivery rate p10 not lower and srtt p95 lower.
- clean: four clean links (2, 4, 6, 8 Mbit/s, 0.7 BDP): no change in
  CONTROL_ROUNDS rounds.
- faults: the collector killed (the store stops): after max-age, no
  change, each round audited as skipped; the controller killed with
  SIGKILL three times at random moments and restarted: the routes the
  server has are what the audit log's changes, resets and reconciles
  replay to, and the state file is whole.
"""

import contextlib
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
sys.path[:0] = [os.path.join(ROOT, "tools"), os.path.join(ROOT, "tests")]

from copa_tools.fleet import queries, store  # noqa: E402
from ksft import (VENV_BIN, KsftSkipEx, cmd, ksft_eq, ksft_ge,  # noqa: E402
                  ksft_exit, ksft_pr, ksft_run, ksft_true, load_copa)

COPA_FLEET = os.path.join(VENV_BIN, "copa-fleet")
PYTHON = os.path.join(VENV_BIN, "python3")
OBJECTS = "copa_tools.fleet.objects"      # the server and the fetchers
ROUND_S = 20
MAX_AGE_S = 30
STALE_ROUNDS = 10           # rounds to wait for two skipped as stale
CONTROL = ["--interval", str(ROUND_S), "--hours", "0.05", "--min-hold",
           "40", "--min-connections", "8", "--max-age", str(MAX_AGE_S),
           "--backend", "route", "--default-cc", "cubic"]
ALL_CUBIC_S = 120
CONTROL_ROUNDS = 10
SETTLED_ROUNDS = 4
AFTER_S = 120
SIZES = (50_000, 100_000, 512_000, 512_000, 1_000_000, 5_000_000)
PORT = 8080

# (rate Mbit/s, RTT ms, FIFO in BDP, loss %, policer Mbit/s)
BLOATED = (2, 40, 2, 0, None)
POLICED = (12, 60, 1, 0, 3)
LOSSY = (6, 60, 0.5, 1, None)
CLEAN = (8, 20, 0.7, 0, None)
FLEET = (BLOATED, POLICED, LOSSY, CLEAN)
CLEAN_FLEET = ((2, 20, 0.7, 0, None), (4, 20, 0.7, 0, None),
               (6, 20, 0.7, 0, None), (8, 20, 0.7, 0, None))

class Lab:
    """The server, router and client namespaces, the links, the object
    server and the fetchers, the collector; a controller on demand. The
    server draws each connection's cc from ``ccs`` (none: the host
    default) and writes "ADDR PORT TIME" of each one it served in full
    to ``served``, TIME (Unix seconds) as it finished sending. With a
    ``cgroup`` (v2 directory), the server runs in it, so that a sock_ops
    program attached there meets its sockets."""

    def __init__(self, links, tag, ccs=(), cgroup=None):
        self.tag = tag
        self.ccs = ccs
        self.cgroup = cgroup
        self.srv, self.rtr = f"cfc{tag}-srv", f"cfc{tag}-rtr"
        self.clients = [f"cfc{tag}-c{i}" for i in range(len(links))]
        self.links = links
        self.procs = []
        self.state = tempfile.mkdtemp(prefix="copa-fleet-control-")
        self.served = os.path.join(self.state, "served.txt")
        self.collector = self.controller = None
        self.fetchers = []

    def ip(self, ns, *args):
        cmd(["ip", "-n", ns, *args])

    def tc(self, ns, *args):
        cmd(["tc", "-n", ns, *args])

    def __enter__(self):
        try:
            return self.build()
        except BaseException:
            self.__exit__()
            raise

    def build(self):
        for ns in [self.srv, self.rtr] + self.clients:
            cmd(["ip", "netns", "add", ns])
            self.ip(ns, "link", "set", "lo", "up")
        cmd(["ip", "link", "add", "eth0", "netns", self.srv, "type", "veth",
             "peer", "name", "srv", "netns", self.rtr])
        self.ip(self.srv, "addr", "add", "10.89.0.2/24", "dev", "eth0")
        self.ip(self.srv, "link", "set", "eth0", "up")
        self.ip(self.srv, "route", "add", "default", "via", "10.89.0.1")
        self.ip(self.rtr, "addr", "add", "10.89.0.1/24", "dev", "srv")
        self.ip(self.rtr, "link", "set", "srv", "up")
        cmd(["sysctl", "-qw", "net.ipv4.ip_forward=1"], ns=self.rtr)
        cmd(["sysctl", "-qw", "net.ipv4.tcp_congestion_control=cubic"],
            ns=self.srv)
        for i, (ns, link) in enumerate(zip(self.clients, self.links)):
            self.link(i, ns, *link)
        for ns in [self.srv, self.rtr] + self.clients:
            for dev in ("eth0", "srv") + tuple(f"c{i}" for i in range(4)):
                cmd(["ethtool", "-K", dev, "tso", "off", "gso", "off",
                     "gro", "off"], ns=ns, check=False)
        server = [PYTHON, "-m", OBJECTS, "serve", str(PORT),
                  "--ccs", ",".join(self.ccs), "--served", self.served]
        if self.cgroup:
            server = ["sh", "-c", 'echo $$ > "$0/cgroup.procs" && exec "$@"',
                      self.cgroup, "ip", "netns", "exec", self.srv] + server
        self.start(server, None if self.cgroup else self.srv)
        time.sleep(1)
        self.fetchers = [self.start([PYTHON, "-m", OBJECTS, "fetch",
                                     "10.89.0.2", str(PORT), str(i),
                                     ",".join(map(str, SIZES)),
                                     "--timeout", "120"], ns)
                         for i, ns in enumerate(self.clients)]
        self.collector = self.start(
            [COPA_FLEET, "collect", "--netns", self.srv, "--interval", "2",
             "--state-dir", self.state, "--rotate-s", "60"])
        return self

    def link(self, i, ns, mbit, rtt_ms, bdp, loss, police):
        dev = f"c{i}"
        cmd(["ip", "link", "add", dev, "netns", self.rtr, "type", "veth",
             "peer", "name", "eth0", "netns", ns])
        self.ip(self.rtr, "addr", "add", f"10.90.{i}.1/24", "dev", dev)
        self.ip(self.rtr, "link", "set", dev, "up")
        self.ip(ns, "addr", "add", f"10.90.{i}.2/24", "dev", "eth0")
        self.ip(ns, "link", "set", "eth0", "up")
        self.ip(ns, "route", "add", "default", "via", f"10.90.{i}.1")
        fifo = max(int(bdp * mbit * 1e6 / 8 * rtt_ms / 1000), 3000)
        burst = max(int(mbit * 1e6 / 8 / 250), 3000)
        self.tc(self.rtr, "qdisc", "add", "dev", dev, "root", "handle", "10:",
                "tbf", "rate", f"{mbit}mbit", "burst", str(burst), "limit",
                str(fifo))
        if loss:
            # tbf's queue is a netem that only drops: fifo / 1500 packets.
            self.tc(self.rtr, "qdisc", "add", "dev", dev, "parent", "10:1",
                    "netem", "loss", f"{loss}%", "limit",
                    str(max(fifo // 1500, 2)))
        if police:
            self.tc(self.rtr, "qdisc", "add", "dev", dev, "clsact")
            self.tc(self.rtr, "filter", "add", "dev", dev, "egress",
                    "matchall", "action", "police", "rate", f"{police}mbit",
                    "burst", "20000", "drop")
        self.tc(ns, "qdisc", "add", "dev", "eth0", "root", "netem", "delay",
                f"{rtt_ms}ms", "limit", "100000")

    def start(self, args, ns=None):
        """Start ``args`` (in ``ns``), its stderr appended to the state
        directory's log.txt."""
        if ns:
            args = ["ip", "netns", "exec", ns] + args
        with open(os.path.join(self.state, "log.txt"), "a") as log:
            p = subprocess.Popen(args, stdout=subprocess.DEVNULL,
                                 stderr=log)
        self.procs.append(p)
        return p

    def control(self):
        self.controller = self.start(
            [COPA_FLEET, "control", "--state-dir", self.state] + CONTROL,
            self.srv)
        return self.controller

    def log_tail(self, lines=20):
        """The end of log.txt: the collector's and controller's stderr."""
        with open(os.path.join(self.state, "log.txt")) as f:
            return "".join(f.readlines()[-lines:])

    def stop(self, p, sig=signal.SIGTERM):
        if p.poll() is None:
            p.send_signal(sig)
        p.wait(timeout=60)

    def __exit__(self, *exc):
        for p in reversed(self.procs):
            if p.poll() is None:
                p.kill()
            p.wait()
        for ns in [self.srv, self.rtr] + self.clients:
            cmd(["ip", "netns", "del", ns], check=False)

    def audit(self):
        path = os.path.join(self.state, "control-audit.jsonl")
        if not os.path.exists(path):
            return []
        with open(path) as f:
            return [json.loads(line) for line in f]

    def routes(self):
        out = cmd(["ip", "-j", "route", "show", "proto", "252"],
                  ns=self.srv).stdout
        return {r["dst"]: r["metrics"][0]["congestion"]
                for r in json.loads(out or "[]")}

    @contextlib.contextmanager
    def snapshot(self):
        """(chDB engine, source) over a snapshot of the records so far."""
        with tempfile.TemporaryDirectory() as scratch:
            files = store.snapshot(os.path.join(self.state, "records"),
                                   scratch)
            yield queries.Chdb(), queries.file_source(files)

    def summary(self, keys, start, end):
        """queries.summary and retrans over the records of [start, end),
        {key tuple: row with retrans_overhead}."""
        with self.snapshot() as (engine, src):
            out = {tuple(r[k] for k in keys): r for r in engine.rows(
                queries.summary(src, keys, start, end))}
            for r in engine.rows(queries.retrans(src, keys, start, end)):
                out[tuple(r[k] for k in keys)]["retrans_overhead"] = \
                    float(r["retrans_overhead"])
        return out


def changes(audit, since=0):
    return [a for a in audit if a["event"] == "change"
            and iso_time(a["time"]) >= since]


def iso_time(text):
    return time.mktime(time.strptime(text, "%Y-%m-%dT%H:%M:%SZ")) - \
        time.timezone


def q(row, name, i):
    return float(row[name][i])


def need_chdb():
    try:
        import chdb  # noqa: F401
    except ImportError:
        raise KsftSkipEx(f"chDB is missing from {sys.executable}'s "
                         "packages (scripts/deps)")


def test_converges_and_beats_cubic():
    need_chdb()
    with Lab(FLEET, "a") as lab:
        t0 = time.time()
        time.sleep(ALL_CUBIC_S)
        t1 = time.time()
        lab.control()
        time.sleep(CONTROL_ROUNDS * ROUND_S)
        settled = time.time() - SETTLED_ROUNDS * ROUND_S
        t2 = time.time()
        time.sleep(AFTER_S)
        t3 = time.time()
        audit = lab.audit()
        for a in changes(audit):
            ksft_pr(f"{a['time']} {a['prefix']}: {a['current']} -> "
                    f"{a['target']} ({a['rule']}: {a['why']})")
        ksft_eq(changes(audit, settled), [], "changes after convergence")
        routes = lab.routes()
        ksft_pr(f"routes: {routes}")
        ksft_eq(routes, {"10.90.0.0/24": "copa", "10.90.1.0/24":
                         "copa_policer", "10.90.2.0/24": "copa"})
        before = lab.summary(("peer_prefix",), t0 + 60, t1)
        after = lab.summary(("peer_prefix",), t2, t3)
        for key in sorted(before):
            b, a = before[key], after.get(key)
            ksft_pr(f"{key[0]}: cubic rate p50 {q(b, 'rate_q', 0) / 1e6:.3g}"
                    f" p10 {q(b, 'rate_q', 1) / 1e6:.3g} Mbit/s, srtt p90 "
                    f"{q(b, 'srtt_q', 2) / 1e3:.3g} ms, retrans "
                    f"{b['retrans_overhead']:.4f}; after: "
                    + (f"{q(a, 'rate_q', 0) / 1e6:.3g}, "
                       f"{q(a, 'rate_q', 1) / 1e6:.3g}, "
                       f"{q(a, 'srtt_q', 2) / 1e3:.3g}, "
                       f"{a['retrans_overhead']:.4f}" if a else "none"))
        bl, ba = before[("10.90.0.0/24",)], after[("10.90.0.0/24",)]
        ksft_ge(q(bl, "srtt_q", 2) * 2 / 3, q(ba, "srtt_q", 2),
                "bloated: srtt p90 a third lower")
        ksft_ge(q(ba, "rate_q", 0), 0.95 * q(bl, "rate_q", 0),
                "bloated: at most 5% less median rate")
        pb, pa = before[("10.90.1.0/24",)], after[("10.90.1.0/24",)]
        ksft_ge(pb["retrans_overhead"], pa["retrans_overhead"],
                "policed: retransmission overhead at most cubic's")
        lb, la = before[("10.90.2.0/24",)], after[("10.90.2.0/24",)]
        ksft_ge(q(la, "rate_q", 0), q(lb, "rate_q", 0),
                "lossy: median rate higher")
        fb = lab.summary(("host",), t0 + 60, t1)
        fa = lab.summary(("host",), t2, t3)
        (fb,), (fa,) = fb.values(), fa.values()
        ksft_pr(f"fleet: rate p10 {q(fb, 'rate_q', 1) / 1e6:.3g} -> "
                f"{q(fa, 'rate_q', 1) / 1e6:.3g} Mbit/s, srtt p95 "
                f"{q(fb, 'srtt_q', 3) / 1e3:.3g} -> "
                f"{q(fa, 'srtt_q', 3) / 1e3:.3g} ms")
        ksft_ge(q(fa, "rate_q", 1), q(fb, "rate_q", 1),
                "fleet: delivery rate p10 not worse")
        ksft_ge(q(fb, "srtt_q", 3), q(fa, "srtt_q", 3) * 1.0001,
                "fleet: srtt p95 lower")


def test_clean_links_change_nothing():
    need_chdb()
    with Lab(CLEAN_FLEET, "b") as lab:
        time.sleep(ALL_CUBIC_S)
        lab.control()
        time.sleep(CONTROL_ROUNDS * ROUND_S)
        ksft_eq(changes(lab.audit()), [], "changes on clean links")
        ksft_eq(lab.routes(), {})


def replay(audit):
    """The routes the audit log says the controller left."""
    out = {}
    failed = set()
    for a in audit:
        if a["event"] == "failed":
            failed.add((a["prefix"], a["target"]))
    for a in audit:
        if a["event"] in ("change", "reset", "reconcile"):
            target = a.get("target") or a.get("to")
            if a["event"] == "change" and (a["prefix"], target) in failed:
                continue
            if target.startswith("default"):
                out.pop(a["prefix"], None)
            else:
                out[a["prefix"]] = target.split()[0]
    return out


def test_faults():
    need_chdb()
    rng = random.Random(35)
    with Lab(FLEET, "c") as lab:
        time.sleep(ALL_CUBIC_S // 2)
        lab.control()
        for _ in range(3):
            time.sleep(rng.uniform(ROUND_S, 3 * ROUND_S))
            lab.stop(lab.controller, signal.SIGKILL)
            lab.control()
        time.sleep(2 * ROUND_S)
        ksft_eq(lab.routes(), replay(lab.audit()),
                "routes as the audit log replays")
        with open(os.path.join(lab.state, "control-state.json")) as f:
            json.load(f)
        # The store stops: past max-age, every round is skipped and
        # nothing changes.
        lab.stop(lab.collector, signal.SIGKILL)
        stopped = time.time()

        def stale_skips(audit):
            return [a for a in audit if a["event"] == "skip" and
                    iso_time(a["time"]) >= stopped + MAX_AGE_S + ROUND_S]
        # A round under TCG takes seconds of chDB: wait for two skipped
        # rounds, up to STALE_ROUNDS rounds' time.
        for _ in range(STALE_ROUNDS):
            time.sleep(ROUND_S)
            if len(stale_skips(lab.audit())) >= 2:
                break
        audit = lab.audit()
        late = changes(audit, stopped + MAX_AGE_S + 2)
        ksft_eq(late, [], "changes on stale data")
        skips = stale_skips(audit)
        if len(skips) < 2:
            ksft_pr(f"audit: {audit[-8:]}\nlog.txt:\n{lab.log_tail()}")
        ksft_ge(len(skips), 2, "rounds skipped as stale")
        ksft_true(all("old" in a["reason"] for a in skips), str(skips))
        ksft_eq(lab.routes(), replay(audit), "routes as the audit replays")
        lab.stop(lab.controller)


def under_venv(path):
    """Run the test file ``path`` again under the venv's python3 unless
    this one has chDB: run-vm starts test files with the guest's python3,
    and chDB is in the venv (scripts/deps)."""
    try:
        import chdb  # noqa: F401
    except ImportError:
        if os.path.exists(PYTHON) and sys.executable != PYTHON:
            os.execv(PYTHON, [PYTHON, os.path.abspath(path)])


def main():
    under_venv(__file__)
    load_copa()
    cases = [test_converges_and_beats_cubic, test_clean_links_change_nothing,
             test_faults]
    only = os.environ.get("FLEET_CASES")
    ksft_run([c for c in cases if not only or c.__name__ in only.split()])
    ksft_exit()


if __name__ == "__main__":
    main()
