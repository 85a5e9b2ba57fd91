# SPDX-License-Identifier: GPL-2.0
"""copa-fleet collect: sample every TCP socket's tcp_info, and record
each connection's final state when the kernel frees it.

Sweeps: one NETLINK_SOCK_DIAG dump per address family every interval,
asking only for INET_DIAG_INFO, INET_DIAG_CONG and INET_DIAG_VEGASINFO
(Copa's mode) for connected states. A socket is sampled when a hash of
its cookie falls under the sampling fraction, so it stays sampled (or
not) for its whole life, across collector restarts too; its cookie is
read before anything else is decoded.

Closes: the kernel multicasts each freed TCP socket's inet_diag message
(struct tcp_info, final) on SKNLGRP_INET_TCP_DESTROY and
SKNLGRP_INET6_TCP_DESTROY; the collector listens there rather than
polling or loading a sock_ops program. That message carries no
INET_DIAG_CONG (inet_diag_handler_get_info() adds only tcp_info), so the
final record takes the cc, delta and mode from the socket's last sweep;
a connection that opened and closed between two sweeps has an empty cc.
The kernel frees a socket once, so each close is recorded once.

A/B arms: the sock_ops program keeps each assigned socket's arm label in
copa_ab_arms (copa-fleet ab); the collector reads a socket's label once,
by its cookie, and puts it in every record of the socket.
"""

import contextlib
import errno
import math
import os
import socket
import struct
import sys
import time

from .. import netlink, params
from . import schema
from .batch import Batch

# Connected states (linux/tcp_states.h): no LISTEN, SYN_RECV (request
# sockets carry no tcp_info), TIME_WAIT or CLOSE.
TCP_ESTABLISHED, TCP_SYN_SENT, TCP_FIN_WAIT1, TCP_FIN_WAIT2 = 1, 2, 4, 5
TCP_CLOSE_WAIT, TCP_LAST_ACK, TCP_CLOSING = 8, 9, 11
STATES = sum(1 << s for s in (TCP_ESTABLISHED, TCP_SYN_SENT, TCP_FIN_WAIT1,
                              TCP_FIN_WAIT2, TCP_CLOSE_WAIT, TCP_LAST_ACK,
                              TCP_CLOSING))
EXT = sum(1 << (a - 1) for a in (netlink.INET_DIAG_INFO,
                                 netlink.INET_DIAG_VEGASINFO,
                                 netlink.INET_DIAG_CONG))

# (column, tcp_info field, multiplier): tcp_info's rates are bytes/s.
FROM_TCP_INFO = (
    ("delivery_rate_bps", "delivery_rate", 8),
    ("app_limited", "delivery_rate_app_limited", 1),
    ("min_rtt_us", "min_rtt_us", 1),
    ("srtt_us", "rtt_us", 1),
    ("rttvar_us", "rttvar_us", 1),
    ("bytes_acked", "bytes_acked", 1),
    ("bytes_sent", "bytes_sent", 1),
    ("bytes_retrans", "bytes_retrans", 1),
    ("lost_segs", "lost", 1),
    ("retrans_segs", "retrans", 1),
    ("total_retrans_segs", "total_retrans", 1),
    ("cwnd_segs", "snd_cwnd", 1),
    ("busy_us", "busy_time_us", 1),
    ("rwnd_limited_us", "rwnd_limited_us", 1),
    ("sndbuf_limited_us", "sndbuf_limited_us", 1),
)
INFO_NAMES = frozenset([f for _, f, _ in FROM_TCP_INFO] + ["pacing_rate"])
UNPACED = (1 << 64) - 1         # tcpi_pacing_rate when nothing paces

MODULE_CCS = {"copa": "tcp_copa", "copa_policer": "tcp_copa"}
BPF_CCS = ("bpf_copa", "bpf_copa_pol")
HASH_MULT = 0x9E3779B97F4A7C15  # Fibonacci hashing: spreads the cookies
U64 = 1 << 64


def sampled(cookie, fraction):
    """Whether the socket of ``cookie`` is in a ``fraction`` sample: the
    same answer for the same cookie, every time."""
    return (cookie * HASH_MULT) % U64 < fraction * U64


class Prefixes:
    """The peer's prefix at a length per family, as a network string;
    an IPv4-mapped IPv6 peer (::ffff:a.b.c.d) counts as IPv4."""

    def __init__(self, v4=schema.PREFIX_V4, v6=schema.PREFIX_V6):
        schema.check_prefix_lengths(v4, v6)
        self.v4, self.v6 = v4, v6
        self.cache = {}

    def of(self, family, raw):
        """The prefix of the 16 bytes ``raw`` (idiag_dst) of ``family``."""
        p = self.cache.get(raw)
        if p is None:
            if len(self.cache) > 65536:
                self.cache.clear()
            p = self.cache[raw] = self._compute(family, raw)
        return p

    def _compute(self, family, raw):
        if family == socket.AF_INET6 and raw[:12] == bytes(10) + b"\xff\xff":
            family, raw = socket.AF_INET, raw[12:]
        bits, size = (self.v4, 4) if family == socket.AF_INET \
            else (self.v6, 16)
        n = int.from_bytes(raw[:size], "big")
        n &= ~((1 << (size * 8 - bits)) - 1)
        net = socket.inet_ntop(family, n.to_bytes(size, "big"))
        return f"{net}/{bits}"


class CopaState:
    """Copa's delta and mode for one sweep: the module's from its
    namespace's sysctl and the socket's tcpvegas_info, bpf_copa's from
    the BPF build's copa_flows map (read once per sweep, only if a
    bpf_copa socket shows up)."""

    MODES = None
    WARNED = set()

    def __init__(self, netns_ino, sysctl_dir):
        if CopaState.MODES is None:
            CopaState.MODES = params.load().modes
        self.netns_ino = netns_ino
        self.sysctl_dir = sysctl_dir
        self.module_delta = {}
        self.flows = None

    def _module_delta(self, group):
        if group not in self.module_delta:
            try:
                with open(os.path.join(self.sysctl_dir, group,
                                       "delta")) as f:
                    self.module_delta[group] = float(f.read())
            except (OSError, ValueError):
                self.module_delta[group] = None
        return self.module_delta[group]

    def available(self):
        """The namespace's tcp_available_congestion_control."""
        try:
            with open(os.path.join(
                    self.sysctl_dir,
                    "tcp_available_congestion_control")) as f:
                return f.read().split()
        except OSError:
            return []

    def _bpf_flows(self):
        if self.flows is None:
            from .. import bpf_cli
            try:
                self.flows = {(f["saddr"], f["daddr"], f["sport"],
                               f["dport"]): f for f in bpf_cli.flows()
                              if f["netns"] == self.netns_ino}
            except (bpf_cli.Error, OSError, ValueError) as err:
                # No bpftool, or no pinned map: said once, and bpf_copa's
                # records go without delta and mode.
                if str(err) not in CopaState.WARNED:
                    CopaState.WARNED.add(str(err))
                    print(f"copa-fleet: copa_flows: {err}", file=sys.stderr)
                self.flows = {}
        return self.flows

    def of(self, ccs, vegas_enabled, local, peer, sport, dport):
        """(deltas, modes) of the sockets of ``ccs`` (names), None for an
        algorithm other than Copa: the module's from ``vegas_enabled``
        (tcpvegas_info's, -1 if absent), bpf_copa's from its four-tuple's
        copa_flows entry."""
        deltas, modes = [None] * len(ccs), [None] * len(ccs)
        for i, cc in enumerate(ccs):
            if cc in MODULE_CCS:
                deltas[i] = self._module_delta(MODULE_CCS[cc])
                v = int(vegas_enabled[i])
                modes[i] = self.MODES.get(v, str(v)) if v >= 0 else None
            elif cc in BPF_CCS:
                f = self._bpf_flows().get((_unmapped(local[i]),
                                           _unmapped(peer[i]),
                                           sport[i], dport[i]))
                if f:
                    deltas[i] = f["delta"] / 1000
                    modes[i] = self.MODES.get(f["mode"], str(f["mode"]))
        return deltas, modes


def sampled_mask(cookies, fraction):
    """sampled() of every cookie of the uint64 array ``cookies`` at once,
    a bool array; None when ``fraction`` takes every socket."""
    if fraction >= 1:
        return None
    import numpy as np
    return cookies * np.uint64(HASH_MULT) < np.uint64(math.ceil(fraction
                                                                * U64))


def _rows(cols, keep):
    """netlink.inet_diag_columns()'s ``cols`` of the rows ``keep`` only."""
    out = dict(cols)
    for k in ("index", "family", "sport", "dport", "src", "dst", "cookie",
              "vegas_enabled"):
        out[k] = cols[k][keep]
    out["cc"] = cols["cc"][0][keep], cols["cc"][1]
    out["info"] = {k: (v[keep], p[keep]) for k, (v, p) in
                   cols["info"].items()}
    return out


def _per_address(family, raw, text):
    """[text(family, address)] for the columns ``family`` and ``raw`` (16
    bytes each), computed once per distinct address."""
    import numpy as np
    out = np.empty(len(raw), object)
    for f in np.unique(family).tolist():
        rows = family == f
        uniq, code = np.unique(raw[rows].view("S16"), return_inverse=True)
        texts = [text(f, u.ljust(16, b"\0")) for u in uniq.tolist()]
        out[rows] = np.array(texts, object)[code.ravel()]
    return out.tolist()


def _column(values, present):
    """A Batch column of ``values`` where the bool array ``present`` says
    so, or None where no record has it."""
    if present.all():
        return values
    return (values, present) if present.any() else None


def _copa_columns(columns, deltas, modes):
    import numpy as np
    for name, values in (("copa_delta", deltas), ("copa_mode", modes)):
        col = _column(values, np.fromiter((v is not None for v in values),
                                          bool, len(values)))
        if col is not None:
            columns[name] = col


def _scaled(values, mult):
    """The uint64 array ``values`` times ``mult``, saturated at UInt64's
    largest value (as record() does): a rate any socket's owner can set
    (through SO_MAX_PACING_RATE) must not wrap."""
    import numpy as np
    if mult == 1:
        return values
    values = values.astype(np.uint64)
    return np.where(values > np.uint64((U64 - 1) // mult),
                    np.uint64(U64 - 1), values * np.uint64(mult))


def _info_columns(columns, info):
    """The tcp_info columns of FROM_TCP_INFO and pacing_rate_bps, from
    netlink.inet_diag_columns()'s ``info``, as numpy arrays."""
    for name, field, mult in FROM_TCP_INFO:
        values, present = info[field]
        col = _column(_scaled(values, mult), present)
        if col is not None:
            columns[name] = col
    values, present = info["pacing_rate"]
    col = _column(_scaled(values, 8), present & (values != UNPACED))
    if col is not None:
        columns["pacing_rate_bps"] = col


def _ages_ms(now, firsts):
    """Milliseconds from each of ``firsts`` (Unix seconds) to ``now``, at
    least 0, as an array."""
    import numpy as np
    ages = (now - np.array(firsts, np.float64)) * 1000
    return np.maximum(ages, 0).astype(np.uint64)


def _unmapped(addr):
    return addr[7:] if addr.startswith("::ffff:") and "." in addr else addr


def record(diag, kind, now, host, prefix, cc, delta, mode, first_seen,
           arm=""):
    """One schema record from decode_inet_diag()'s ``diag``."""
    r = {"time": int(now), "host": host, "kind": kind,
         "cookie": diag["cookie"], "local_addr": diag["src"],
         "local_port": diag["sport"], "peer_addr": diag["dst"],
         "peer_port": diag["dport"], "peer_prefix": prefix, "cc": cc,
         "ab_arm": arm, "age_ms": max(0, int((now - first_seen) * 1000))}
    if delta is not None:
        r["copa_delta"] = delta
    if mode is not None:
        r["copa_mode"] = mode
    info = diag.get("info", {})
    for column, field, mult in FROM_TCP_INFO:
        if field in info:
            r[column] = min(info[field] * mult, U64 - 1)
    pacing = info.get("pacing_rate")
    if pacing is not None and pacing != UNPACED:
        r["pacing_rate_bps"] = min(pacing * 8, U64 - 1)
    return r


class Collector:
    """Sweeps and close events of one network namespace (``netns`` a
    name under /run/netns, None for the caller's), handed to ``sinks``
    (objects with write(records)) as lists of schema records; ``arms``
    (ab.Arms, or None) gives a socket's A/B arm by its cookie."""

    def __init__(self, sinks, host=None, fraction=1.0, prefixes=None,
                 netns=None, max_pending=1_000_000, log=None, arms=None):
        if not 0 < fraction <= 1:
            raise ValueError(f"sampling fraction {fraction}: in (0, 1]")
        self.sinks = list(sinks)
        self.host = host or socket.gethostname()
        self.fraction = fraction
        self.prefixes = prefixes or Prefixes()
        self.max_pending = max_pending
        self.arms = arms
        self.log = log or (lambda msg: print(f"copa-fleet: {msg}",
                                             file=sys.stderr, flush=True))
        self._open(netns)
        # cookie -> (first seen, cc, delta, mode, last sweep's number,
        # A/B arm)
        self.seen = {}
        self.sweeps = 0
        self.ccs_checked = set()
        self.last_second = None
        self.pending = {id(s): [] for s in self.sinks}
        self.stats = {"samples": 0, "finals": 0, "bad_messages": 0,
                      "lost_closes": 0, "dropped": 0}

    def _open(self, netns):
        """The namespace's sockets: diag (sweeps), destroy (closes), and
        its sysctls (sysctl_dir) and inode number (netns_ino)."""
        self.diag = netlink.socket_in_netns(netns, netlink.NETLINK_SOCK_DIAG)
        path = f"/run/netns/{netns}" if netns else "/proc/self/ns/net"
        with netlink.in_netns(netns) if netns else contextlib.nullcontext():
            self.destroy = netlink.destroy_listener()
            self.sysctl_fd = os.open("/proc/sys/net/ipv4", os.O_RDONLY)
        self.netns_ino = os.stat(path).st_ino
        self.sysctl_dir = f"/proc/self/fd/{self.sysctl_fd}"

    def close(self):
        self.diag.close()
        self.destroy.close()
        os.close(self.sysctl_fd)

    def _bad(self, what, err):
        self.stats["bad_messages"] += 1
        self.log(f"{what}: {err}; message skipped")

    def sweep(self, now=None):
        """One dump of every sampled socket: a list of 'sample' records.

        A record's key has its time in seconds, so no two sweeps share a
        second: one that would waits for the next. The first waits for
        the next whole second too, so a restarted collector cannot repeat
        the second of its predecessor's last sweep.
        """
        if now is None:
            now = time.time()
            wait = (self.last_second + 1 if self.last_second else
                    math.floor(now) + 1) - now
            if wait > 0:
                time.sleep(wait)
                now = time.time()
        self.last_second = int(now)
        copa = CopaState(self.netns_ino, self.sysctl_dir)
        buf, starts, ends = b"", [], []
        for family in (socket.AF_INET, socket.AF_INET6):
            seq = next(netlink._seq)
            self.diag.send(netlink.inet_diag_request(family, EXT, STATES,
                                                     seq))
            more, s, e = netlink.dump_buffer(self.diag, seq)
            starts += [len(buf) + x for x in s]
            ends += [len(buf) + x for x in e]
            buf += more
        out = self._samples(buf, starts, ends, now, copa)
        self.sweeps += 1
        self._forget()
        self.stats["samples"] += len(out)
        return out

    def _samples(self, buf, starts, ends, now, copa):
        """The records, as a Batch, of the sampled sockets among the
        dump's messages buf[starts[i]:ends[i]]; a bad message is said and
        skipped."""
        cols = netlink.inet_diag_columns(buf, starts, ends, INFO_NAMES)
        for _, err in cols["bad"]:
            self._bad("sock_diag dump", err)
        keep = sampled_mask(cols["cookie"], self.fraction)
        if keep is not None:
            cols = _rows(cols, keep)
        cookies = cols["cookie"].tolist()
        code, names = cols["cc"]
        ccs = [names[c] for c in code.tolist()]
        seen = self.seen
        for i in [i for i, cc in enumerate(ccs) if not cc]:
            first = seen.get(cookies[i])     # a closing socket may not say
            if first:
                ccs[i] = first[1]
        for cc in set(ccs):
            self._check_cc(cc, copa)
        sport, dport = cols["sport"].tolist(), cols["dport"].tolist()
        local = _per_address(cols["family"], cols["src"], netlink._address)
        peer = _per_address(cols["family"], cols["dst"], netlink._address)
        delta, mode = copa.of(ccs, cols["vegas_enabled"], local, peer,
                              sport, dport)
        get = seen.get
        known = list(map(get, cookies))
        firsts = [f[0] if f else now for f in known]
        arms = [f[5] if f else self._arm(c) for f, c in zip(known, cookies)]
        sweep = self.sweeps
        seen.update(zip(cookies, zip(firsts, ccs, delta, mode,
                                     [sweep] * len(cookies), arms)))
        columns = {"time": int(now), "host": self.host,
                   "kind": schema.SAMPLE, "cookie": cols["cookie"],
                   "local_addr": local, "local_port": cols["sport"],
                   "peer_addr": peer, "peer_port": cols["dport"],
                   "peer_prefix": _per_address(cols["family"], cols["dst"],
                                               self.prefixes.of),
                   "cc": ccs, "ab_arm": arms,
                   "age_ms": _ages_ms(now, firsts)}
        _copa_columns(columns, delta, mode)
        _info_columns(columns, cols["info"])
        return Batch(len(cookies), columns)

    def _arm(self, cookie):
        return self.arms.get(cookie) if self.arms else ""

    def _forget(self):
        """Drop the sockets the last two sweeps did not see: their close
        was lost (ENOBUFS) or happened while no collector ran. One sweep
        is not enough: a socket freed during a sweep is missing from it,
        and its close, read after it, still needs its cc."""
        gone = [k for k, v in self.seen.items() if v[4] < self.sweeps - 2]
        for k in gone:
            del self.seen[k]

    def _check_cc(self, cc, copa):
        """Say once which recorded cc names the kernel does not list as
        available (a module unloaded since, or a garbled name); the
        records keep the name as it came."""
        if not cc or cc in self.ccs_checked:
            return
        self.ccs_checked.add(cc)
        if cc not in copa.available():
            self.log(f"congestion control {cc!r} is not in "
                     f"tcp_available_congestion_control; recorded as is")

    def closes(self, now=None):
        """Read the close messages waiting, without blocking: a list of
        'final' records."""
        out = []
        while True:
            try:
                data = self.destroy.recv(1 << 20, socket.MSG_DONTWAIT)
            except BlockingIOError:
                break
            except OSError as err:
                if err.errno != errno.ENOBUFS:
                    raise
                self.stats["lost_closes"] += 1
                self.log("close events lost: the kernel's buffer for them "
                         "overflowed (raise --close-buffer)")
                continue
            t = time.time() if now is None else now
            try:
                messages = list(netlink.parse_messages(data))
            except netlink.NetlinkError as err:
                self._bad("close event", err)
                continue
            for typ, _, body in messages:
                if typ == netlink.SOCK_DIAG_BY_FAMILY:
                    r = self._final(body, t)
                    if r:
                        out.append(r)
        self.stats["finals"] += len(out)
        return out

    def _final(self, msg, now):
        try:
            if not sampled(netlink.inet_diag_cookie(msg), self.fraction):
                return None
            diag = netlink.decode_inet_diag(msg, INFO_NAMES)
        except (netlink.NetlinkError, struct.error) as err:
            self._bad("close event", err)
            return None
        if diag["dport"] == 0:          # a listener or never connected
            self.seen.pop(diag["cookie"], None)
            return None
        first_seen, cc, delta, mode, _, arm = self.seen.pop(
            diag["cookie"], (now, "", None, None, None, None))
        if arm is None:
            arm = self._arm(diag["cookie"])
        return record(diag, schema.FINAL, now, self.host,
                      self.prefixes.of(diag["family"], msg[24:40]),
                      cc, delta, mode, first_seen, arm)

    def emit(self, records):
        """Hand ``records`` (a list of dicts or a Batch) to every sink. A
        sink that fails keeps them, after those it holds already, for the
        next emit() (up to max_pending records, beyond which the oldest
        are dropped and counted)."""
        for sink in self.sinks:
            queue = self.pending[id(sink)]
            if records:
                queue.append(records)
            while queue:
                try:
                    sink.write(queue[0])
                except OSError as err:
                    self._hold(queue, err)
                    break
                queue.pop(0)

    def _hold(self, queue, err):
        held = sum(map(len, queue))
        self.log(f"{err}; {held} records held, retried at the next write")
        excess = held - self.max_pending
        if excess <= 0:
            return
        self.stats["dropped"] += excess
        self.log(f"{excess} records dropped: more than {self.max_pending} "
                 f"held")
        while excess >= len(queue[0]):
            excess -= len(queue.pop(0))
        if excess:
            queue[0] = queue[0][excess:]

    def run(self, interval=10.0, flush_s=1.0, stop=lambda: False,
            sweeps=None):
        """Sweep every ``interval`` seconds and write close records at
        most every ``flush_s`` (the kernel holds them meanwhile: one
        write and fsync per second, not per close), until stop() is true
        or after ``sweeps`` sweeps."""
        next_sweep = time.monotonic()
        while not stop():
            now = time.monotonic()
            if now >= next_sweep:
                self.emit(self.closes())
                self.emit(self.sweep())
                if sweeps is not None:
                    sweeps -= 1
                    if sweeps <= 0:
                        return
                next_sweep += interval
                if next_sweep < now:        # a sweep longer than interval
                    next_sweep = now + interval
            time.sleep(max(0.0, min(flush_s,
                                    next_sweep - time.monotonic())))
            self.emit(self.closes())

