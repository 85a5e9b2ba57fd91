#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Module parameters and per-namespace sysctls of tcp_copa and
tcp_copa_policer: valid values read back in canonical form, invalid ones
fail with EINVAL and change nothing, namespaces are independent, a new
namespace starts from the module parameters, and a new socket takes its
namespace's values while an open one keeps the values it started with.
Blanks around a value are accepted, and a sysctl write at a non-zero file
position is ignored, as for the core tcp sysctls."""

import os

from ksft import (NetNS, bg, cmd, copa_traced, errno_name, in_netns,
                  ksft_eq, ksft_pr, ksft_exit, ksft_run, ksft_true, load_copa,
                  read_text, sysctl_get, sysctl_path, sysctl_set, veth_pair,
                  wait_for, write_errno, write_text)

# module -> parameter -> (valid writes with their read-back, invalid writes)
# Each write gets a trailing "\n", as echo and sysctl -w send it; an empty
# write is that "\n" alone. As for the core tcp sysctls, blanks may
# surround the one value, and neither a sign nor a second value is taken.
PARAMS = {
    "tcp_copa": {
        "delta": ([("1", "1"), ("0.5", "0.5"), ("0.04", "0.04"),
                   ("0.001", "0.001"), ("0.250", "0.25"), ("1.000", "1"),
                   (" 0.25 ", "0.25"), ("\t0.5\t", "0.5"),
                   ("\n0.04\n", "0.04")],
                  ["0", "0.000", "-0.5", "1.001", "2", "0.0625", "abc",
                   "0.5x", "1e-1", ".", "", "99999999999", "+0.5", "+1",
                   " ", "0.5 0.5", "0.5 x", "0 .5", "- 0.5"]),
        "competitive": ([("0", "0"), ("1", "1"), (" 0", "0"), ("1 ", "1")],
                        ["2", "-1", "abc", "", "0.5", "1x", "+1", "1 1",
                         "\t"]),
        "loss_reaction": ([("0", "0"), ("7", "7"), ("100", "100"),
                           ("\t7", "7"), ("  9  ", "9")],
                          ["101", "-1", "abc", "", "5.5", "4294967296",
                           "+7", "5 6", "7\tx", "-0"]),
    },
    "tcp_copa_policer": {
        "detect": ([("0", "0"), ("1", "1"), ("\t1\t", "1")],
                   ["2", "-1", "x", "", "+0", "0 1"]),
        "loss_thresh": ([("1", "1"), ("50", "50"), ("100", "100"),
                         (" 33", "33")],
                        ["0", "101", "-3", "x", "", "20.5", "+20", "20 20"]),
        "rate_tol": ([("1", "1"), ("12", "12"), ("100", "100"),
                      ("12 ", "12")],
                     ["0", "101", "-3", "x", "", "+12", "12 1"]),
        "hold_rounds": ([("1", "1"), ("100", "100"), ("255", "255"),
                         ("\t48 ", "48")],
                        ["0", "256", "-1", "x", "", "4294967296", "+48",
                         "48 48"]),
    },
}

# (module, parameter, first write, second write at the end of the first,
# value read back): as for the core tcp sysctls, a sysctl write at a
# non-zero file position is ignored and reports success.
OFFSET_WRITES = [
    ("tcp_copa", "delta", "0.1", "5", "0.1"),
    ("tcp_copa", "competitive", "1", "x", "1"),
    ("tcp_copa", "loss_reaction", "1", "0", "1"),
    ("tcp_copa_policer", "hold_rounds", "2", "5", "2"),
]


def param_path(module, name):
    return f"/sys/module/{module}/parameters/{name}"


def all_params():
    for module, params in PARAMS.items():
        for name, (valid, invalid) in params.items():
            yield module, name, valid, invalid


def check_writes(path, valid, invalid, ns=None):
    """Each valid write reads back canonically; each invalid one fails with
    EINVAL and leaves the last valid value in place. Restores the value."""
    def read():
        with in_netns(ns):
            return read_text(path)

    old = read()
    try:
        for text, shown in valid:
            ksft_eq(write_errno(path, text + "\n", ns), 0, f"{path} <- {text}")
            ksft_eq(read(), shown, f"{path} <- {text}")
        for text in invalid:
            ksft_eq(errno_name(write_errno(path, text + "\n", ns)), "EINVAL",
                    f"{path} <- {text!r}")
            ksft_eq(read(), shown, f"{path} unchanged after {text!r}")
    finally:
        ksft_eq(write_errno(path, old + "\n", ns), 0)
    ksft_pr(f"{path}: {len(valid)} valid, {len(invalid)} invalid writes")


def module_params():
    load_copa()
    for module, name, valid, invalid in all_params():
        check_writes(param_path(module, name), valid, invalid)


def sysctls_init_net():
    load_copa()
    for module, name, valid, invalid in all_params():
        check_writes(sysctl_path(f"net.ipv4.{module}.{name}"), valid, invalid)


def sysctls_in_netns():
    load_copa()
    with NetNS() as ns:
        for module, name, valid, invalid in all_params():
            check_writes(sysctl_path(f"net.ipv4.{module}.{name}"), valid,
                         invalid, ns)


def check_offset_writes(ns=None):
    """A second write(2) on the same open file, at the position the first
    one left, and a pwrite(2) at that offset on a new open file: both
    report success and change nothing. Restores the values."""
    for module, name, first, then, shown in OFFSET_WRITES:
        path = sysctl_path(f"net.ipv4.{module}.{name}")
        with in_netns(ns):
            old = read_text(path)
            try:
                fd = os.open(path, os.O_WRONLY)
                try:
                    ksft_eq(os.write(fd, first.encode()), len(first), path)
                    ksft_eq(os.write(fd, then.encode()), len(then),
                            f"{path} <- {then!r} at offset {len(first)}")
                finally:
                    os.close(fd)
                ksft_eq(read_text(path), shown, f"{path} after the write")
                fd = os.open(path, os.O_WRONLY)
                try:
                    ksft_eq(os.pwrite(fd, then.encode(), len(first)),
                            len(then), f"pwrite {path}")
                finally:
                    os.close(fd)
                ksft_eq(read_text(path), shown, f"{path} after pwrite")
            finally:
                write_text(path, old + "\n")
    ksft_pr(f"{len(OFFSET_WRITES)} sysctls ignore writes at an offset")


def sysctl_offset_writes_ignored():
    load_copa()
    check_offset_writes()
    with NetNS() as ns:
        check_offset_writes(ns)


def netns_independent():
    load_copa()
    init = sysctl_get("net.ipv4.tcp_copa.delta")
    with NetNS() as a, NetNS() as b:
        sysctl_set("net.ipv4.tcp_copa.delta", "0.04", a)
        sysctl_set("net.ipv4.tcp_copa.delta", "0.2", b)
        sysctl_set("net.ipv4.tcp_copa_policer.hold_rounds", "3", a)
        ksft_eq(sysctl_get("net.ipv4.tcp_copa.delta", a), "0.04")
        ksft_eq(sysctl_get("net.ipv4.tcp_copa.delta", b), "0.2")
        ksft_eq(sysctl_get("net.ipv4.tcp_copa_policer.hold_rounds", a), "3")
        ksft_eq(sysctl_get("net.ipv4.tcp_copa_policer.hold_rounds", b), "48")
        ksft_eq(sysctl_get("net.ipv4.tcp_copa.delta"), init, "init_net")


def new_netns_starts_from_module_params():
    load_copa()
    new = {("tcp_copa", "delta"): "0.125", ("tcp_copa", "competitive"): "0",
           ("tcp_copa", "loss_reaction"): "9",
           ("tcp_copa_policer", "detect"): "0",
           ("tcp_copa_policer", "loss_thresh"): "33",
           ("tcp_copa_policer", "rate_tol"): "7",
           ("tcp_copa_policer", "hold_rounds"): "200"}
    old = {key: read_text(param_path(*key)) for key in new}
    with NetNS() as before:
        try:
            for key, value in new.items():
                write_text(param_path(*key), value)
            with NetNS() as after:
                for (module, name), value in new.items():
                    sysctl = f"net.ipv4.{module}.{name}"
                    ksft_eq(sysctl_get(sysctl, after), value, f"{sysctl} in a new netns")
                    ksft_eq(sysctl_get(sysctl, before), old[(module, name)],
                            f"{sysctl} in an older netns")
        finally:
            for key, value in old.items():
                write_text(param_path(*key), value)


def copa_sysctls(ns, delta):
    """delta in ns, with competitive mode and loss reaction off so that
    the socket's delta stays the configured one."""
    sysctl_set("net.ipv4.tcp_copa.delta", delta, ns)
    sysctl_set("net.ipv4.tcp_copa.competitive", 0, ns)
    sysctl_set("net.ipv4.tcp_copa.loss_reaction", 0, ns)


def established(ns, port):
    """Is a connection to port established in ns (ss)?"""
    out = cmd(["ss", "-Htn", "state", "established", f"dport = :{port}"],
              ns=ns).stdout
    return bool(out.strip())


def sockets_snapshot_netns_values():
    """A socket runs with its namespace's delta as it was at connect:
    port 5501 starts at 0.04 and keeps it after the sysctl changes to
    0.25, port 5502 connects after the change and runs with 0.25."""
    load_copa()
    with NetNS() as snd, NetNS() as rcv:
        veth_pair(snd, rcv)
        copa_sysctls(snd, "0.04")
        with bg(["tests/setcc", "--sink", 5501], ns=rcv) as s1, \
                bg(["tests/setcc", "--sink", 5502], ns=rcv) as s2:
            s1.stdout.readline()
            s2.stdout.readline()
            with copa_traced() as events, \
                    bg(["tests/setcc", "--cc", "copa", "--time", 3,
                        "--rate", 200000, "10.0.0.2", 5501], ns=snd) as old:
                # copa_init runs as the connection is established: wait
                # for that event, not for a fixed time.
                ksft_true(wait_for(lambda: established(snd, 5501), 30),
                          "port 5501 connected before the sysctl change")
                sysctl_set("net.ipv4.tcp_copa.delta", "0.25", snd)
                cmd(["tests/setcc", "--cc", "copa", "--bytes", 300000,
                     "10.0.0.2", 5502], ns=snd)
                old.wait(timeout=60)
                ksft_eq(old.returncode, 0)
    deltas = {port: sorted({d for p, d, _ in events if p == port})
              for port in (5501, 5502)}
    ksft_pr("delta_milli seen per port:", deltas)
    ksft_eq(deltas[5501], [40], "the older socket keeps delta 0.04")
    ksft_eq(deltas[5502], [250], "the newer socket has delta 0.25")


ksft_run([module_params, sysctls_init_net, sysctls_in_netns,
          sysctl_offset_writes_ignored,
          netns_independent, new_netns_starts_from_module_params,
          sockets_snapshot_netns_values])
ksft_exit()
