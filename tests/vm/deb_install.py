#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""The Debian packages tcp-copa-dkms and copa-tools, installed in the VM
with one dpkg -i, as an operator would.

Not a test_*.py: it takes minutes under TCG (DKMS compiles the modules in
the guest and depmod reads the whole module tree over 9p, twice), so
make check leaves it out and CI runs it on its own after make deb:

    make deb
    scripts/vm-run --timeout 1500 -- tests/run-vm --timeout 1400 tests/vm/deb_install.py

The guest's /usr, /var and /etc are overlays, so dpkg and DKMS write
there as on a real machine and nothing reaches the host. The modules that
vm-run installed are taken away first, so that modprobe can only find
the ones DKMS built. Checks: both packages install together (no file in
both; tcp-copa-dkms's postinst: dkms add, build, install), the modules
land in updates/dkms with VERSION as their version, modprobe tcp_copa
works, copa is selected through the sysctl for a new connection, the
packaged copa-eval (/usr/bin, the entry point of the package installed
in /usr/lib/python3/dist-packages) runs and lists the scenarios of the
source tree (the venv's copa-eval), the packaged copa-bpf (/usr/sbin) builds the BPF objects from the
sources copa-tools ships into /var/lib/copa-tools/bpf, registers
bpf_copa, which a socket then runs, and unregisters it, and dpkg -P of
both removes the modules, the tools and copa-bpf's objects again.
"""

import contextlib
import glob
import json
import os
import sys
import time

from ksft import (VENV_BIN, KsftSkipEx, NetNS, bg, cmd, ksft_eq, ksft_in,
                  ksft_pr, ksft_exit, ksft_run, ksft_true, module_loaded, setcc,
                  sysctl_saved, sysctl_set, unload_copa)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
VERSION = open(os.path.join(ROOT, "VERSION")).read().strip()
DEBS = [os.path.join(ROOT, "deb", f"{pkg}_{VERSION}_all.deb")
        for pkg in ("tcp-copa-dkms", "copa-tools")]
sys.path.insert(0, os.path.join(ROOT, "tools"))
from copa_tools import bpf  # noqa: E402

EVAL = "/usr/bin/copa-eval"
PACKAGE = "/usr/lib/python3/dist-packages/copa_tools"
COPA_BPF = "/usr/sbin/copa-bpf"
BPF_STATE = "/var/lib/copa-tools"
MODDIR = f"/lib/modules/{os.uname().release}"
PORT = 5601


def dpkg_install_modprobe_select_eval_bpf_purge():
    for deb in DEBS:
        if not os.path.exists(deb):
            raise KsftSkipEx(f"no {deb}: run make deb")
    if not os.path.exists(f"{MODDIR}/build/Makefile"):
        raise KsftSkipEx("no kernel headers for the guest's kernel")
    unload_copa()
    for ko in glob.glob(f"{MODDIR}/updates/copa/*.ko"):
        os.unlink(ko)

    skip_man_db_trigger()
    with timed("dpkg -i"):
        proc = cmd(["dpkg", "-i", *DEBS], timeout=900)
    ksft_pr("\n".join(proc.stdout.splitlines()[-12:]))
    status = cmd(["dkms", "status", "tcp-copa"]).stdout.strip()
    ksft_pr(f"dkms status: {status}")
    ksft_in(f"tcp-copa/{VERSION}", status)
    ksft_in("installed", status)
    for mod in ("tcp_copa", "tcp_copa_policer"):
        path = cmd(["modinfo", "-n", mod]).stdout.strip()
        ksft_in("/updates/dkms/", path, f"{mod} comes from DKMS")
        ksft_eq(cmd(["modinfo", "-F", "version", mod]).stdout.strip(),
                VERSION)

    with timed("modprobe"):
        cmd(["modprobe", "tcp_copa"])
    ksft_true(module_loaded("tcp_copa"))
    # Only the initial namespace may make a restricted algorithm the
    # default (others get EPERM); a namespace created then inherits it.
    with sysctl_saved("net.ipv4.tcp_congestion_control"):
        sysctl_set("net.ipv4.tcp_congestion_control", "copa")
        flow = one_flow()
    ksft_eq(flow["cc"], "copa", "the default from the sysctl selects copa")

    ksft_eq(cmd([EVAL, "--version"]).stdout.strip(), f"copa-eval {VERSION}")
    listed = cmd([EVAL, "list"]).stdout
    ksft_pr(f"{EVAL} list:\n{listed}")
    ksft_eq(listed, cmd([os.path.join(VENV_BIN, "copa-eval"), "list"]).stdout,
            "the packaged copa-eval lists the source tree's scenarios")

    with timed("copa-bpf build, register, a flow, unregister"):
        packaged_bpf_build()

    unload_copa()
    with timed("dpkg -P"):
        cmd(["dpkg", "-P", "tcp-copa-dkms", "copa-tools"], timeout=600)
    left = glob.glob(f"{MODDIR}/updates/dkms/tcp_copa*")
    ksft_eq(left, [], "dpkg -P removes the modules")
    for path in (EVAL, COPA_BPF, PACKAGE, BPF_STATE):
        ksft_true(not os.path.lexists(path), f"dpkg -P removes {path}")


@contextlib.contextmanager
def timed(step):
    """Print how long ``step`` took: CI's time goes here (kernels.rst)."""
    start = time.monotonic()
    yield
    ksft_pr(f"{step}: {time.monotonic() - start:.1f} s")


def skip_man_db_trigger():
    """Let dpkg skip man-db's trigger, as Debian's man-db allows.

    The trigger rebuilds the index of every manual page on the host's
    /usr over 9p: 546 s of the guest's dpkg -i under TCG, against
    seconds on a real machine, and it tests nothing of ours (make deb
    checks the man pages). Without /var/lib/man-db/auto-update the
    trigger returns at once; /var is the guest's overlay.
    """
    flag = "/var/lib/man-db/auto-update"
    if os.path.exists(flag):
        os.unlink(flag)


def one_flow(cc=None):
    """tcp_info of a 100 kB flow over loopback in a fresh namespace."""
    with NetNS() as ns:
        with bg(["tests/setcc", "--sink", "--bind", "127.0.0.1", PORT],
                ns=ns) as sink:
            json.loads(sink.stdout.readline())  # {"listening": PORT}
            (flow,) = setcc([*(["--cc", cc] if cc else []), "--bytes",
                             100000, "127.0.0.1", PORT], ns=ns)
    return flow


def packaged_bpf_build():
    """copa-bpf, as installed, builds, registers and unregisters."""
    why = bpf.unsupported_reason()
    if why:
        ksft_pr(f"copa-bpf not run: {why}")
        return
    ksft_pr(cmd([COPA_BPF, "build"], timeout=600).stdout.strip())
    ksft_true(os.path.exists(f"{BPF_STATE}/bpf/tcp_copa.bpf.o"),
              f"copa-bpf build writes {BPF_STATE}/bpf")
    cmd([COPA_BPF, "register"])
    try:
        ksft_eq(one_flow("bpf_copa")["cc"], "bpf_copa",
                "a socket runs the packaged bpf_copa")
    finally:
        cmd([COPA_BPF, "unregister"])
    ksft_true("bpf_copa" not in bpf.available(), "unregistered")


ksft_run([dpkg_install_modprobe_select_eval_bpf_purge])
ksft_exit()
