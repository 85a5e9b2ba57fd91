#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""The copa:copa_update tracepoint identifies its socket as tcp:tcp_probe
does, so that its events join with ss output.

- trace_joins_ss: two copa flows, one over IPv4 and one over IPv6, run
  while the tracepoint records; ss -e, asked while they are established,
  lists each with its addresses and its cookie (sk:HEX). For each flow the
  trace must hold events whose src and dest are the addresses ss prints,
  every one of them with the cookie ss reports (non-zero), and the two
  flows' cookies must differ."""

import contextlib
import re

from ksft import (NetNS, bg, cmd, copa_recorded, ksft_eq, ksft_ge,
                  ksft_ne, ksft_pr, ksft_exit, ksft_run, ksft_true, veth_pair,
                  wait_for)

FLOWS = {5601: ("10.0.0.2", "0.0.0.0"),      # port: (receiver, sink bind)
         5602: ("fd00::2", "::")}
SEND_S = 8                                     # s: long enough for ss to see both under a starved TCG guest
RATE = 200000                                 # bytes/s: light under TCG

# "0 0 10.0.0.1:41234 10.0.0.2:5601 ino:0 sk:1001 cgroup:/ <->"
SS_LINE = re.compile(r"^\s*\d+\s+\d+\s+(\S+)\s+(\S+)\s.*\bsk:([0-9a-f]+)\b")


def ss_copa_sockets(ns):
    """{dport: (local, peer, cookie)} of the established TCP sockets in ns,
    from ss -e, addresses as ss prints them."""
    out = cmd(["ss", "-Htne", "state", "established"], ns=ns).stdout
    socks = {}
    for line in out.splitlines():
        m = SS_LINE.match(line)
        if m:
            local, peer, cookie = m.groups()
            port = int(peer.rsplit(":", 1)[1])
            socks[port] = (local, peer, int(cookie, 16))
    return socks


def trace_joins_ss():
    seen = {}
    with NetNS() as snd, NetNS() as rcv, contextlib.ExitStack() as stack:
        veth_pair(snd, rcv)
        for ns, addr in ((snd, "fd00::1/64"), (rcv, "fd00::2/64")):
            cmd(["ip", "addr", "add", addr, "dev", "veth0", "nodad"], ns=ns)
        for port, (_, bind) in FLOWS.items():
            sink = stack.enter_context(
                bg(["tests/setcc", "--sink", "--bind", bind, port], ns=rcv))
            sink.stdout.readline()                  # {"listening":PORT}
        with copa_recorded() as events:
            senders = [stack.enter_context(
                bg(["tests/setcc", "--cc", "copa", "--time", SEND_S,
                    "--rate", RATE, host, port], ns=snd))
                for port, (host, _) in FLOWS.items()]

            def both_established():
                seen.update(ss_copa_sockets(snd))
                return all(p in seen for p in FLOWS)
            ksft_true(wait_for(both_established, 30),
                      "ss lists both flows while they run")
            for proc in senders:
                proc.wait(timeout=60)
                ksft_eq(proc.returncode, 0, "the flow completed")

    cookies = set()
    for port, (local, peer, cookie) in sorted(seen.items()):
        mine = [e for e in events if e["src"] == local and e["dest"] == peer]
        ksft_pr(f"ss: {local} -> {peer} sk:{cookie:x}; {len(mine)} events "
                f"with these addresses, cookies "
                f"{sorted({e['sock_cookie'] for e in mine})}")
        ksft_ge(len(mine), 1, f"events with src={local} dest={peer}")
        ksft_ne(cookie, 0, "ss reports a cookie")
        ksft_eq({e["sock_cookie"] for e in mine}, {cookie},
                "every event of the flow carries the cookie ss reports")
        ksft_eq(mine[0]["dport"], port, "dport is the port of dest")
        cookies.add(cookie)
    ksft_eq(len(cookies), len(FLOWS), "each flow has its own cookie")


ksft_run([trace_joins_ss])
ksft_exit()
