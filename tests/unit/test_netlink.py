# SPDX-License-Identifier: GPL-2.0
"""The inet_diag decoder that copa-diag and the harness share
(copa_tools.netlink): malformed messages are refused, not looped on."""
import os
import socket
import struct
import subprocess
import sys

import pytest
from conftest import TOOLS

from copa_tools import diag_cli as copa_diag
from copa_tools import netlink


def nlmsg(typ, body, seq=1, length=None):
    size = netlink.NLMSG_HDR.size + len(body)
    return netlink.NLMSG_HDR.pack(size if length is None else length, typ,
                                  0, seq, 0) + body + bytes(-size % 4)


def attr(kind, data):
    return struct.pack("=HH", 4 + len(data), kind) + data + \
        bytes(-len(data) % 4)


def diag_msg(family=socket.AF_INET, sport=5201, dport=40000,
             src="10.0.0.1", dst="10.0.0.2", cc=b"copa\0", vegas=None):
    raw = netlink.INET_DIAG_MSG.pack(
        family, 1, 0, 0, sport.to_bytes(2, "big"), dport.to_bytes(2, "big"),
        socket.inet_pton(family, src).ljust(16, b"\0")[:16],
        socket.inet_pton(family, dst).ljust(16, b"\0")[:16], 0,
        (1234).to_bytes(8, "little"), 0, 0, 0, 0, 0)
    body = raw + attr(netlink.INET_DIAG_CONG, cc)
    if vegas:
        body += attr(netlink.INET_DIAG_VEGASINFO, struct.pack("=IIII",
                                                              *vegas))
    return body


class FakeSock:
    """recv() hands out the given buffers, then b""."""

    def __init__(self, *buffers):
        self.buffers = list(buffers)

    def recv(self, _size):
        return self.buffers.pop(0) if self.buffers else b""


@pytest.mark.parametrize("length", [0, 8, 15])
def test_short_length_is_refused(length):
    data = nlmsg(20, bytes(72), length=length)
    with pytest.raises(netlink.NetlinkError, match="malformed"):
        list(netlink.parse_messages(data))


def test_overlong_length_is_refused():
    with pytest.raises(netlink.NetlinkError, match="malformed"):
        list(netlink.parse_messages(nlmsg(20, bytes(8), length=4096)))


def test_copa_diag_refuses_zero_length_instead_of_looping():
    sock = FakeSock(nlmsg(20, diag_msg(), length=0))
    with pytest.raises(netlink.NetlinkError):
        list(copa_diag.messages(sock))


def test_closed_socket_ends_the_dump_with_an_error():
    with pytest.raises(netlink.NetlinkError, match="closed"):
        list(netlink.dump_replies(FakeSock(), 1))


def test_error_reply_raises_its_errno():
    sock = FakeSock(nlmsg(netlink.NLMSG_ERROR, struct.pack("=i", -1)))
    with pytest.raises(OSError) as err:
        list(netlink.dump_replies(sock, 1))
    assert err.value.errno == 1


def test_truncated_inet_diag_message_is_refused():
    with pytest.raises(netlink.NetlinkError, match="expected at least 72"):
        netlink.decode_inet_diag(bytes(40))


def test_one_decoder_for_both_tools():
    msg = diag_msg(vegas=(3, 2, 41000, 40000))
    buffer = nlmsg(20, msg) + nlmsg(netlink.NLMSG_DONE, bytes(4))
    entry = copa_diag.decode(next(copa_diag.messages(FakeSock(buffer))))
    assert entry == {"src": "10.0.0.1:5201", "dst": "10.0.0.2:40000",
                     "cc": "copa", "mode": "competitive", "velocity": 2,
                     "rtt_standing_us": 41000, "rtt_min_us": 40000}
    diag = netlink.decode_inet_diag(msg)
    assert (diag["sport"], diag["dport"], diag["cookie"]) == \
        (5201, 40000, 1234)
    assert diag["vegas"]["tcpv_rtt"] == 41000


def test_ipv6_addresses():
    msg = diag_msg(family=socket.AF_INET6, src="2001:db8::1", dst="::1",
                   cc=b"cubic\0")
    assert copa_diag.decode(msg) == {"src": "[2001:db8::1]:5201",
                                     "dst": "[::1]:40000", "cc": "cubic"}


def test_copa_diag_runs():
    """The real dump in this namespace works (no Copa sockets needed)."""
    proc = subprocess.run([sys.executable, "-m", "copa_tools.diag_cli",
                           "--all", "--json"], capture_output=True, text=True,
                          timeout=30, env=dict(os.environ, PYTHONPATH=TOOLS))
    assert proc.returncode == 0, proc.stderr


def tcp_info_bytes(length, **fields):
    """A struct tcp_info of ``length`` bytes with ``fields`` set."""
    raw = bytearray(max(length, 248))
    for name, kind, off in netlink.TCP_INFO_FIELDS:
        if name in fields:
            struct.pack_into("=" + kind, raw, off, fields[name])
    return bytes(raw[:length])


def test_tcp_info_of_any_length():
    """A kernel sends tcp_info as far as it knows it: the fields that fit
    are decoded, the others are absent, not 0; a longer struct than this
    decoder knows is fine too."""
    full = tcp_info_bytes(280, rtt_us=4000, bytes_sent=10 ** 10,
                          total_rto_time_ms=7)
    assert netlink.parse_tcp_info(full)["total_rto_time_ms"] == 7
    old = netlink.parse_tcp_info(full[:192])     # 4.9's length
    assert old["rtt_us"] == 4000
    assert "bytes_sent" not in old and "total_rto_time_ms" not in old
    assert netlink.parse_tcp_info(full[:104]).keys() >= {"total_retrans"}
    assert "pacing_rate" not in netlink.parse_tcp_info(full[:110])


def test_tcp_info_bit_fields_and_a_subset():
    raw = bytearray(tcp_info_bytes(232, delivery_rate=125000, rtt_us=9))
    raw[6] = 0x97                   # snd_wscale 7, rcv_wscale 9
    raw[7] = 0x01                   # app-limited
    info = netlink.parse_tcp_info(bytes(raw), frozenset(
        ["delivery_rate", "delivery_rate_app_limited", "snd_wscale",
         "rcv_wscale"]))
    assert info == {"delivery_rate": 125000, "delivery_rate_app_limited": 1,
                    "snd_wscale": 7, "rcv_wscale": 9}


def test_tcp_info_unknown_field_is_refused():
    with pytest.raises(ValueError, match="not tcp_info fields"):
        netlink.parse_tcp_info(bytes(232), frozenset(["rtt"]))
