#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Unprivileged users: copa is restricted (no TCP_CONG_NON_RESTRICTED), so
a process without CAP_NET_ADMIN gets EPERM from setsockopt(TCP_CONGESTION)
until root lists copa in net.ipv4.tcp_allowed_congestion_control, and it
cannot make the kernel load the module."""

import json

from ksft import (SETCC, cmd, ksft_eq, ksft_pr, ksft_exit, ksft_run, ksft_true,
                  load_copa, module_loaded, sysctl_get, sysctl_saved,
                  unload_copa)

NOBODY = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
          "--inh-caps=-all", "--bounding-set=-all", "--no-new-privs"]
ALLOWED = "net.ipv4.tcp_allowed_congestion_control"


def fresh_modules():
    """Reload: being a default or allowed once leaves an algorithm marked
    non-restricted for as long as its module stays loaded."""
    unload_copa()
    load_copa()


def unprivileged_check(cc):
    """errno name (or "ok") of setsockopt(TCP_CONGESTION, cc) as nobody."""
    proc = cmd(NOBODY + [SETCC, "--check", cc], check=False)
    result = json.loads(proc.stdout)
    ksft_eq(proc.returncode, 0 if result["ok"] else 1)
    return "ok" if result["ok"] else result["errno"]


def unprivileged_process_has_no_capabilities():
    status = dict(line.split(":", 1) for line in
                  cmd(NOBODY + ["cat", "/proc/self/status"]).stdout.splitlines())
    ksft_eq(status["Uid"].split()[0], "65534")
    ksft_eq(int(status["CapEff"], 16), 0)
    ksft_eq(int(status["CapBnd"], 16), 0)


def allowed_list_admits_copa():
    fresh_modules()
    allowed = sysctl_get(ALLOWED).split()
    ksft_pr("allowed:", allowed)
    ksft_true("copa" not in allowed)
    ksft_eq(unprivileged_check("reno"), "ok", "reno is always allowed")
    ksft_eq(unprivileged_check("copa"), "EPERM")
    ksft_eq(unprivileged_check("copa_policer"), "EPERM")
    with sysctl_saved(ALLOWED) as old:
        cmd(["sysctl", "-w", f"{ALLOWED}={old} copa"])
        ksft_eq(unprivileged_check("copa"), "ok", "after root allowed copa")
        ksft_eq(unprivileged_check("copa_policer"), "EPERM",
                "copa_policer is still restricted")
    ksft_eq(unprivileged_check("copa"), "EPERM", "after the list was restored")


def unprivileged_cannot_autoload():
    unload_copa()
    try:
        ksft_eq(unprivileged_check("copa"), "ENOENT")
        ksft_true(not module_loaded("tcp_copa"), "nobody made the kernel load it")
    finally:
        load_copa()


ksft_run([unprivileged_process_has_no_capabilities, allowed_list_admits_copa,
          unprivileged_cannot_autoload])
ksft_exit()
