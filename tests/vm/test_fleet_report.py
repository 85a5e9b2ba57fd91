#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""copa-fleet's collector and report in the project VM (issue 34), with
the modules loaded: fleet_control.py's server namespace and four client
prefixes, each behind its own link:

  10.90.0.0/24  bloated cheap household: 2 Mbit/s, 40 ms, 2 BDP FIFO
  10.90.1.0/24  policed: 1.5 Mbit/s policer (20 KB burst) on a
                12 Mbit/s, 60 ms, 1 BDP link
  10.90.2.0/24  lossy: 6 Mbit/s, 60 ms, 0.5 BDP, 1% random loss
  10.90.3.0/24  clean fast: 8 Mbit/s, 20 ms, 0.7 BDP

The server draws each connection's congestion control: cubic, the host
default, for half of them, and copa, copa_policer and bbr for a sixth
each. The collector sweeps every 2 s for RUN_S; then the fetchers stop,
and the collector once their sockets are gone.

- every_cc_named: the records name all four; copa's and copa_policer's
  carry the namespace's delta (0.5) and a mode, cubic's and bbr's
  neither (the modules' inet_diag info, issue 34).
- every_close_once: each connection the server served in full after the
  collector's first sweep (the fetchers start before it: its Python
  starts in seconds under TCG) has exactly one final record.
- report_ranks_paths: ``copa-fleet report --baseline cubic`` reads each
  prefix under cubic and ranks them as the links say: the policed one
  first, signed policed (high loss at a low queueing delay); the
  bloated one signed bloated, with the highest queueing delay over its
  base RTT; the lossy one signed lossy (and policed too, should its
  tail drops take cubic past the policed rule's 3%); the clean one
  unsigned, last.
  fleet_control.py's 3 Mbit/s policer lost 2.9 to 3.3% under cubic, at
  the rule's 3%, and a 2 Mbit/s one 4.4 and 5.8% in this test's first
  runs; at 1.5 Mbit/s (a 7.5-packet window at 60 ms) 13.6%.
"""

import collections
import csv
import functools
import os
import signal
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import fleet_control as fc  # noqa: E402
from copa_tools.fleet import queries, schema  # noqa: E402
from ksft import (cmd, ksft_eq, ksft_ge, ksft_exit, ksft_pr,  # noqa: E402
                  ksft_run, ksft_true, load_copa, wait_for)

RUN_S = 150
CCS = ("cubic", "cubic", "cubic", "copa", "copa_policer", "bbr")
POLICED = (12, 60, 1, 0, 1.5)
LINKS = {"bloated": fc.BLOATED, "policed": POLICED, "lossy": fc.LOSSY,
         "clean": fc.CLEAN}
PREFIX = {name: f"10.90.{i}.0/24" for i, name in enumerate(LINKS)}
DELTA = 0.5                         # the namespace's net.ipv4.tcp_copa.delta


@functools.lru_cache(maxsize=None)
def fleet():
    """One run of the four links: (records, served connections, the
    report's paths table). Cached: every case reads the same run."""
    fc.need_chdb()
    with fc.Lab(tuple(LINKS.values()), "r", CCS) as lab:
        time.sleep(RUN_S)
        for p in lab.fetchers:
            lab.stop(p, signal.SIGKILL)
        ksft_true(wait_for(lambda: not cmd(
            ["ss", "-Htn", "state", "connected", "exclude", "time-wait",
             "sport", f"= :{fc.PORT}"], ns=lab.srv).stdout.strip(),
            timeout=30), "the server's sockets closed")
        time.sleep(3)                       # a sweep past the last close
        lab.stop(lab.collector)
        records = read_records(lab)
        with open(lab.served) as f:
            served = [line.split() for line in f]
        out = os.path.join(lab.state, "report")
        cmd([fc.COPA_FLEET, "report", "--state-dir", lab.state,
             "--baseline", "cubic", "--csv", out], timeout=300)
        with open(os.path.join(out, "paths.csv")) as f:
            paths = list(csv.DictReader(f))
    return records, served, paths


def read_records(lab):
    """The server's records (queries.read_records(): a column a record
    lacks is absent from its dict)."""
    return queries.read_records(queries.Chdb(),
                                os.path.join(lab.state, "records"),
                                f"local_port = {fc.PORT}")


def every_cc_named():
    """Each cc's records carry its name, Copa's its delta and mode."""
    records = fleet()[0]
    by_cc = {}
    for r in records:
        by_cc.setdefault(r["cc"], []).append(r)
    ksft_pr("records: " + ", ".join(f"{cc} {len(rs)}"
                                    for cc, rs in sorted(by_cc.items())))
    ksft_eq(sorted(set(by_cc) - {""}), sorted(set(CCS)), "ccs recorded")
    for cc, rs in sorted(by_cc.items()):
        copa = cc.startswith("copa")
        deltas = {r.get("copa_delta") for r in rs}
        modes = {r.get("copa_mode") for r in rs}
        ksft_eq(deltas, {DELTA} if copa else {None}, f"{cc} copa_delta")
        ksft_true(None not in modes if copa else modes == {None},
                  f"{cc} copa_mode {sorted(map(str, modes))}")


def every_close_once():
    """Each connection served in full once the collector ran has a final
    record, and no socket has two."""
    records, served = fleet()[:2]
    finals = [r for r in records if r["kind"] == schema.FINAL]
    by_peer = collections.Counter((r["peer_addr"], str(r["peer_port"]))
                                  for r in finals)
    # Record times are whole seconds: a connection that ended in the
    # second after the first sweep's began closed after that sweep.
    first = min(int(r["time"]) for r in records) + 1
    later = collections.Counter((addr, port) for addr, port, t in served
                                if float(t) >= first)
    ksft_pr(f"{len(served)} connections served, {sum(later.values())} of "
            f"them after the first sweep; {len(finals)} final records")
    ksft_ge(sum(later.values()), 4 * 8, "connections served")
    # A client may reuse a port once the server's end is in TIME_WAIT:
    # a peer address and port can name several connections in a run.
    ksft_eq(sorted(k for k, n in later.items() if by_peer[k] < n), [],
            "served connections without a final record")
    cookies = collections.Counter(r["cookie"] for r in finals)
    ksft_eq([c for c, n in cookies.items() if n > 1], [],
            "sockets with two final records")


def report_ranks_paths():
    """The report signs and ranks the prefixes as their links say."""
    paths = fleet()[2]
    for row in paths:
        ksft_pr(f"{row['peer_prefix']} ({row['cc']}, {row['connections']} "
                f"connections): qdelay {row['qdelay_ms']} ms = "
                f"{row['qdelay_ratio']} x base, retrans {row['retrans']}, "
                f"path {row['path'] or '-'}")
    rank = {row["peer_prefix"]: i for i, row in enumerate(paths)}
    row = {name: paths[rank[p]] for name, p in PREFIX.items()}
    ksft_eq(row["policed"]["path"].split("+")[0], "policed", "policed")
    ksft_eq(row["bloated"]["path"], "bloated", "bloated")
    ksft_true("lossy" in row["lossy"]["path"].split("+"), "lossy")
    ksft_eq(row["clean"]["path"], "", "clean unsigned")
    ksft_eq(max(paths, key=lambda r: float(r["qdelay_ratio"] or 0)),
            row["bloated"], "bloated has the most queueing delay")
    ksft_eq(rank[PREFIX["policed"]], 0, "policed ranked first")
    ksft_eq(rank[PREFIX["clean"]], len(paths) - 1, "clean ranked last")


if __name__ == "__main__":
    fc.under_venv(__file__)
    load_copa()
    cmd(["modprobe", "-q", "tcp_bbr"], check=False)
    ksft_run([every_cc_named, every_close_once, report_ranks_paths])
    ksft_exit()
