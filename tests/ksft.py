# SPDX-License-Identifier: GPL-2.0
"""Tiny KTAP test helper for the in-VM tests, with the names and the
semantics of the kernel's tools/testing/selftests/net/lib/py for what it
shares with it (ksft_run, ksft_exit, ksft_eq and the other checks,
ksft_pr, KsftSkipEx, KsftFailEx, defer, bkg).

A test file defines functions and ends with ``ksft_run([f1, f2, ...])``
and ``ksft_exit()``. Each function is one test case. As upstream, a check
(ksft_eq, ksft_ge, ...) that fails prints where and why and the case goes
on; the case fails if any check failed or it raised an exception
(KsftFailEx included), and is skipped by raising KsftSkipEx. A failed
command (cmd() with check=True) raises CmdExitFailure, as upstream's
does. The helpers below the checks are this project's (upstream has its
own for some: NetNS, cmd). Output:

    KTAP version 1
    1..2
    # diagnostics of case 1
    ok 1 f1
    ok 2 f2 # SKIP reason
    # Totals: pass:1 fail:0 skip:1

ksft_exit()'s status: 0 if nothing failed (4 if everything was skipped),
1 otherwise.

Helpers: cmd()/bg() run programs, optionally in a network namespace;
NetNS and veth_pair() build topologies; sysctl_get()/sysctl_set()
read and write sysctls in any namespace; write_errno() tells how a write
to /proc or /sys failed; module_loaded()/module_refcnt()/rmmod()/unload()
and load_copa()/unload_copa() handle modules; setcc() runs tests/setcc
and parses its JSON lines.
"""

import contextlib
import ctypes
import errno
import inspect
import itertools
import json
import os
import re
import subprocess
import sys
import time
import traceback

KSFT_PASS, KSFT_FAIL, KSFT_SKIP = 0, 1, 4
TESTS_DIR = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(TESTS_DIR), "tools"))
from copa_tools import paths  # noqa: E402

SETCC = os.path.join(TESTS_DIR, "setcc")
# The venv's programs: scripts/deps makes it and installs this tree's
# tools there (copa-eval, copa-diag, copa-bpf).
VENV_BIN = paths.venv("bin")


# The current case's result: False once a check failed (upstream's name).
KSFT_RESULT = None
_totals = {"pass": 0, "fail": 0, "skip": 0}
# The current case's closest call of each ksft_ge() between measured
# numbers: {comment with its numbers blanked: (a, b)} at the least a / b.
_margins = {}


class KsftFailEx(Exception):
    """The case failed: raise it to end the case there."""


class KsftSkipEx(Exception):
    """The case cannot run here."""


class CmdExitFailure(KsftFailEx):
    """cmd(check=True) saw a non-zero exit status."""


def ksft_pr(*objs):
    """Print a diagnostic: every line prefixed with '# '."""
    for line in " ".join(str(o) for o in objs).splitlines() or [""]:
        print("#", line, flush=True)


def _fail(*args):
    """Record a failed check, print where, and let the case go on."""
    global KSFT_RESULT
    KSFT_RESULT = False
    frame = next(f for f in inspect.stack()[1:]
                 if f.filename != __file__)
    ksft_pr(f"At {frame.filename} line {frame.lineno}:")
    ksft_pr(*args)


def ksft_true(cond, comment=""):
    if not cond:
        _fail("Check failed", cond, "is not true", comment)


def ksft_eq(a, b, comment=""):
    if a != b:
        _fail("Check failed", repr(a), "!=", repr(b), comment)


def ksft_ne(a, b, comment=""):
    if a == b:
        _fail("Check failed", repr(a), "==", repr(b), comment)


def ksft_ge(a, b, comment="", ideal=None):
    """Check a >= b. ``ideal`` (this project's, not upstream's) is the
    value a working build gives, where there is one (1 for a utilisation
    or a ratio of rates, a mechanism's constant): the margin line is then
    the deviation from it the bound allows over the deviation seen, since
    that deviation is what varies from run to run."""
    if not a >= b:
        _fail("Check failed", repr(a), "<", repr(b), comment)
    if ideal is None:
        _note_margin(a, b, comment)
    else:
        _note_margin(*_deviations(a, b, ideal), comment)


def _deviations(a, b, ideal):
    """(allowed, seen): how far the bound and the value of the check
    a >= b lie from ``ideal``. The value is on the ideal's side of the
    bound: a below the ideal, or b above it. A value at the ideal, or
    past it away from the bound, counts as a thousandth of what is
    allowed."""
    if a <= ideal:
        allowed, seen = ideal - b, ideal - a
    elif b >= ideal:
        allowed, seen = a - ideal, b - ideal
    else:
        allowed, seen = a - b, 0
    return allowed, max(seen, allowed / 1000)


def _note_margin(a, b, comment):
    """Keep the smallest a / b of the check named ``comment``, for the
    "# margin" lines the case ends with (scripts/gates reads them across
    runs). Counts (two ints) and bounds of zero or less are not margins."""
    nums = (a, b)
    if any(isinstance(x, bool) or not isinstance(x, (int, float))
           for x in nums) or all(isinstance(x, int) for x in nums) or b <= 0:
        return
    key = re.sub(r"-?\d+(\.\d+)?", "#", comment)
    old = _margins.get(key)
    if old is None or a / b < old[0] / old[1]:
        _margins[key] = (a, b)


def _print_margins():
    """One line per check: its closest call in the case, as a / b."""
    for key, (a, b) in sorted(_margins.items()):
        ksft_pr(f"margin {a / b:.3f}: {key} ({a:.4g} >= {b:.4g})")
    _margins.clear()


def ksft_in(a, b, comment=""):
    if a not in b:
        _fail("Check failed", repr(a), "not in", repr(b), comment)


def _run_case(case, args):
    """Run one case and its deferred cleanups: "pass", "fail" or the
    reason it was skipped (a KsftSkipEx)."""
    global KSFT_RESULT
    KSFT_RESULT = True
    outcome = None
    try:
        case(*args)
    except KsftSkipEx as e:
        outcome = e
    except Exception:  # KsftFailEx or an unexpected error: the case fails
        ksft_pr(traceback.format_exc().rstrip())
        KSFT_RESULT = False
    try:
        ksft_flush_defer()
    except KsftFailEx as e:
        ksft_pr(e)
        KSFT_RESULT = False
    _print_margins()
    if KSFT_RESULT is False:
        return "fail"
    return outcome or "pass"


def ksft_run(cases, args=()):
    """Run the case functions with ``args`` and print KTAP."""
    print("KTAP version 1")
    print(f"1..{len(cases)}", flush=True)
    for num, case in enumerate(cases, 1):
        start = time.monotonic()
        outcome = _run_case(case, args)
        ksft_pr(f"{case.__name__}: {time.monotonic() - start:.1f} s")
        if isinstance(outcome, KsftSkipEx):
            _totals["skip"] += 1
            print(f"ok {num} {case.__name__} # SKIP {outcome}", flush=True)
        else:
            _totals[outcome] += 1
            print(f"{'ok' if outcome == 'pass' else 'not ok'} {num} "
                  f"{case.__name__}", flush=True)


def ksft_exit():
    """Print the totals and exit with the kselftest status."""
    ksft_pr("Totals: " + " ".join(f"{k}:{v}" for k, v in _totals.items()))
    if _totals["fail"]:
        sys.exit(KSFT_FAIL)
    sys.exit(KSFT_SKIP if _totals["skip"] and not _totals["pass"]
             else KSFT_PASS)


# ---- processes and namespaces ---------------------------------------------

def _in_ns(args, ns):
    args = [str(a) for a in args]
    return ["ip", "netns", "exec", str(ns)] + args if ns else args


def cmd(args, ns=None, check=True, timeout=120):
    """Run args (a list), in namespace ns if given; return CompletedProcess
    with text stdout/stderr. check=True raises CmdExitFailure on non-zero
    exit."""
    proc = subprocess.run(_in_ns(args, ns), capture_output=True, text=True,
                          timeout=timeout, check=False)
    if check and proc.returncode:
        raise CmdExitFailure(f"{' '.join(proc.args)} exited "
                             f"{proc.returncode}: "
                             f"{(proc.stderr or proc.stdout).strip()}")
    return proc


@contextlib.contextmanager
def bg(args, ns=None):
    """Run args in the background (stdout piped, text); on leaving the
    block, SIGTERM it and wait. Yields the Popen."""
    proc = subprocess.Popen(_in_ns(args, ns), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


_ns_ids = itertools.count()


class NetNS:
    """A named network namespace with lo up; deleted (with every process
    in it killed) when the with-block ends."""

    def __init__(self):
        self.name = f"copa-t{os.getpid()}-{next(_ns_ids)}"
        cmd(["ip", "netns", "add", self.name])
        cmd(["ip", "link", "set", "lo", "up"], ns=self)

    def __str__(self):
        return self.name

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        pids = cmd(["ip", "netns", "pids", self.name], check=False).stdout.split()
        if pids:
            cmd(["kill", "-KILL"] + pids, check=False)
        cmd(["ip", "netns", "del", self.name])


def veth_pair(ns_a, ns_b, addr_a="10.0.0.1/24", addr_b="10.0.0.2/24"):
    """Connect ns_a and ns_b with a veth pair carrying addr_a and addr_b."""
    cmd(["ip", "link", "add", "veth0", "netns", ns_a, "type", "veth",
         "peer", "name", "veth0", "netns", ns_b])
    for ns, addr in ((ns_a, addr_a), (ns_b, addr_b)):
        cmd(["ip", "addr", "add", addr, "dev", "veth0"], ns=ns)
        cmd(["ip", "link", "set", "veth0", "up"], ns=ns)


_libc = ctypes.CDLL(None, use_errno=True)
_CLONE_NEWNET = 0x40000000


def _setns(fd):
    if _libc.setns(fd, _CLONE_NEWNET):
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))


@contextlib.contextmanager
def in_netns(ns):
    """Switch this (single-threaded) process into ns for the block; /proc/sys/net
    then shows that namespace. ns=None stays in the current one."""
    if ns is None:
        yield
        return
    with open("/proc/self/ns/net") as home, open(f"/run/netns/{ns}") as target:
        _setns(target.fileno())
        try:
            yield
        finally:
            _setns(home.fileno())


# ---- /proc and /sys ---------------------------------------------------------

def sysctl_path(name):
    return "/proc/sys/" + name.replace(".", "/")


def read_text(path):
    with open(path) as f:
        return f.read().strip()


def write_text(path, text):
    """Write text with a single write(2); raises OSError on failure."""
    fd = os.open(path, os.O_WRONLY)
    try:
        os.write(fd, text.encode())
    finally:
        os.close(fd)


def write_errno(path, text, ns=None):
    """Write text to path (in ns); return 0 on success or the errno."""
    try:
        with in_netns(ns):
            write_text(path, text)
    except OSError as e:
        return e.errno
    return 0


def sysctl_get(name, ns=None):
    with in_netns(ns):
        return read_text(sysctl_path(name))


def sysctl_set(name, value, ns=None):
    with in_netns(ns):
        write_text(sysctl_path(name), f"{value}\n")


@contextlib.contextmanager
def sysctl_saved(name, ns=None):
    """Restore sysctl name (in ns) to its current value after the block."""
    old = sysctl_get(name, ns)
    try:
        yield old
    finally:
        sysctl_set(name, old, ns)


# ---- modules ----------------------------------------------------------------

def module_loaded(name):
    return os.path.exists(f"/sys/module/{name}/refcnt")


def module_refcnt(name):
    return int(read_text(f"/sys/module/{name}/refcnt"))


_SYS_delete_module = 176  # x86_64


def rmmod(name):
    """delete_module(name, O_NONBLOCK): 0, or the kernel's errno (EAGAIN
    while the module has users, ENOENT if it is not loaded)."""
    if _libc.syscall(_SYS_delete_module, name.encode(), os.O_NONBLOCK):
        return ctypes.get_errno()
    return 0


def modprobe(name):
    cmd(["modprobe", name])


def unload(name, timeout=30):
    """Unload name once the references on their way out (closed sockets,
    namespaces being cleaned up) are gone; KsftFailEx if it stays."""
    if module_loaded(name):
        wait_for(lambda: rmmod(name) == 0, timeout=timeout)
    if module_loaded(name):
        raise KsftFailEx(f"{name} would not unload: refcnt "
                         f"{module_refcnt(name)}")


def load_copa():
    """Both modules loaded: the state scripts/vm-run leaves and tests restore."""
    modprobe("tcp_copa")
    modprobe("tcp_copa_policer")


def unload_copa():
    unload("tcp_copa_policer")
    unload("tcp_copa")


def wait_for(pred, timeout=10.0, step=0.1):
    """Poll pred() until it is true or timeout seconds pass; return its value."""
    deadline = time.monotonic() + timeout
    while not (value := pred()) and time.monotonic() < deadline:
        time.sleep(step)
    return value


def setcc(args, ns=None, check=True, timeout=120):
    """Run tests/setcc with args; return its JSON lines as dicts."""
    proc = cmd([SETCC] + list(args), ns=ns, check=check, timeout=timeout)
    return [json.loads(line) for line in proc.stdout.splitlines()]


def errno_name(num):
    return errno.errorcode.get(num, str(num))


TRACING = "/sys/kernel/tracing"
COPA_EVENT = os.path.join(TRACING, "events/copa/copa_update")


def _split_addr(text):
    """("10.0.0.1", 20001) from "10.0.0.1:20001", ("fd00::1", 5201) from
    "[fd00::1]:5201": how %pISpc prints a sockaddr, and ss an address."""
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit():
        raise ValueError(f"not ADDR:PORT: {text!r}")
    return host.removeprefix("[").removesuffix("]"), int(port)


def copa_trace_records(text):
    """copa_update events of a trace buffer as dicts of their fields plus
    ``t``, the event's timestamp in seconds (CLOCK_MONOTONIC under
    copa_recorded(), as time.monotonic()). ``src`` and ``dest`` are the
    addresses as printed (``10.0.0.1:20001``, ``[fd00::1]:5201``, as ss
    prints them), ``sport`` and ``dport`` their ports, ``saddr`` and
    ``daddr`` their hosts, ``sock_cookie`` the socket cookie as an integer
    (printed in hex, as ss -e prints sk:HEX); every other field (cwnd,
    target, dq_us, rtt_min_us, rtt_standing_us, delta_milli, mode,
    velocity, noise_us) is an integer."""
    records = []
    for line in text.splitlines():
        head, sep, tail = line.partition(": copa_update: ")
        if not sep:
            continue
        rec = dict(f.split("=", 1) for f in tail.split())
        for key in rec.keys() - {"src", "dest", "sock_cookie"}:
            rec[key] = int(rec[key])
        rec["sock_cookie"] = int(rec["sock_cookie"], 16)
        rec["saddr"], rec["sport"] = _split_addr(rec["src"])
        rec["daddr"], rec["dport"] = _split_addr(rec["dest"])
        rec["t"] = float(head.rsplit(None, 1)[-1])
        records.append(rec)
    return records


def copa_trace_events(text):
    """copa_update events of a trace buffer as (dport, delta_milli, mode)
    tuples."""
    return [(r["dport"], r["delta_milli"], r["mode"])
            for r in copa_trace_records(text)]


@contextlib.contextmanager
def _copa_trace(parse, buffer_kb=None, match=None):
    """Record the copa_update tracepoint while the block runs (skip if the
    module has none): the trace buffer cleared and, if given, resized to
    buffer_kb, the mono trace clock, the event filter match (e.g.
    "sport == 20001") or none. Yields a list that receives
    parse(trace text) once the block has ended; restores the buffer
    size, the clock and the filter.

    The record-cmd option is off meanwhile. With it on, enabling any
    event registers probes on sched_switch and sched_wakeup, and
    disabling it unregisters them: both rewrite the scheduler's hottest
    code with text_poke_bp(), which under TCG left the other vCPU
    looping on the int3 while this one waited for its answer (a soft
    lockup in smp_call_function_many_cond(); vm-watch's stacks, twice
    on 2026-11-27). The trace's task names are not needed."""
    if not os.path.isdir(COPA_EVENT):
        raise KsftSkipEx("no copa_update tracepoint")
    size_path = os.path.join(TRACING, "buffer_size_kb")
    clock_path = os.path.join(TRACING, "trace_clock")
    filter_path = os.path.join(COPA_EVENT, "filter")
    enable_path = os.path.join(COPA_EVENT, "enable")
    # "7 (expanded: 1408)" until the buffer is first used
    old_size = read_text(size_path).split("expanded: ")[-1].rstrip(")")
    old_clock = read_text(clock_path).split("[")[1].split("]")[0]
    record_cmd_path = os.path.join(TRACING, "options", "record-cmd")
    old_record_cmd = read_text(record_cmd_path).strip()
    out = []
    write_text(record_cmd_path, "0")
    if buffer_kb:
        write_text(size_path, str(buffer_kb))
    write_text(clock_path, "mono")
    write_text(filter_path, match or "0")
    open(os.path.join(TRACING, "trace"), "w").close()  # O_TRUNC clears it
    write_text(enable_path, "1")
    try:
        yield out
    finally:
        write_text(enable_path, "0")
        out.extend(parse(read_text(os.path.join(TRACING, "trace"))))
        write_text(filter_path, "0")
        write_text(clock_path, old_clock)
        write_text(size_path, old_size)
        write_text(record_cmd_path, old_record_cmd)


def copa_traced(buffer_kb=None):
    """Record the copa_update tracepoint while the block runs (skip if the
    module has none). Yields a list that holds the events, as
    copa_trace_events() returns them, once the block has ended."""
    return _copa_trace(copa_trace_events, buffer_kb)


def copa_recorded(buffer_kb=16384, match=None):
    """Like copa_traced(), but yields a list that holds every field of each
    event as copa_trace_records() returns it, timestamped with the mono
    trace clock, once the block has ended. match is an event filter that
    limits the recording, e.g. "sport == 20001"."""
    return _copa_trace(copa_trace_records, buffer_kb, match)


# ---- the kernel's names (tools/testing/selftests/net/lib/py) ----------------
# So that a test written against this file can move upstream unchanged:
# bkg() is bg(), and defer() queues a cleanup that runs when the current
# case ends (last queued first), whether it passed or not.

bkg = bg

_defer_queue = []


class defer:
    """defer(func, *args, **kwargs): call func(*args, **kwargs) when the
    current test case ends. .exec() runs it now, .cancel() drops it."""

    def __init__(self, func, *args, **kwargs):
        self.func, self.args, self.kwargs = func, args, kwargs
        _defer_queue.append(self)

    def cancel(self):
        if self in _defer_queue:
            _defer_queue.remove(self)

    def exec(self):
        self.cancel()
        self.func(*self.args, **self.kwargs)


def ksft_flush_defer():
    """Run every queued cleanup, newest first; KsftFailEx if any raised."""
    errors = []
    while _defer_queue:
        entry = _defer_queue[-1]
        try:
            entry.exec()
        except Exception as exc:  # keep cleaning up
            errors.append(f"{getattr(entry.func, '__name__', entry.func)}:"
                          f" {exc!r}")
            entry.cancel()
    if errors:
        raise KsftFailEx("deferred cleanup failed: " + "; ".join(errors))
