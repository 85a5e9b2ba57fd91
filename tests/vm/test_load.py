#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Loading and unloading: registration, module references held by sockets
and by tcp_copa_policer, and auto-loading through the sysctl and setsockopt.
Leaves both modules loaded, as scripts/vm-run does."""

import json

from ksft import (NetNS, bg, cmd, errno_name, ksft_eq, ksft_in, ksft_pr,
                  ksft_exit, ksft_run, ksft_true, load_copa, modprobe, module_loaded,
                  module_refcnt, rmmod, setcc, sysctl_get, sysctl_saved,
                  unload, unload_copa, wait_for)

COPA, POLICER = "tcp_copa", "tcp_copa_policer"
PORT = 5401


def available():
    return sysctl_get("net.ipv4.tcp_available_congestion_control").split()


def copa_registered():
    load_copa()
    names = available()
    ksft_in("copa", names)
    ksft_in("copa_policer", names)


def rmmod_refused_while_socket_uses_copa():
    load_copa()
    unload(POLICER)
    base = module_refcnt(COPA)
    with NetNS() as ns, bg(["tests/setcc", "--sink", "--bind", "127.0.0.1", PORT], ns=ns) as sink:
        sink.stdout.readline()
        with bg(["tests/setcc", "--cc", "copa", "--bytes", 10000, "--hold", 120,
                 "127.0.0.1", PORT], ns=ns) as sender:
            flow = json.loads(sender.stdout.readline())
            ksft_eq(flow["cc"], "copa")
            ksft_eq(module_refcnt(COPA), base + 1, "one socket, one reference")
            ksft_eq(errno_name(rmmod(COPA)), "EAGAIN",
                    "delete_module() while a socket uses copa")
            out = cmd(["rmmod", COPA], check=False)
            ksft_pr("rmmod:", out.stderr.strip())
            ksft_true(out.returncode != 0 and "in use" in out.stderr)
            ksft_true(module_loaded(COPA))
    ksft_true(wait_for(lambda: module_refcnt(COPA) == base, timeout=30),
              "the closed socket released its reference")
    ksft_eq(rmmod(COPA), 0)
    modprobe(COPA)
    ksft_in("copa", available())
    load_copa()


def policer_depends_on_copa():
    unload_copa()
    modprobe(POLICER)
    ksft_true(module_loaded(COPA), "modprobe tcp_copa_policer loads tcp_copa")
    ksft_in("copa", available())
    ksft_in("copa_policer", available())
    ksft_eq(errno_name(rmmod(COPA)), "EAGAIN", "delete_module() while used")
    out = cmd(["rmmod", COPA], check=False)
    ksft_pr("rmmod:", out.stderr.strip())
    ksft_true(out.returncode != 0 and POLICER in out.stderr)
    ksft_true(module_loaded(COPA))
    unload_copa()
    load_copa()


def sysctl_autoloads(cc, modules):
    """Set the default in init_net: a restricted algorithm cannot be made
    the default of another namespace (EPERM), and on 6.1 to 7.x that
    refusal leaks a module reference (tcp_set_default_congestion_control)."""
    unload_copa()
    with sysctl_saved("net.ipv4.tcp_congestion_control"):
        cmd(["sysctl", "-w", f"net.ipv4.tcp_congestion_control={cc}"])
        ksft_eq(sysctl_get("net.ipv4.tcp_congestion_control"), cc)
        for mod in modules:
            ksft_true(module_loaded(mod), f"{mod} was auto-loaded")
        with NetNS() as ns:
            ksft_eq(sysctl_get("net.ipv4.tcp_congestion_control", ns), cc,
                    "a new namespace starts with init_net's default")
    # Unloading also clears the TCP_CONG_NON_RESTRICTED flag that being
    # the default set, so later tests find copa restricted again.
    unload_copa()
    load_copa()


def sysctl_autoloads_copa():
    sysctl_autoloads("copa", [COPA])


def sysctl_autoloads_copa_policer():
    sysctl_autoloads("copa_policer", [POLICER, COPA])


def setsockopt_autoloads_copa():
    unload_copa()
    ksft_eq(setcc(["--check", "copa"])[0]["ok"], True)
    ksft_true(module_loaded(COPA), "a privileged setsockopt loads tcp_copa")
    load_copa()


ksft_run([copa_registered, rmmod_refused_while_socket_uses_copa,
          policer_depends_on_copa, sysctl_autoloads_copa,
          sysctl_autoloads_copa_policer, setsockopt_autoloads_copa])
ksft_exit()
