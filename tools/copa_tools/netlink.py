# SPDX-License-Identifier: GPL-2.0
"""Minimal netlink readers for sampling a running experiment cheaply.

The lab samples tcp_info and qdisc counters every ~100 ms inside a slow
TCG guest. Spawning ``ss`` and ``tc`` that often costs more CPU than the
traffic itself, so this module opens one netlink socket per network
namespace (entering the namespace only for the socket() call) and asks the
kernel directly:

- ``tcp_sockets(sock)``: NETLINK_SOCK_DIAG dump of TCP sockets with their
  struct tcp_info, congestion-control name and, for algorithms that answer
  with struct tcpvegas_info (vegas, copa), those four fields. This is the
  same data ``ss -tin`` prints.
- ``qdisc_stats(sock)``: RTM_GETQDISC dump with byte, packet, backlog and
  drop counters, the data ``tc -s qdisc show`` prints.

Only the stable, documented layouts of <linux/inet_diag.h>, <linux/tcp.h>
and <linux/gen_stats.h> are decoded.

This is also copa-diag's and copa-fleet's decoder: ``parse_messages()``
splits a netlink buffer (rejecting zero-length, short and overlong
messages), ``inet_diag_request()`` builds a dump request,
``decode_inet_diag()`` decodes one struct inet_diag_msg with its
attributes, ``parse_tcp_info()`` a struct tcp_info of any length, and
``destroy_listener()`` receives the last message of each TCP socket the
kernel frees.
"""

import contextlib
import ctypes
import functools
import itertools
import os
import socket
import struct

CLONE_NEWNET = 0x40000000
NETLINK_ROUTE = 0
NETLINK_SOCK_DIAG = 4

NLMSG_HDR = struct.Struct("=LHHLL")
NLA_HDR = struct.Struct("=HH")
NLMSG_ERROR = 2
NLMSG_DONE = 3
NLM_F_REQUEST = 0x1
NLM_F_DUMP = 0x300

SOCK_DIAG_BY_FAMILY = 20
INET_DIAG_INFO = 2
INET_DIAG_VEGASINFO = 3
INET_DIAG_CONG = 4
INET_DIAG_MSG_LEN = 72
INET_DIAG_COOKIE_OFFSET = 44    # idiag_cookie, little-endian
INET_DIAG_COOKIE = struct.Struct("<Q")

# The multicast groups on which the kernel sends a TCP socket's last
# inet_diag message (tcp_info, no INET_DIAG_CONG) when it frees it.
SKNLGRP_INET_TCP_DESTROY = 1
SKNLGRP_INET6_TCP_DESTROY = 3
SOL_NETLINK = 270
NETLINK_ADD_MEMBERSHIP = 1
SO_RCVBUFFORCE = 33            # Python's socket module lacks it

RTM_GETQDISC = 38
TCMSG = struct.Struct("=BxxxiIII")
TCA_KIND = 1
TCA_STATS2 = 7
TCA_STATS_BASIC = 1
TCA_STATS_QUEUE = 3

TCP_STATES_ALL = 0xFFFFFFFF
TCP_LISTEN_STATE = 10

# (name, struct format, offset) of struct tcp_info's fields, <linux/tcp.h>
# up to 6.7's tcpi_total_rto_time, named without the tcpi_ prefix (the
# times with their unit). A kernel sends the struct as far as it knows
# it: parse_tcp_info() decodes what fits and leaves the rest out.
TCP_INFO_FIELDS = (
    ("state", "B", 0), ("ca_state", "B", 1), ("retransmits", "B", 2),
    ("probes", "B", 3), ("backoff", "B", 4), ("options", "B", 5),
    ("rto_us", "I", 8), ("ato_us", "I", 12),
    ("snd_mss", "I", 16), ("rcv_mss", "I", 20),
    ("unacked", "I", 24), ("sacked", "I", 28), ("lost", "I", 32),
    ("retrans", "I", 36), ("fackets", "I", 40),
    ("last_data_sent_ms", "I", 44), ("last_ack_sent_ms", "I", 48),
    ("last_data_recv_ms", "I", 52), ("last_ack_recv_ms", "I", 56),
    ("pmtu", "I", 60), ("rcv_ssthresh", "I", 64),
    ("rtt_us", "I", 68), ("rttvar_us", "I", 72),
    ("snd_ssthresh", "I", 76), ("snd_cwnd", "I", 80), ("advmss", "I", 84),
    ("reordering", "I", 88), ("rcv_rtt_us", "I", 92),
    ("rcv_space", "I", 96), ("total_retrans", "I", 100),
    ("pacing_rate", "Q", 104), ("max_pacing_rate", "Q", 112),
    ("bytes_acked", "Q", 120), ("bytes_received", "Q", 128),
    ("segs_out", "I", 136), ("segs_in", "I", 140),
    ("notsent_bytes", "I", 144), ("min_rtt_us", "I", 148),
    ("data_segs_in", "I", 152), ("data_segs_out", "I", 156),
    ("delivery_rate", "Q", 160),
    ("busy_time_us", "Q", 168), ("rwnd_limited_us", "Q", 176),
    ("sndbuf_limited_us", "Q", 184),
    ("delivered", "I", 192), ("delivered_ce", "I", 196),
    ("bytes_sent", "Q", 200), ("bytes_retrans", "Q", 208),
    ("dsack_dups", "I", 216), ("reord_seen", "I", 220),
    ("rcv_ooopack", "I", 224), ("snd_wnd", "I", 228),
    ("rcv_wnd", "I", 232), ("rehash", "I", 236),
    ("total_rto", "H", 240), ("total_rto_recoveries", "H", 242),
    ("total_rto_time_ms", "I", 244),
)
# (name, byte offset, shift, width) of its bit fields (x86's order:
# the first declared takes the low bits).
TCP_INFO_BITS = (
    ("snd_wscale", 6, 0, 4), ("rcv_wscale", 6, 4, 4),
    ("delivery_rate_app_limited", 7, 0, 1),
    ("fastopen_client_fail", 7, 1, 2),
)
TCP_INFO_NAMES = frozenset(f[0] for f in TCP_INFO_FIELDS + TCP_INFO_BITS)

# family, state, timer, retrans, sockid (sport, dport, src, dst, if,
# cookie), expires, rqueue, wqueue, uid, inode
INET_DIAG_MSG = struct.Struct("=BBBB2s2s16s16sI8sIIIII")
assert INET_DIAG_MSG.size == INET_DIAG_MSG_LEN


class NetlinkError(OSError):
    """The kernel answered with a malformed netlink message."""


_libc = ctypes.CDLL(None, use_errno=True)
_seq = itertools.count(1)


def _setns(fd):
    if _libc.setns(fd, CLONE_NEWNET) != 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))


@contextlib.contextmanager
def in_netns(netns):
    """Move the calling thread into network namespace ``netns`` (a name
    under /run/netns) for the duration of the block.

    Sockets created inside stay in that namespace after the block; files
    under /proc/sys/net opened inside are that namespace's sysctls.
    """
    home = os.open("/proc/thread-self/ns/net", os.O_RDONLY)
    try:
        target = os.open(f"/run/netns/{netns}", os.O_RDONLY)
        try:
            _setns(target)
        finally:
            os.close(target)
        try:
            yield
        finally:
            _setns(home)
    finally:
        os.close(home)


def enter_netns(netns):
    """Move the calling process into ``netns`` for good (a preexec_fn)."""
    fd = os.open(f"/run/netns/{netns}", os.O_RDONLY)
    try:
        _setns(fd)
    finally:
        os.close(fd)


def socket_in_netns(netns, protocol, family=socket.AF_NETLINK,
                    kind=socket.SOCK_RAW):
    """Return a socket (netlink by default) living in ``netns``.

    ``netns`` None means the caller's own namespace.
    """
    if netns is None:
        return socket.socket(family, kind, protocol)
    with in_netns(netns):
        return socket.socket(family, kind, protocol)


def message_spans(data):
    """Split one recv() buffer into (type, seq, start, end) tuples, the
    body of each message being data[start:end].

    A message whose length is shorter than its header (zero included:
    it would never advance), or longer than what is left of the buffer,
    raises NetlinkError instead of looping or reading past the end.
    """
    off, size, unpack = 0, len(data), NLMSG_HDR.unpack_from
    while off + NLMSG_HDR.size <= size:
        length, typ, _, seq, _ = unpack(data, off)
        if length < NLMSG_HDR.size or off + length > size:
            raise NetlinkError(f"malformed netlink message: length {length}"
                               f" at offset {off} of {size} bytes")
        yield typ, seq, off + NLMSG_HDR.size, off + length
        off += (length + 3) & ~3


def parse_messages(data):
    """message_spans() with each body copied out: (type, seq, body)."""
    for typ, seq, start, end in message_spans(data):
        yield typ, seq, data[start:end]


def destroy_listener(rcvbuf=32 << 20):
    """A NETLINK_SOCK_DIAG socket that receives, for every IPv4 and IPv6
    TCP socket of its namespace the kernel frees, its inet_diag message:
    sock_diag_broadcast_destroy() filled by inet_diag_handler_get_info().

    It must be bound before it joins the groups, or the kernel sends it
    nothing. ``rcvbuf`` (SO_RCVBUFFORCE: root) holds the messages that
    arrive while the caller is busy; more than that is lost, and recv()
    says so with ENOBUFS.
    """
    sock = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW,
                         NETLINK_SOCK_DIAG)
    try:
        sock.setsockopt(socket.SOL_SOCKET, SO_RCVBUFFORCE, rcvbuf)
        sock.bind((0, 0))
        for group in (SKNLGRP_INET_TCP_DESTROY, SKNLGRP_INET6_TCP_DESTROY):
            sock.setsockopt(SOL_NETLINK, NETLINK_ADD_MEMBERSHIP, group)
    except OSError:
        sock.close()
        raise
    return sock


def inet_diag_cookie(buf, start=0, end=None):
    """The socket cookie of the struct inet_diag_msg at buf[start:end],
    without decoding (or copying) the rest; NetlinkError if it is too
    short."""
    end = len(buf) if end is None else end
    if end - start < INET_DIAG_MSG.size:
        raise NetlinkError(f"inet_diag message of {end - start} bytes, "
                           f"expected at least {INET_DIAG_MSG.size}")
    return INET_DIAG_COOKIE.unpack_from(buf, start +
                                        INET_DIAG_COOKIE_OFFSET)[0]


def dump_spans(sock, seq):
    """Yield (buffer, start, end) for the payload of each reply to dump
    request ``seq`` on ``sock`` until NLMSG_DONE, uncopied; an
    NLMSG_ERROR reply raises OSError."""
    while True:
        data = sock.recv(1 << 20)
        if not data:
            raise NetlinkError("netlink socket closed during a dump")
        for typ, rseq, start, end in message_spans(data):
            if rseq != seq:
                continue
            if typ == NLMSG_DONE:
                return
            if typ == NLMSG_ERROR:
                err = struct.unpack_from("=i", data, start)[0] \
                    if end - start >= 4 else 0
                if err:
                    raise OSError(-err, os.strerror(-err))
                return
            yield data, start, end


def dump_buffer(sock, seq):
    """The replies to dump request ``seq`` on ``sock`` until NLMSG_DONE,
    in one buffer: (buffer, starts, ends), the payload of reply i being
    buffer[starts[i]:ends[i]], every start 4-byte aligned. An NLMSG_ERROR
    reply raises OSError; a malformed message, NetlinkError."""
    chunks, starts, ends, base = [], [], [], 0
    done = False
    while not done:
        data = sock.recv(1 << 20)
        if not data:
            raise NetlinkError("netlink socket closed during a dump")
        for typ, rseq, start, end in message_spans(data):
            if rseq != seq:
                continue
            if typ == NLMSG_DONE:
                done = True
                break
            if typ == NLMSG_ERROR:
                err = struct.unpack_from("=i", data, start)[0] \
                    if end - start >= 4 else 0
                if err:
                    raise OSError(-err, os.strerror(-err))
                done = True
                break
            starts.append(base + start)
            ends.append(base + end)
        chunks.append(data + bytes(-len(data) % 4))
        base += len(chunks[-1])
    return b"".join(chunks), starts, ends


def dump_replies(sock, seq):
    """Yield the payload of each reply to dump request ``seq`` on ``sock``
    until NLMSG_DONE; an NLMSG_ERROR reply raises OSError."""
    for data, start, end in dump_spans(sock, seq):
        yield data[start:end]


def _dump(sock, msg_type, payload):
    """Send a dump request and yield each reply's payload."""
    seq = next(_seq)
    flags = NLM_F_REQUEST | NLM_F_DUMP
    sock.send(NLMSG_HDR.pack(NLMSG_HDR.size + len(payload), msg_type,
                             flags, seq, 0) + payload)
    yield from dump_replies(sock, seq)


def _attrs(buf, off=0):
    """Parse netlink attributes starting at ``off`` into {type: bytes}."""
    out = {}
    end = len(buf)
    unpack = NLA_HDR.unpack_from
    while off + 4 <= end:
        alen, atype = unpack(buf, off)
        if alen < 4:
            break
        out[atype & 0x3FFF] = buf[off + 4:off + alen]
        off += (alen + 3) & ~3
    return out


@functools.lru_cache(maxsize=64)
def _tcp_info_layout(length, names):
    """(names, Struct, bits) decoding the fields in ``names`` (None: all)
    that fit in ``length`` bytes, with one unpack_from()."""
    if names is not None and not names <= TCP_INFO_NAMES:
        raise ValueError("not tcp_info fields: "
                         f"{sorted(names - TCP_INFO_NAMES)}")
    fmt, pos, out = "=", 0, []
    for name, kind, off in TCP_INFO_FIELDS:
        end = off + struct.calcsize(kind)
        if end <= length and (names is None or name in names):
            fmt += f"{off - pos}x{kind}"
            pos = end
            out.append(name)
    bits = tuple(b for b in TCP_INFO_BITS
                 if b[1] < length and (names is None or b[0] in names))
    return tuple(out), struct.Struct(fmt), bits


def parse_tcp_info(raw, names=None):
    """Decode struct tcp_info from ``raw``, of any length, into {name:
    value}: the fields in ``names`` (a frozenset of TCP_INFO_FIELDS' and
    TCP_INFO_BITS' names; None for all). A field that does not fit in
    ``raw`` (an older kernel's shorter struct) is left out, not 0.
    """
    fields, layout, bits = _tcp_info_layout(len(raw), names)
    info = dict(zip(fields, layout.unpack_from(raw)))
    for name, off, shift, width in bits:
        info[name] = (raw[off] >> shift) & ((1 << width) - 1)
    return info


def inet_diag_request(family, ext, states=TCP_STATES_ALL, seq=1):
    """A SOCK_DIAG_BY_FAMILY dump request for TCP sockets of ``family``
    asking for the INET_DIAG_* attributes in the bit mask ``ext``."""
    body = struct.pack("=BBBBI", family, socket.IPPROTO_TCP, ext, 0,
                       states) + bytes(48)
    return NLMSG_HDR.pack(NLMSG_HDR.size + len(body), SOCK_DIAG_BY_FAMILY,
                          NLM_F_REQUEST | NLM_F_DUMP, seq, 0) + body


def _address(family, raw):
    if family == socket.AF_INET:
        return socket.inet_ntop(family, raw[:4])
    if family == socket.AF_INET6:
        return socket.inet_ntop(family, raw)
    raise NetlinkError(f"inet_diag message of address family {family}")


def decode_inet_diag(msg, info_names=None):
    """Decode one struct inet_diag_msg and its attributes: family, state,
    src, dst (addresses), sport, dport, cookie, cc, info (parse_tcp_info
    of ``info_names``, when the message carries tcp_info) and vegas (the
    struct tcpvegas_info fields, when the algorithm answers with it).
    NetlinkError if ``msg`` is too short or not of AF_INET or AF_INET6."""
    if len(msg) < INET_DIAG_MSG.size:
        raise NetlinkError(f"inet_diag message of {len(msg)} bytes, "
                           f"expected at least {INET_DIAG_MSG.size}")
    (family, state, _timer, _retrans, sport, dport, src, dst, _ifindex,
     cookie, *_rest) = INET_DIAG_MSG.unpack_from(msg)
    attrs = _attrs(msg, INET_DIAG_MSG.size)
    entry = {"family": family, "state": state,
             "src": _address(family, src), "dst": _address(family, dst),
             "sport": int.from_bytes(sport, "big"),
             "dport": int.from_bytes(dport, "big"),
             "cookie": int.from_bytes(cookie, "little"),
             "cc": attrs.get(INET_DIAG_CONG, b"").split(b"\0")[0].decode(
                 errors="replace")}
    if INET_DIAG_INFO in attrs:
        entry["info"] = parse_tcp_info(attrs[INET_DIAG_INFO], info_names)
    vegas = attrs.get(INET_DIAG_VEGASINFO)
    if vegas and len(vegas) >= 16:
        entry["vegas"] = dict(zip(
            ("tcpv_enabled", "tcpv_rttcnt", "tcpv_rtt", "tcpv_minrtt"),
            struct.unpack_from("=IIII", vegas)))
    return entry


def _attr_positions(u16, pos, end, types):
    """Walk the attributes of every message at once: {type: (start of
    its payload, its length)} per message, -1 where it has none. Like
    _attrs(), a header shorter than itself ends a message's walk, a later
    attribute of a type replaces an earlier one, and a payload is cut at
    the message's end."""
    import numpy as np
    found = {t: (np.full(len(pos), -1, np.int64),
                 np.zeros(len(pos), np.int64)) for t in types}
    pos = pos.copy()
    rows = np.nonzero(pos + 4 <= end)[0]
    while len(rows):
        p = pos[rows]
        alen = u16[p >> 1].astype(np.int64)
        atype = u16[(p >> 1) + 1] & 0x3FFF
        whole = alen >= 4
        size = np.minimum(alen, end[rows] - p) - 4
        for t, (at, length) in found.items():
            hit = whole & (atype == t)
            at[rows[hit]] = p[hit] + 4
            length[rows[hit]] = size[hit]
        pos[rows] = p + ((alen + 3) & ~3)
        rows = rows[whole & (pos[rows] + 4 <= end[rows])]
    return found


def _gather(b8, u16, u32, at, kind):
    """The values of struct format ``kind`` at byte offsets ``at`` (each
    a multiple of the value's size, or of 4 for a u64), as uint64."""
    import numpy as np
    if kind == "B":
        return b8[at].astype(np.uint64)
    if kind == "H":
        return u16[at >> 1].astype(np.uint64)
    if kind == "I":
        return u32[at >> 2].astype(np.uint64)
    return (u32[at >> 2].astype(np.uint64)
            | (u32[(at >> 2) + 1].astype(np.uint64) << np.uint64(32)))


def inet_diag_columns(buf, starts, ends, info_names):
    """decode_inet_diag() of every message buf[starts[i]:ends[i]] at once
    (numpy), as columns: a copa-fleet sweep of 100k sockets without a
    Python object per field. ``starts`` must be 4-byte aligned (as
    dump_buffer() gives them). Returns a dict:

    - index: the messages decoded (positions in ``starts``); bad: (index,
      error) of those that are not, the errors decode_inet_diag() raises;
    - family, sport, dport, cookie (uint64), src and dst (16 raw bytes,
      numpy V16), vegas_enabled (tcpv_enabled, -1 without tcpvegas_info);
    - cc: (code per message, names): the INET_DIAG_CONG name of message i
      is names[code[i]], "" when it has none;
    - info: {name in ``info_names``: (uint64 values, present)}, present
      False where the message has no tcp_info or a shorter one.
    """
    import numpy as np
    size = len(buf) & ~3
    b8 = np.frombuffer(buf, np.uint8)
    u16 = np.frombuffer(buf, np.uint16, size >> 1)
    u32 = np.frombuffer(buf, np.uint32, size >> 2)
    st = np.asarray(starts, np.int64)
    en = np.asarray(ends, np.int64)
    index = np.arange(len(st))
    bad = [(int(i), f"inet_diag message of {int(n)} bytes, expected at "
            f"least {INET_DIAG_MSG.size}")
           for i, n in zip(index[en - st < INET_DIAG_MSG.size],
                           (en - st)[en - st < INET_DIAG_MSG.size])]
    ok = en - st >= INET_DIAG_MSG.size
    st, en, index = st[ok], en[ok], index[ok]
    family = b8[st]
    ok = (family == socket.AF_INET) | (family == socket.AF_INET6)
    bad += [(int(i), f"inet_diag message of address family {int(f)}")
            for i, f in zip(index[~ok], family[~ok])]
    bad.sort()
    st, en, index, family = st[ok], en[ok], index[ok], family[ok]
    words = (st >> 2)[:, None] + np.arange(4)
    out = {"index": index, "bad": bad, "family": family,
           "sport": (b8[st + 4].astype(np.int64) << 8) | b8[st + 5],
           "dport": (b8[st + 6].astype(np.int64) << 8) | b8[st + 7],
           "src": u32[words + 2].view("V16").ravel(),
           "dst": u32[words + 6].view("V16").ravel(),
           "cookie": _gather(b8, u16, u32, st + INET_DIAG_COOKIE_OFFSET,
                             "Q")}
    attrs = _attr_positions(u16, st + INET_DIAG_MSG.size, en,
                            (INET_DIAG_INFO, INET_DIAG_CONG,
                             INET_DIAG_VEGASINFO))
    at, length = attrs[INET_DIAG_VEGASINFO]
    has = length >= 16
    out["vegas_enabled"] = np.where(
        has, u32[np.where(has, at, 0) >> 2].astype(np.int64), -1)
    out["cc"] = _cc_names(b8, *attrs[INET_DIAG_CONG])
    at, length = attrs[INET_DIAG_INFO]
    info = {}
    for name, kind, off in TCP_INFO_FIELDS:
        if name in info_names:
            present = length >= off + struct.calcsize(kind)
            info[name] = (_gather(b8, u16, u32,
                                  np.where(present, at + off, 0), kind),
                          present)
    for name, off, shift, width in TCP_INFO_BITS:
        if name in info_names:
            present = length > off
            raw = b8[np.where(present, at + off, 0)]
            info[name] = (((raw >> shift) & ((1 << width) - 1))
                          .astype(np.uint64), present)
    out["info"] = info
    return out


def _cc_names(b8, at, length):
    """(code per message, names) of the INET_DIAG_CONG attributes at
    ``at`` (-1: none) of ``length`` bytes: each name up to its NUL."""
    import numpy as np
    width = int(min(max(length.max(initial=0), 1), 64))
    cols = np.arange(width)
    raw = b8[np.minimum(np.maximum(at, 0)[:, None] + cols, len(b8) - 1)]
    raw[cols >= length[:, None]] = 0
    uniq, code = np.unique(raw.view(f"S{width}").ravel(),
                           return_inverse=True)
    names = [u.split(b"\0")[0].decode(errors="replace") for u in uniq]
    return code.ravel(), names


def tcp_sockets(sock, states=TCP_STATES_ALL):
    """Dump IPv4 TCP sockets visible to ``sock``'s namespace.

    Returns a list of dicts: sport, dport, state, cc, info (parse_tcp_info)
    and vegas (tcpv_enabled, tcpv_rttcnt, tcpv_rtt, tcpv_minrtt) when the
    algorithm reports struct tcpvegas_info.
    """
    ext = ((1 << (INET_DIAG_INFO - 1)) | (1 << (INET_DIAG_VEGASINFO - 1))
           | (1 << (INET_DIAG_CONG - 1)))
    seq = next(_seq)
    sock.send(inet_diag_request(socket.AF_INET, ext, states, seq))
    out = []
    for msg in dump_replies(sock, seq):
        entry = decode_inet_diag(msg)
        entry.setdefault("info", {})
        out.append({k: entry[k] for k in ("sport", "dport", "state", "cc",
                                          "info", "vegas") if k in entry})
    return out


def qdisc_stats(sock):
    """Dump every qdisc in ``sock``'s namespace.

    Returns a list of dicts: ifindex, handle, parent, kind, bytes,
    packets, qlen, backlog (bytes), drops, overlimits.
    """
    out = []
    req = TCMSG.pack(socket.AF_UNSPEC, 0, 0, 0, 0)
    for msg in _dump(sock, RTM_GETQDISC, req):
        _, ifindex, handle, parent, _ = TCMSG.unpack_from(msg)
        attrs = _attrs(msg, TCMSG.size)
        entry = {"ifindex": ifindex, "handle": handle, "parent": parent,
                 "kind": attrs.get(TCA_KIND, b"").rstrip(b"\0").decode()}
        stats = _attrs(attrs.get(TCA_STATS2, b""))
        if TCA_STATS_BASIC in stats:
            entry["bytes"], entry["packets"] = struct.unpack_from(
                "=QI", stats[TCA_STATS_BASIC])
        if TCA_STATS_QUEUE in stats:
            (entry["qlen"], entry["backlog"], entry["drops"], _,
             entry["overlimits"]) = struct.unpack_from(
                "=IIIII", stats[TCA_STATS_QUEUE])
        out.append(entry)
    return out
