# SPDX-License-Identifier: GPL-2.0
"""copa-fleet's collector over synthetic netlink messages: the records
it makes, the close events, sampling, prefixes, and bad input (a
truncated or malformed message, an unknown cc, a sink that fails)."""
import os
import socket
import struct

import pytest

from copa_tools import netlink
from copa_tools.fleet import collector, schema


def attr(kind, data):
    return struct.pack("=HH", 4 + len(data), kind) + data + \
        bytes(-len(data) % 4)


def nlmsg(body, typ=netlink.SOCK_DIAG_BY_FAMILY, seq=1, length=None):
    size = netlink.NLMSG_HDR.size + len(body)
    return netlink.NLMSG_HDR.pack(size if length is None else length, typ,
                                  0, seq, 0) + body + bytes(-size % 4)


def tcp_info(**fields):
    raw = bytearray(248)
    for name, kind, off in netlink.TCP_INFO_FIELDS:
        if name in fields:
            struct.pack_into("=" + kind, raw, off, fields[name])
    raw[7] = fields.get("app_limited", 0)
    return bytes(raw)


def diag(cookie, cc=b"cubic", dst="10.0.0.2", dport=40000, vegas=None,
         info=None, family=socket.AF_INET):
    body = netlink.INET_DIAG_MSG.pack(
        family, 1, 0, 0, (5201).to_bytes(2, "big"),
        dport.to_bytes(2, "big"),
        socket.inet_pton(family, "10.0.0.1" if family == socket.AF_INET
                         else "2001:db8::1").ljust(16, b"\0"),
        socket.inet_pton(family, dst).ljust(16, b"\0"), 0,
        cookie.to_bytes(8, "little"), 0, 0, 0, 0, 0)
    if cc is not None:
        body += attr(netlink.INET_DIAG_CONG, cc + b"\0")
    if vegas:
        body += attr(netlink.INET_DIAG_VEGASINFO, struct.pack("=IIII",
                                                              *vegas))
    body += attr(netlink.INET_DIAG_INFO, info or tcp_info(
        rtt_us=20000, min_rtt_us=10000, delivery_rate=1_250_000,
        bytes_acked=10_000, bytes_retrans=100, snd_cwnd=10,
        pacing_rate=(1 << 64) - 1))
    return body


class FakeDiag:
    """A NETLINK_SOCK_DIAG socket whose dumps answer with ``dumps``, one
    list of message bodies per request."""

    def __init__(self, dumps):
        self.dumps = list(dumps)
        self.replies = []

    def send(self, data):
        seq = netlink.NLMSG_HDR.unpack_from(data)[3]
        bodies = self.dumps.pop(0) if self.dumps else []
        self.replies.append(b"".join(nlmsg(b, seq=seq) for b in bodies)
                            + nlmsg(bytes(4), netlink.NLMSG_DONE, seq))

    def recv(self, _size):
        return self.replies.pop(0)


class FakeDestroy:
    def __init__(self):
        self.buffers = []

    def recv(self, _size, _flags=0):
        if not self.buffers:
            raise BlockingIOError
        item = self.buffers.pop(0)
        if isinstance(item, OSError):
            raise item
        return item


class Sink:
    def __init__(self, fail=0):
        self.records, self.fail = [], fail

    def write(self, records):
        if self.fail:
            self.fail -= 1
            raise OSError(28, "No space left on device")
        self.records.extend(records)


class FakeCollector(collector.Collector):
    def _open(self, netns):
        self.diag = FakeDiag(netns["dumps"])
        self.destroy = FakeDestroy()
        self.netns_ino = 0
        self.sysctl_dir = netns["sysctl"]


@pytest.fixture
def sysctl(tmp_path):
    os.makedirs(tmp_path / "tcp_copa")
    (tmp_path / "tcp_copa" / "delta").write_text("0.25\n")
    (tmp_path / "tcp_available_congestion_control").write_text(
        "reno cubic copa\n")
    return str(tmp_path)


def make(sysctl, dumps, **kw):
    logged = []
    c = FakeCollector([Sink()], host="h", log=logged.append,
                      netns={"dumps": dumps, "sysctl": sysctl}, **kw)
    return c, logged


def test_sample_record(sysctl):
    """A copa socket's record: the schema's columns, tcp_info's rates in
    bit/s, the mode by name, the module's delta from its sysctl; unpaced
    leaves pacing_rate_bps absent."""
    c, logged = make(sysctl, [[diag(7, b"copa", vegas=(1, 2, 21000,
                                                       20000))], []])
    [r] = c.sweep(now=1000.5)
    schema.check(r)
    assert r["time"] == 1000 and r["kind"] == schema.SAMPLE
    assert (r["cookie"], r["cc"], r["copa_mode"], r["copa_delta"]) == \
        (7, "copa", collector.CopaState.MODES[1], 0.25)
    assert (r["peer_addr"], r["peer_port"], r["peer_prefix"]) == \
        ("10.0.0.2", 40000, "10.0.0.0/24")
    assert (r["srtt_us"], r["min_rtt_us"], r["delivery_rate_bps"]) == \
        (20000, 10000, 10_000_000)
    assert r["app_limited"] == 0 and "pacing_rate_bps" not in r
    assert logged == []


def test_close_takes_the_last_sweeps_cc(sysctl):
    """A close is recorded once, with its final tcp_info and the cc its
    last sweep saw; a socket no sweep saw has an empty cc; a listener's
    close (peer port 0) is no connection."""
    c, _ = make(sysctl, [[diag(7, b"copa")], []])
    c.sweep(now=1000)
    c.destroy.buffers.append(
        nlmsg(diag(7, cc=None, info=tcp_info(bytes_acked=99)))
        + nlmsg(diag(8, cc=None)) + nlmsg(diag(9, cc=None, dport=0)))
    finals = c.closes(now=1012)
    assert [(r["cookie"], r["cc"], r["kind"]) for r in finals] == \
        [(7, "copa", "final"), (8, "", "final")]
    assert finals[0]["bytes_acked"] == 99 and finals[0]["age_ms"] == 12000
    assert c.closes() == [] and c.seen == {}


def test_truncated_message_is_skipped_with_an_error(sysctl):
    c, logged = make(sysctl, [[diag(1), diag(2)[:40], diag(3)], []])
    assert [r["cookie"] for r in c.sweep(now=1000)] == [1, 3]
    assert c.stats["bad_messages"] == 1
    assert "expected at least 72" in logged[0]


def test_malformed_close_buffer_is_reported(sysctl):
    """A netlink buffer that lies about its length is refused whole (its
    messages cannot be trusted), the next one still read; ENOBUFS (closes
    lost in the kernel) is counted and said."""
    c, logged = make(sysctl, [])
    c.destroy.buffers += [nlmsg(diag(4), length=4096),
                          OSError(105, "No buffer space"), nlmsg(diag(5))]
    assert [r["cookie"] for r in c.closes()] == [5]
    assert c.stats["bad_messages"] == 1 and c.stats["lost_closes"] == 1
    assert "malformed netlink message" in logged[0]
    assert "overflowed" in logged[1]


def test_unknown_cc_is_recorded_and_said_once(sysctl):
    c, logged = make(sysctl, [[diag(1, b"nosuchcc"), diag(2, b"nosuchcc")],
                              []])
    assert [r["cc"] for r in c.sweep(now=1000)] == ["nosuchcc"] * 2
    assert len(logged) == 1 and "'nosuchcc'" in logged[0]


def test_sampling_is_deterministic_per_cookie(sysctl):
    picked = [k for k in range(1, 20001) if collector.sampled(k, 0.25)]
    assert abs(len(picked) / 20000 - 0.25) < 0.02
    assert picked == [k for k in range(1, 20001)
                      if collector.sampled(k, 0.25)]
    assert all(collector.sampled(k, 1.0) for k in range(1000))
    c, _ = make(sysctl, [[diag(k) for k in range(1, 101)], []],
                fraction=0.25)
    assert sorted(r["cookie"] for r in c.sweep(now=1000)) == \
        [k for k in picked if k <= 100]


@pytest.mark.parametrize("family,addr,want", [
    (socket.AF_INET, "192.0.2.77", "192.0.2.0/24"),
    (socket.AF_INET6, "2001:db8:1:2ff::1", "2001:db8:1:200::/56"),
    (socket.AF_INET6, "::ffff:192.0.2.77", "192.0.2.0/24"),
])
def test_prefixes(family, addr, want):
    raw = socket.inet_pton(family, addr).ljust(16, b"\0")
    assert collector.Prefixes().of(family, raw) == want


def test_prefix_lengths_are_checked():
    with pytest.raises(ValueError, match="IPv4: 0 to 32"):
        collector.Prefixes(33, 56)
    assert collector.Prefixes(16, 48).of(
        socket.AF_INET, socket.inet_pton(socket.AF_INET, "10.9.8.7")
        .ljust(16, b"\0")) == "10.9.0.0/16"


def test_failing_sink_keeps_records_in_order(sysctl):
    """A sink that refuses (a full disk) gets the same records again at
    the next emit, before the new ones: none lost, none twice."""
    c, logged = make(sysctl, [])
    sink = c.sinks[0]
    sink.fail = 1
    c.emit([{"n": 1}])
    c.emit([{"n": 2}])
    assert sink.records == [{"n": 1}, {"n": 2}]
    assert "No space left" in logged[0]


def test_the_guide_shows_the_schema():
    """Documentation/fleet.rst's table of columns is schema.py's
    (python3 -m copa_tools.fleet.schema prints it)."""
    root = os.path.dirname(os.path.dirname(os.path.dirname(
        os.path.abspath(__file__))))
    with open(os.path.join(root, "Documentation", "fleet.rst")) as f:
        assert schema.rst_table() in f.read()


def test_bpf_copa_delta_and_mode_from_copa_flows(sysctl, monkeypatch,
                                                 capsys):
    """bpf_copa's delta and mode are its copa_flows entry's (same
    namespace and four-tuple); without bpftool or the map, its records
    go without them and that is said once."""
    from copa_tools import bpf_cli
    flow = {"saddr": "10.0.0.1", "daddr": "10.0.0.2", "sport": 5201,
            "dport": 40000, "netns": 0, "delta": 125, "mode": 1}
    monkeypatch.setattr(bpf_cli, "flows", lambda: [flow])
    c, _ = make(sysctl, [[diag(1, b"bpf_copa")], [], [diag(2, b"bpf_copa")],
                         [], [diag(3, b"bpf_copa")], []])
    [r] = c.sweep(now=1000)
    assert (r["copa_delta"], r["copa_mode"]) == \
        (0.125, collector.CopaState.MODES[1])

    def missing():
        raise bpf_cli.Error("bpftool: not found")

    monkeypatch.setattr(bpf_cli, "flows", missing)
    for t in (1001, 1002):
        [r] = c.sweep(now=t)
        assert "copa_delta" not in r and "copa_mode" not in r
    assert capsys.readouterr().err.count("bpftool: not found") == 1


def test_sockets_gone_for_two_sweeps_are_forgotten(sysctl):
    """A socket whose close never came (lost to ENOBUFS) is forgotten
    once two sweeps have missed it; after one, its close still finds its
    cc."""
    c, _ = make(sysctl, [[diag(1), diag(2)], [], [diag(2)], [], [], []])
    c.sweep(now=1000)
    c.sweep(now=1010)
    assert set(c.seen) == {1, 2}
    c.sweep(now=1020)
    assert set(c.seen) == {2}
    c.destroy.buffers.append(nlmsg(diag(2, cc=None)))
    assert [r["cc"] for r in c.closes()] == ["cubic"]
