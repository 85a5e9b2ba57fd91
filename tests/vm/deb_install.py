#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""The Debian package copa-tools installed in the VM with dpkg -i, as an
operator would, beside the modules that tcp-copa-dkms's DKMS built.

Not a test_*.py: make check runs it in the deb stage, after make deb and
tests/deb-dkms, which installs tcp-copa-dkms with apt in a root of the VM
kernel's suite (DKMS builds there at native speed, not over 9p under
TCG) and copies the modules DKMS built to a directory that vm-run then
installs in the guest:

    make deb
    tests/deb-dkms deb /tmp/dkms
    COPA_MODULES_DIR=/tmp/dkms scripts/vm-run --no-load --timeout 900 -- \
        tests/run-vm --timeout 800 tests/vm/deb_install.py

The guest's /usr, /var and /etc are overlays, so dpkg writes there as on
a real machine and nothing reaches the host. Checks: modprobe loads
DKMS's tcp_copa (VERSION, the guest's vermagic) and copa is selected
through the sysctl for a new connection; copa-tools installs with dpkg
-i; the packaged copa-eval (/usr/bin, the entry point of the package
installed in /usr/lib/python3/dist-packages) runs and lists the
scenarios of the source tree (the venv's copa-eval); the packaged and
the venv's copa-diag list a copa socket with its mode; the packaged
copa-bpf (/usr/sbin) builds the BPF objects from the sources copa-tools
ships into /var/lib/copa-tools/bpf, registers bpf_copa, which a socket
then runs, and unregisters it; dpkg -P removes the tools and copa-bpf's
objects again.
"""

import contextlib
import json
import os
import sys
import time

from ksft import (VENV_BIN, KsftSkipEx, NetNS, bg, cmd, ksft_eq, ksft_pr,
                  ksft_exit, ksft_run, ksft_true, module_loaded, setcc,
                  sysctl_saved, sysctl_set, wait_for)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
VERSION = open(os.path.join(ROOT, "VERSION")).read().strip()
DEB = os.path.join(ROOT, "deb", f"copa-tools_{VERSION}_all.deb")
sys.path.insert(0, os.path.join(ROOT, "tools"))
from copa_tools import bpf  # noqa: E402

EVAL = "/usr/bin/copa-eval"
DIAG = "/usr/bin/copa-diag"
PACKAGE = "/usr/lib/python3/dist-packages/copa_tools"
COPA_BPF = "/usr/sbin/copa-bpf"
BPF_STATE = "/var/lib/copa-tools"
PORT = 5601


def modprobe_select_dpkg_eval_bpf_purge():
    if not os.path.exists(DEB):
        raise KsftSkipEx(f"no {DEB}: run make deb")
    with timed("modprobe"):
        cmd(["modprobe", "tcp_copa"])
    ksft_true(module_loaded("tcp_copa"))
    ksft_eq(cmd(["modinfo", "-F", "version", "tcp_copa"]).stdout.strip(),
            VERSION)
    # Only the initial namespace may make a restricted algorithm the
    # default (others get EPERM); a namespace created then inherits it.
    with sysctl_saved("net.ipv4.tcp_congestion_control"):
        sysctl_set("net.ipv4.tcp_congestion_control", "copa")
        flow = one_flow()
    ksft_eq(flow["cc"], "copa", "the default from the sysctl selects copa")

    skip_man_db_trigger()
    with timed("dpkg -i"):
        proc = cmd(["dpkg", "-i", DEB], timeout=600)
    ksft_pr("\n".join(proc.stdout.splitlines()[-6:]))
    ksft_eq(cmd([EVAL, "--version"]).stdout.strip(), f"copa-eval {VERSION}")
    ksft_true("usage: copa-eval" in cmd([EVAL, "--help"]).stdout,
              "the packaged copa-eval --help")
    for diag in (DIAG, os.path.join(VENV_BIN, "copa-diag")):
        seen = diag_sees_copa(diag)
        ksft_pr(f"{diag}: {seen}")
        ksft_true(seen, f"{diag} shows a copa socket with its mode")
    listed = cmd([EVAL, "list"]).stdout
    ksft_pr(f"{EVAL} list:\n{listed}")
    ksft_eq(listed, cmd([os.path.join(VENV_BIN, "copa-eval"), "list"]).stdout,
            "the packaged copa-eval lists the source tree's scenarios")

    with timed("copa-bpf build, register, a flow, unregister"):
        packaged_bpf_build()

    with timed("dpkg -P"):
        cmd(["dpkg", "-P", "copa-tools"], timeout=600)
    for path in (EVAL, DIAG, COPA_BPF, PACKAGE, BPF_STATE):
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


def diag_sees_copa(diag):
    """What the program ``diag`` (copa-diag) lists of a paced copa flow
    in a fresh namespace while it sends: its entries with cc copa and a
    mode."""
    def copa_entries():
        out = cmd([diag, "--json"], ns=ns).stdout
        return [e for e in map(json.loads, out.splitlines())
                if e["cc"] == "copa" and "mode" in e]

    with NetNS() as ns:
        with bg(["tests/setcc", "--sink", "--bind", "127.0.0.1", PORT],
                ns=ns) as sink:
            json.loads(sink.stdout.readline())  # {"listening": PORT}
            with bg(["tests/setcc", "--cc", "copa", "--time", 60, "--rate",
                     1000000, "127.0.0.1", PORT], ns=ns):
                return wait_for(copa_entries, timeout=20, step=0.5)


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


ksft_run([modprobe_select_dpkg_eval_bpf_purge])
ksft_exit()
