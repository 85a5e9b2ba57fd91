#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""An unprivileged user cannot crash the kernel through copa (issue 32).

The owner of a user namespace holds CAP_NET_ADMIN over a network namespace
it creates, so any user may add a route there with any initcwnd and with
congctl naming any registered algorithm: the allowed list
(net.ipv4.tcp_allowed_congestion_control) does not apply to routes, and
the kernel clamps a route's initcwnd only to snd_cwnd_clamp (~0 by
default). Copa's window arithmetic once shifted the window left by
COPA_SHIFT in 32 bits, so a window that is a multiple of 2^24 packets
made a divisor zero: a divide error in copa_cong_control on the first
ACKs.

Root loads both modules first (a user cannot make the kernel load them).
Each case then forks a child that becomes nobody as test_perms' setpriv
does (no groups, no capabilities, an empty bounding set, no_new_privs;
checked in /proc/self/status) and enters a fresh user and network
namespace as unshare --user --map-root-user --net does. There it brings
lo up, replaces the local table's route for 127.0.0.1 by one with
initcwnd N and congctl CC, and opens one TCP connection over it that
carries BYTES each way. The case passes if the route took the metrics,
both ends of the connection ran CC (getsockopt TCP_CONGESTION), every
byte arrived, and the kernel logged nothing bad (what tests/run-vm
rejects, or a divide error) meanwhile. N is 2^24, 2^25 and 2^31 - 1 for
copa and for copa_policer.

The child is forked rather than started as a program: a Python process
takes seconds to start in a TCG guest. A case whose kernel log turns bad
kills the child and fails at once instead of waiting for its timeouts.
"""

import ctypes
# the child, nobody, may not be able to read the interpreter's library (a
# pyenv under /root) when socket wants the codec for a host name
import encodings.idna  # noqa: F401
import json
import os
import re
import select
import signal
import socket
import struct
import subprocess
import threading
import time
import traceback

from ksft import (KsftSkipEx, ksft_eq, ksft_in, ksft_pr, ksft_exit, ksft_run, ksft_true,
                  load_copa, read_text, sysctl_get)

NOBODY = 65534
ADDR = "127.0.0.1"
BYTES = 512 * 1024
SOCK_TIMEOUT = 20   # seconds, each socket operation in the child
CASE_TIMEOUT = 40   # seconds, the whole child
INITCWNDS = (1 << 24, 1 << 25, (1 << 31) - 1)
TCPI_SND_CWND = 80  # offset of tcpi_snd_cwnd in struct tcp_info
# What tests/run-vm rejects in the kernel log, to blame the case for it
BAD_LOG = re.compile(r"\b(WARNING|BUG|Oops|refcount)|\[#\d+\]|Call Trace|"
                     r"Kernel panic|divide error")
OOPS_LINES = 24     # of the kernel log printed from its first bad line

CLONE_NEWUSER = 0x10000000
CLONE_NEWNET = 0x40000000
PR_CAPBSET_DROP = 24
PR_SET_DUMPABLE = 4
PR_SET_NO_NEW_PRIVS = 38

_libc = ctypes.CDLL(None, use_errno=True)


def _check(ret, what):
    if ret:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


# ---- the child: nobody, then root of its own user and network namespace ----

def become_nobody():
    """What setpriv --reuid=65534 --regid=65534 --clear-groups
    --inh-caps=-all --bounding-set=-all --no-new-privs does."""
    for cap in range(int(read_text("/proc/sys/kernel/cap_last_cap")) + 1):
        _check(_libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0), "PR_CAPBSET_DROP")
    os.setgroups([])
    os.setresgid(NOBODY, NOBODY, NOBODY)
    os.setresuid(NOBODY, NOBODY, NOBODY)
    _check(_libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "NO_NEW_PRIVS")
    # The uid change made the process undumpable, which hands its /proc
    # files to root; the exec that follows setpriv undoes that.
    _check(_libc.prctl(PR_SET_DUMPABLE, 1, 0, 0, 0), "PR_SET_DUMPABLE")
    with open("/proc/self/status") as f:
        status = dict(line.split(":", 1) for line in f)
    return {key: " ".join(status[key].split())
            for key in ("Uid", "Gid", "Groups", "CapPrm", "CapEff", "CapBnd")}


def enter_userns():
    """What unshare --user --map-root-user --net does."""
    _check(_libc.unshare(CLONE_NEWUSER | CLONE_NEWNET), "unshare")
    for name, text in (("setgroups", "deny"), ("uid_map", f"0 {NOBODY} 1"),
                       ("gid_map", f"0 {NOBODY} 1")):
        with open(f"/proc/self/{name}", "w") as f:
            f.write(text)


def run(*args):
    return subprocess.run(args, check=True, capture_output=True,
                          text=True).stdout.strip()


def snd_cwnd(sock):
    info = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 104)
    return struct.unpack_from("I", info, TCPI_SND_CWND)[0]


def congestion(sock):
    name = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, 16)
    return name.split(b"\0")[0].decode()


def serve(listener, result):
    conn, _ = listener.accept()
    with conn:
        conn.settimeout(SOCK_TIMEOUT)
        result["server_cc"] = congestion(conn)
        received = 0
        while chunk := conn.recv(65536):
            received += len(chunk)
        result["server_received"] = received
        conn.sendall(struct.pack("!Q", received) + bytes(BYTES))


def transfer(cc, initcwnd):
    """The whole child: what it saw, as a dict."""
    result = {"outside": become_nobody()}
    try:
        enter_userns()
    except OSError as e:
        result["userns_error"] = str(e)
        return result
    result["inside"] = run("id")
    run("ip", "link", "set", "lo", "up")
    run("ip", "route", "replace", "local", ADDR, "dev", "lo", "table",
        "local", "proto", "kernel", "scope", "host", "src", ADDR,
        "initcwnd", str(initcwnd), "congctl", cc)
    result["route"] = run("ip", "route", "show", "table", "local", ADDR)
    listener = socket.create_server((ADDR, 0))
    listener.settimeout(SOCK_TIMEOUT)
    server = threading.Thread(target=serve, args=(listener, result))
    server.start()
    start = time.monotonic()
    with socket.create_connection(listener.getsockname(),
                                  timeout=SOCK_TIMEOUT) as client:
        result["client_cc"] = congestion(client)
        result["cwnd_connected"] = snd_cwnd(client)
        client.sendall(bytes(BYTES))
        client.shutdown(socket.SHUT_WR)
        reply = b""
        while chunk := client.recv(65536):
            reply += chunk
        result["cwnd_end"] = snd_cwnd(client)
    server.join()
    listener.close()
    result["seconds"] = round(time.monotonic() - start, 3)
    result["echoed"] = struct.unpack_from("!Q", reply)[0]
    result["client_received"] = len(reply) - 8
    return result


def fork_transfer(cc, initcwnd):
    """Fork a child running transfer(); return its pid and the read end
    of a pipe that gets its result as JSON."""
    rfd, wfd = os.pipe()
    pid = os.fork()
    if pid:
        os.close(wfd)
        return pid, rfd
    os.close(rfd)
    try:
        out = json.dumps(transfer(cc, initcwnd))
    except BaseException:  # whatever happens, the child must reach _exit
        out = json.dumps({"error": traceback.format_exc()})
    os.write(wfd, out.encode())
    os._exit(0)


# ---- the test, as root in the initial namespaces ---------------------------

class Kmsg:
    """The kernel log from the moment of creation on."""

    def __init__(self):
        self.fd = os.open("/dev/kmsg", os.O_RDONLY | os.O_NONBLOCK)
        os.lseek(self.fd, 0, os.SEEK_END)
        self.lines = []

    def read(self):
        while True:
            try:
                record = os.read(self.fd, 8192).decode(errors="replace")
            except BlockingIOError:
                return
            except BrokenPipeError:  # older records were overwritten
                continue
            self.lines.append(record.partition(";")[2].splitlines()[0])

    def bad(self):
        self.read()
        return [line for line in self.lines if BAD_LOG.search(line)]

    def oops(self):
        """The log from its first bad line on, OOPS_LINES of it."""
        first = next(i for i, line in enumerate(self.lines)
                     if BAD_LOG.search(line))
        return self.lines[first:first + OOPS_LINES]

    def close(self):
        os.close(self.fd)


def wait_child(pid, rfd, kmsg):
    """The child's output; the child killed if the kernel log turns bad
    (a second to finish the report first) or at CASE_TIMEOUT."""
    deadline = time.monotonic() + CASE_TIMEOUT
    out = b""
    while time.monotonic() < deadline:
        if kmsg.bad():
            time.sleep(1)
            kmsg.read()
            break
        if select.select([rfd], [], [], 0.2)[0]:
            data = os.read(rfd, 65536)
            if not data:
                break
            out += data
    os.close(rfd)
    os.kill(pid, signal.SIGKILL)
    # A child that died in the kernel holding a socket lock may never be
    # reaped: give up on it after a while rather than hang the test.
    for _ in range(50):
        if os.waitpid(pid, os.WNOHANG)[0]:
            break
        time.sleep(0.1)
    kmsg.read()
    return out.decode()


def modules_loaded_by_root():
    load_copa()
    available = sysctl_get("net.ipv4.tcp_available_congestion_control")
    ksft_pr("available:", available)
    ksft_pr("allowed:", sysctl_get("net.ipv4.tcp_allowed_congestion_control"))
    ksft_in("copa", available.split())
    ksft_in("copa_policer", available.split())


def route_case(cc, initcwnd):
    def case():
        kmsg = Kmsg()
        try:
            out = wait_child(*fork_transfer(cc, initcwnd), kmsg)
            bad = kmsg.bad()
            if bad:
                for line in kmsg.oops():
                    ksft_pr("kernel:", line)
        finally:
            kmsg.close()
        ksft_eq(bad, [], "the kernel log is clean")
        ksft_true(out, "the child reported")
        result = json.loads(out)
        ksft_pr(json.dumps(result))
        ksft_eq(result.get("error"), None)
        no_caps = "0000000000000000"
        ksft_eq(result["outside"], {"Uid": "65534 65534 65534 65534",
                                    "Gid": "65534 65534 65534 65534",
                                    "Groups": "", "CapPrm": no_caps,
                                    "CapEff": no_caps, "CapBnd": no_caps})
        if "userns_error" in result:
            raise KsftSkipEx(result["userns_error"])
        ksft_true(result["inside"].startswith("uid=0(root)"), "mapped")
        ksft_in(f"initcwnd {initcwnd}", result["route"])
        ksft_in(f"congctl {cc}", result["route"])
        ksft_eq(result["client_cc"], cc, "the sender ran it")
        ksft_eq(result["server_cc"], cc, "the receiver ran it")
        ksft_eq(result["server_received"], BYTES)
        ksft_eq(result["echoed"], BYTES)
        ksft_eq(result["client_received"], BYTES)

    case.__name__ = f"{cc}_initcwnd_{initcwnd}"
    return case


ksft_run([modules_loaded_by_root] +
         [route_case(cc, n) for cc in ("copa", "copa_policer")
          for n in INITCWNDS])
ksft_exit()
