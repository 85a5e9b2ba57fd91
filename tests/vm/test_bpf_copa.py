#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""The BPF build (bpf_copa) in the VM's kernel, beside the module.

bpf/tcp_copa.bpf.o is built against the guest kernel's BTF (the
Makefile reads the cong_control signature and the tx-start hook from
it): on the host from the kernel image where vm-run --bpf did so
(make check and scripts/matrix do), else by the guest from
/sys/kernel/btf/vmlinux in a scratch copy of bpf/ and tcp_copa_algo.h
(the repository is read-only in the guest). The test registers it with
copa-bpf (bpftool struct_ops register), all through copa_tools.bpf as
copa-eval's lab does for a bpf_copa flow (deb_install builds it in the
guest, with the packaged copa-bpf), and then:

- bpf_and_module_alike: one bpf_copa flow and, in a second run, one flow
  of the module's copa on a 12 Mbit/s, 40 ms link with a 2 BDP FIFO.
  Both are observed through sock_diag under their own names; each uses
  at least MIN_UTIL of the link with a p95 queueing delay of at most
  MAX_QUEUE_SHARE of the FIFO's (a buffer-filler holds it near the
  whole FIFO), and the BPF build's goodput is within GOODPUT_TOL of the
  module's (one 20 s run each; the same algorithm source, so what
  differs is the glue and the run's noise; five runs each on 6.12 with
  copa-eval are in Documentation/bpf.rst).
- bpf_flow_table: copa-bpf flows lists the flow with its delta and
  updates.
- unregister: copa-bpf unregister takes both names off the list.

run-vm then checks dmesg for WARNING, BUG, Oops and refcount. The test
skips, with the reason, where the kernel cannot run a BPF congestion
control that paces (before 6.0, see Documentation/bpf.rst) or where the
guest lacks BTF, clang or bpftool. scripts/matrix runs it on every
kernel through tests/smoke.
"""

import json
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
sys.path[:0] = [os.path.join(ROOT, "tools"), os.path.join(ROOT, "tests")]

from copa_tools import bpf  # noqa: E402
from copa_tools.eval.lab import Flow, Link  # noqa: E402
from ksft import KsftSkipEx, ksft_eq, ksft_ge, ksft_pr, ksft_exit, \
    ksft_run  # noqa: E402
from test_copa_link import run_once, throughput  # noqa: E402

LINK = Link(rate_mbit=12, rtt_ms=40, buffer_bdp=2)
RUN_S = 20
MIN_UTIL = 0.75               # seen 0.885 to 0.93, module and BPF alike
MAX_QUEUE_SHARE = 0.25          # of the FIFO's delay, p95
GOODPUT_TOL = 0.10              # |bpf / module - 1|


def build_and_register():
    """Register both names, once, with the object vm-run --bpf built or
    one built here (copa_tools.bpf); skip where the BPF build cannot run."""
    why = bpf.unsupported_reason()
    if why:
        raise KsftSkipEx(why)
    obj = bpf.ensure_registered()
    if obj:
        ksft_pr(f"registered {obj} for {os.uname().release}")


def bpf_and_module_alike():
    """bpf_copa and the module's copa both keep the link busy with little
    queue, and move the same within GOODPUT_TOL."""
    build_and_register()
    fifo_ms = LINK.buffer_bytes * 8 / (LINK.rate_mbit * 1e3)
    runs = {}
    for cc in ("bpf_copa", "copa"):
        res = run_once(cc, LINK, [Flow(cc)], duration_s=RUN_S)
        fr = res.flows[0]
        ksft_eq(fr.cc_observed, cc, f"sock_diag names {cc}")
        ksft_ge(fr.utilisation or 0.0, MIN_UTIL, f"{cc} utilisation",
                ideal=1)
        ksft_ge(MAX_QUEUE_SHARE * fifo_ms, fr.qdelay_p95_ms,
                f"{cc} p95 queueing delay <= {MAX_QUEUE_SHARE} of the "
                f"FIFO's {fifo_ms:.0f} ms")
        runs[cc] = throughput(res)
    ratio = runs["bpf_copa"] / max(runs["copa"], 1e-9)
    ksft_pr(f"goodput bpf_copa / copa: {ratio:.3f}")
    ksft_ge(GOODPUT_TOL, abs(ratio - 1), "bpf_copa moves what copa moves")


def bpf_flow_table():
    """copa-bpf flows saw the bpf_copa flow, with the default delta."""
    build_and_register()
    flows = json.loads(bpf.copa_bpf("flows", "--json").stdout)
    ksft_pr(f"copa_flows: {flows}")
    seen = [f for f in flows if f["delta"] == 500 and f["updates"] > 0]
    ksft_ge(len(seen), 1, "a flow with delta 0.5 and updates in copa_flows")


def unregister():
    """Unregistering takes both names off the available list."""
    build_and_register()
    bpf.copa_bpf("unregister")
    left = [n for n in bpf.NAMES if n in bpf.available()]
    ksft_eq(left, [], "registered after unregister")


if __name__ == "__main__":
    ksft_run([bpf_and_module_alike, bpf_flow_table, unregister])
    ksft_exit()
