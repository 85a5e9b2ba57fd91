#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Many sockets: 200 concurrent copa flows over a veth pair between two
namespaces while 2,000 short copa connections come and go; every
connection completes with copa, each holds one module reference while
open, all references go away, and the modules unload afterwards."""

import json
import time

from ksft import (SETCC, NetNS, bg, ksft_eq, ksft_ge, ksft_pr, ksft_exit, ksft_run,
                  ksft_true, load_copa, module_refcnt, setcc, unload_copa,
                  veth_pair, wait_for)

FLOWS = 200
FLOW_RATE = 5000          # bytes/s each: 8 Mbit/s for all 200
FLOW_MAX_S = 900          # the test stops the flows once the churn is done
CHURN_PROCS, CHURN_EACH, CHURN_BYTES = 4, 500, 2000
PORT = 5601
SERVER = "10.0.0.2"


def peak_extra_refs(proc, base, want, timeout=60):
    """Highest tcp_copa refcnt above base seen while proc runs, polling
    until it reaches want or timeout seconds pass."""
    peak, deadline = 0, time.monotonic() + timeout
    while proc.poll() is None and peak < want and time.monotonic() < deadline:
        peak = max(peak, module_refcnt("tcp_copa") - base)
        time.sleep(0.2)
    return peak


def check_connections(lines, count, what):
    ksft_eq(len(lines), count, f"{what}: one report per connection")
    failed = [line for line in lines if not line["ok"]]
    ksft_eq(failed[:3], [], f"{what}: failed connections")
    with_copa = sum(line["cc"] == "copa" for line in lines)
    ksft_eq(with_copa, count, f"{what}: connections that ran copa")
    unacked = [line for line in lines if line["bytes_acked"] < line["bytes_sent"]]
    ksft_eq(unacked[:3], [], f"{what}: connections with unacknowledged data")


def flows_and_churn():
    load_copa()
    base = module_refcnt("tcp_copa")
    with NetNS() as snd, NetNS() as rcv:
        veth_pair(snd, rcv)
        with bg([SETCC, "--sink", PORT], ns=rcv) as sink:
            sink.stdout.readline()
            start = time.monotonic()
            with bg([SETCC, "--cc", "copa", "--parallel", FLOWS, "--time", FLOW_MAX_S,
                     "--rate", FLOW_RATE, SERVER, PORT], ns=snd) as flows:
                peak = peak_extra_refs(flows, base, FLOWS)
                ksft_pr(f"{peak} copa sockets open at once after "
                        f"{time.monotonic() - start:.1f} s")
                ksft_ge(peak, FLOWS, "every flow holds a tcp_copa reference")
                churn = setcc(["--cc", "copa", "--parallel", CHURN_PROCS,
                               "--count", CHURN_EACH, "--bytes", CHURN_BYTES,
                               SERVER, PORT], ns=snd, check=False, timeout=600)
                ksft_pr(f"{len(churn)} short connections done after "
                        f"{time.monotonic() - start:.1f} s")
                ksft_eq(flows.poll(), None, "the flows outlived the churn")
                flows.terminate()
                out, _ = flows.communicate(timeout=120)
                ksft_eq(flows.returncode, 0, "every flow closed cleanly")
            sink.terminate()
            totals = json.loads(sink.communicate(timeout=30)[0].splitlines()[-1])
    long_flows = [json.loads(line) for line in out.splitlines()]
    check_connections(long_flows, FLOWS, "long flows")
    check_connections(churn, CHURN_PROCS * CHURN_EACH, "short connections")
    ksft_eq(totals["connections"], FLOWS + CHURN_PROCS * CHURN_EACH,
            "connections the sink accepted")
    ksft_eq(totals["bytes"], sum(c["bytes_sent"] for c in long_flows + churn),
            "bytes the sink received")
    ksft_true(wait_for(lambda: module_refcnt("tcp_copa") == base, timeout=30),
              "every socket released its tcp_copa reference")
    unload_copa()
    load_copa()


ksft_run([flows_and_churn])
ksft_exit()
