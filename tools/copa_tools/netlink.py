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

This is also copa-diag's decoder: ``parse_messages()`` splits a
netlink buffer (rejecting zero-length, short and overlong messages),
``inet_diag_request()`` builds a dump request and ``decode_inet_diag()``
decodes one struct inet_diag_msg with its attributes.
"""

import contextlib
import ctypes
import ipaddress
import itertools
import os
import socket
import struct

CLONE_NEWNET = 0x40000000
NETLINK_ROUTE = 0
NETLINK_SOCK_DIAG = 4

NLMSG_HDR = struct.Struct("=LHHLL")
NLMSG_ERROR = 2
NLMSG_DONE = 3
NLM_F_REQUEST = 0x1
NLM_F_DUMP = 0x300

SOCK_DIAG_BY_FAMILY = 20
INET_DIAG_INFO = 2
INET_DIAG_VEGASINFO = 3
INET_DIAG_CONG = 4
INET_DIAG_MSG_LEN = 72

RTM_GETQDISC = 38
TCMSG = struct.Struct("=BxxxiIII")
TCA_KIND = 1
TCA_STATS2 = 7
TCA_STATS_BASIC = 1
TCA_STATS_QUEUE = 3

TCP_STATES_ALL = 0xFFFFFFFF
TCP_LISTEN_STATE = 10

# (name, struct format, offset) of the struct tcp_info fields the lab uses.
TCP_INFO_FIELDS = (
    ("state", "B", 0),
    ("ca_state", "B", 1),
    ("snd_mss", "I", 16),
    ("lost", "I", 32),
    ("retrans", "I", 36),
    ("rtt_us", "I", 68),
    ("rttvar_us", "I", 72),
    ("snd_cwnd", "I", 80),
    ("total_retrans", "I", 100),
    ("pacing_rate", "Q", 104),
    ("bytes_acked", "Q", 120),
    ("min_rtt_us", "I", 148),
    ("delivery_rate", "Q", 160),
    ("bytes_sent", "Q", 200),
    ("bytes_retrans", "Q", 208),
)

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


def parse_messages(data):
    """Split one recv() buffer into (type, seq, body) tuples.

    A message whose length is shorter than its header (zero included:
    it would never advance), or longer than what is left of the buffer,
    raises NetlinkError instead of looping or reading past the end.
    """
    off = 0
    while off + NLMSG_HDR.size <= len(data):
        length, typ, _, seq, _ = NLMSG_HDR.unpack_from(data, off)
        if length < NLMSG_HDR.size or off + length > len(data):
            raise NetlinkError(f"malformed netlink message: length {length}"
                               f" at offset {off} of {len(data)} bytes")
        yield typ, seq, data[off + NLMSG_HDR.size:off + length]
        off += (length + 3) & ~3


def dump_replies(sock, seq):
    """Yield the payload of each reply to dump request ``seq`` on ``sock``
    until NLMSG_DONE; an NLMSG_ERROR reply raises OSError."""
    while True:
        data = sock.recv(1 << 20)
        if not data:
            raise NetlinkError("netlink socket closed during a dump")
        for typ, rseq, body in parse_messages(data):
            if rseq != seq:
                continue
            if typ == NLMSG_DONE:
                return
            if typ == NLMSG_ERROR:
                err = struct.unpack_from("=i", body)[0] if len(body) >= 4 \
                    else 0
                if err:
                    raise OSError(-err, os.strerror(-err))
                return
            yield body


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
    while off + 4 <= len(buf):
        alen, atype = struct.unpack_from("=HH", buf, off)
        if alen < 4:
            break
        out[atype & 0x3FFF] = buf[off + 4:off + alen]
        off += (alen + 3) & ~3
    return out


def parse_tcp_info(raw):
    """Decode the struct tcp_info fields in TCP_INFO_FIELDS from ``raw``.

    Fields beyond the end of ``raw`` (older kernels) are left out.
    """
    info = {}
    for name, fmt, off in TCP_INFO_FIELDS:
        if off + struct.calcsize(fmt) <= len(raw):
            info[name] = struct.unpack_from("=" + fmt, raw, off)[0]
    return info


def inet_diag_request(family, ext, states=TCP_STATES_ALL, seq=1):
    """A SOCK_DIAG_BY_FAMILY dump request for TCP sockets of ``family``
    asking for the INET_DIAG_* attributes in the bit mask ``ext``."""
    body = struct.pack("=BBBBI", family, socket.IPPROTO_TCP, ext, 0,
                       states) + bytes(48)
    return NLMSG_HDR.pack(NLMSG_HDR.size + len(body), SOCK_DIAG_BY_FAMILY,
                          NLM_F_REQUEST | NLM_F_DUMP, seq, 0) + body


def _address(family, raw):
    return str(ipaddress.ip_address(raw[:4 if family == socket.AF_INET
                                         else 16]))


def decode_inet_diag(msg):
    """Decode one struct inet_diag_msg and its attributes: family, state,
    src, dst (addresses), sport, dport, cookie, cc, info (parse_tcp_info,
    when asked for) and vegas (the struct tcpvegas_info fields, when the
    algorithm answers with it). NetlinkError if ``msg`` is too short."""
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
        entry["info"] = parse_tcp_info(attrs[INET_DIAG_INFO])
    vegas = attrs.get(INET_DIAG_VEGASINFO)
    if vegas and len(vegas) >= 16:
        entry["vegas"] = dict(zip(
            ("tcpv_enabled", "tcpv_rttcnt", "tcpv_rtt", "tcpv_minrtt"),
            struct.unpack_from("=IIII", vegas)))
    return entry


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
