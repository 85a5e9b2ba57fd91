# SPDX-License-Identifier: GPL-2.0
"""copa-fleet's collector on the host kernel, with real sockets in a
network namespace: its records agree with ss -tine for the same sockets,
every close is recorded once, and a full disk (a tiny tmpfs) loses and
doubles nothing. Needs root (a namespace, SO_RCVBUFFORCE); no chDB."""
import os
import re
import socket
import subprocess
import sys
import tempfile

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tools"))
from copa_tools import netlink  # noqa: E402
from copa_tools.fleet import collector, queries, schema, store  # noqa: E402

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root")
NS = f"cpf-{os.getpid() % 100000}"
ADDRS = ("198.18.0.1", "198.18.1.1", "198.18.2.1")
CCS = ("cubic", "reno", "bbr")


def run(*cmd):
    return subprocess.run(cmd, check=True, capture_output=True,
                          text=True).stdout


@pytest.fixture(scope="module")
def netns():
    subprocess.run(["ip", "netns", "del", NS], capture_output=True)
    run("ip", "netns", "add", NS)
    try:
        run("ip", "-n", NS, "link", "set", "lo", "up")
        for a in ADDRS:
            run("ip", "-n", NS, "addr", "add", f"{a}/24", "dev", "lo")
        yield NS
    finally:
        run("ip", "netns", "del", NS)


class Sink:
    def __init__(self):
        self.records = []

    def write(self, records):
        self.records.extend(records)


def tcp(netns):
    return netlink.socket_in_netns(netns, 0, socket.AF_INET,
                                   socket.SOCK_STREAM)


def connect(netns, listener, src=None, cc=None, payload=0):
    """A connected (client, server) pair; ``payload`` bytes sent and
    read, so the counters are not zero."""
    c = tcp(netns)
    if cc:
        c.setsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, cc.encode())
    if src:
        c.bind((src, 0))
    c.connect(listener.getsockname())
    s, _ = listener.accept()
    if payload:
        c.sendall(bytes(payload))
        got = 0
        while got < payload:
            got += len(s.recv(1 << 20))
    return c, s


@pytest.fixture
def listener(netns):
    sock = tcp(netns)
    sock.bind((ADDRS[0], 0))
    sock.listen(1024)
    yield sock
    sock.close()


SS_FIELDS = {"rtt": r"rtt:([\d.]+)/([\d.]+)", "cwnd": r"cwnd:(\d+)",
             "bytes_sent": r"bytes_sent:(\d+)",
             "bytes_acked": r"bytes_acked:(\d+)",
             "bytes_retrans": r"bytes_retrans:(\d+)",
             "minrtt": r"minrtt:([\d.]+)",
             "delivery_rate": r"delivery_rate (\d+)bps",
             "pacing_rate": r"pacing_rate (\d+)bps"}


def ss(netns):
    """ss -tine's view: {cookie: {cc, app_limited, and the SS_FIELDS it
    printed}} (-n: rates in bit/s, not rounded to a unit)."""
    out = run("ip", "netns", "exec", netns, "ss", "-tineH", "state",
              "established")
    socks = {}
    for head, info in zip(*[iter(out.strip().split("\n"))] * 2):
        cookie = int(re.search(r"sk:([0-9a-f]+)", head).group(1), 16)
        entry = {"cc": next(w for w in info.split() if w in CCS),
                 "app_limited": " app_limited" in info}
        for name, pattern in SS_FIELDS.items():
            m = re.search(pattern, info)
            if m:
                entry[name] = m.groups()
        socks[cookie] = entry
    return socks


def test_records_agree_with_ss(netns, listener):
    """Idle connections of three ccs from three prefixes: cookie, cc,
    srtt, rttvar, cwnd, byte counters, min_rtt, delivery and pacing rate
    and app_limited as ss -tine prints them (its ms to 3 decimals)."""
    pairs = [connect(netns, listener, src, cc, payload=200_000)
             for src, cc in zip(ADDRS, CCS)]
    c = collector.Collector([Sink()], host="t", netns=netns)
    try:
        records = {r["cookie"]: r for r in c.sweep()}
        seen = ss(netns)
    finally:
        c.close()
        for pair in pairs:
            for sock in pair:
                sock.close()
    assert len(records) == 6 and set(records) == set(seen)
    for cookie, r in records.items():
        schema.check(r)
        s = seen[cookie]
        assert r["cc"] == s["cc"]
        assert abs(r["srtt_us"] / 1000 - float(s["rtt"][0])) < 0.0015
        assert abs(r["rttvar_us"] / 1000 - float(s["rtt"][1])) < 0.0015
        assert abs(r["min_rtt_us"] / 1000 - float(s["minrtt"][0])) < 0.0015
        assert r["cwnd_segs"] == int(s["cwnd"][0])
        for name in ("bytes_sent", "bytes_acked", "bytes_retrans"):
            assert r[name] == int(s.get(name, ("0",))[0]), name
        if "delivery_rate" in s:
            assert r["delivery_rate_bps"] == int(s["delivery_rate"][0])
        assert r.get("pacing_rate_bps") == (
            int(s["pacing_rate"][0]) if "pacing_rate" in s else None)
        assert r["app_limited"] == s["app_limited"]
    clients = {r["local_addr"]: r for r in records.values()
               if r["peer_port"] == listener.getsockname()[1]}
    assert {a: r["peer_prefix"] for a, r in clients.items()} == \
        {a: "198.18.0.0/24" for a in ADDRS}
    assert {r["cc"] for r in clients.values()} == set(CCS)


def test_every_close_recorded_once(netns, listener):
    """N connections opened and closed between two sweeps, and one the
    first sweep saw: each of the 2N + 2 sockets has exactly one final
    record, with its final counters; the swept one keeps its cc."""
    n = 200
    c = collector.Collector([Sink()], host="t", netns=netns)
    try:
        seen_pair = connect(netns, listener, cc="reno", payload=1000)
        [swept] = [r for r in c.sweep()
                   if r["local_port"] == seen_pair[0].getsockname()[1]]
        for sock in seen_pair:
            sock.close()
        for _ in range(n):
            a, b = connect(netns, listener, payload=100)
            a.close()
            b.close()
        finals = []
        for _ in range(100):             # the kernel frees them shortly
            finals += c.closes()
            if len(finals) >= 2 * n + 2:
                break
            subprocess.run(["sleep", "0.05"])
        assert len(c.sweep()) == 0
        finals += c.closes()
    finally:
        c.close()
    cookies = [r["cookie"] for r in finals]
    assert len(cookies) == 2 * n + 2 == len(set(cookies))
    assert c.stats["lost_closes"] == 0
    [last] = [r for r in finals if r["cookie"] == swept["cookie"]]
    assert last["kind"] == schema.FINAL and last["cc"] == "reno"
    assert last["bytes_acked"] == 1 + 1000 + 1      # SYN, data, FIN


@pytest.fixture
def tiny_tmpfs():
    d = tempfile.mkdtemp(prefix="copa-fleet-tmpfs-")
    run("mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", d)
    try:
        yield d
    finally:
        run("umount", d)
        os.rmdir(d)


def test_full_disk_loses_and_doubles_nothing(tiny_tmpfs):
    """Records into a 64 KiB tmpfs until ENOSPC: the collector holds
    them with a clear error; once space is freed every record is on
    disk, once."""
    filler = os.path.join(tiny_tmpfs, "filler")
    local = store.Store(os.path.join(tiny_tmpfs, "records"), "t")
    logged = []

    class Emitter(collector.Collector):
        def _open(self, netns):
            pass

    c = Emitter([local], host="t", log=logged.append)
    with open(filler, "wb") as f:
        f.write(bytes(40 << 10))
    batch = 0
    while not logged:
        c.emit([{"time": 1000 + batch, "host": "t", "kind": "sample",
                 "cookie": batch * 10 + i, "local_addr": "198.18.0.1",
                 "local_port": 1, "peer_addr": "198.18.1.1",
                 "peer_port": 2, "peer_prefix": "198.18.1.0/24",
                 "cc": "cubic", "ab_arm": "", "age_ms": 0}
                for i in range(10)])
        batch += 1
    assert "No space left on device" in logged[0]
    assert tiny_tmpfs in logged[0]
    os.unlink(filler)
    c.emit([])
    local.close()
    written = [r["cookie"] for r in queries.read_records(
        queries.Chdb(), os.path.join(tiny_tmpfs, "records"))]
    assert sorted(written) == list(range(batch * 10))


def collect(netns, state, *args):
    return subprocess.Popen(
        [sys.executable, "-m", "copa_tools.fleet.cli", "collect",
         "--netns", netns, "--state-dir", state, "--interval", "1", *args],
        env=dict(os.environ, PYTHONPATH=os.path.join(ROOT, "tools")),
        stderr=subprocess.PIPE, text=True)


def read_records(state):
    return queries.read_records(queries.Chdb(),
                                os.path.join(state, "records"))


def wait_for_a_write(state, tries=50):
    d = os.path.join(state, "records")
    for _ in range(tries):
        if os.path.isdir(d) and any(os.path.getsize(os.path.join(d, n))
                                    for n in os.listdir(d)):
            return
        subprocess.run(["sleep", "0.1"])
    raise AssertionError(f"nothing written under {d}")


def test_cli_restart_keeps_what_was_written(netns, listener, tmp_path):
    """copa-fleet collect killed with SIGKILL, then started again and
    stopped with SIGTERM: every record the first run wrote is still
    there, in a finished file, with the second run's after it; no .part
    left, no record twice, and the connection closed under the second
    run recorded at close from both ends."""
    state = str(tmp_path)
    client, server = connect(netns, listener, cc="cubic", payload=1000)
    cport = client.getsockname()[1]
    ports = sorted([cport, server.getsockname()[1]])
    try:
        first = collect(netns, state)
        wait_for_a_write(state)
        first.kill()
        first.wait()
        kept = read_records(state)
        assert kept and all(r["kind"] == schema.SAMPLE for r in kept)
        second = collect(netns, state)
        subprocess.run(["sleep", "1.5"])
    finally:
        client.close()
        server.close()
    subprocess.run(["sleep", "1.5"])
    second.terminate()
    assert second.wait(timeout=10) == 0, second.stderr.read()
    records = read_records(state)
    assert records[:len(kept)] == kept
    assert not [n for n in os.listdir(os.path.join(state, "records"))
                if n.endswith(store.PART)]
    keys = [(r["host"], r["cookie"], r["time"], r["kind"]) for r in records]
    assert len(keys) == len(set(keys))
    finals = [r for r in records if r["kind"] == schema.FINAL]
    assert sorted(r["local_port"] for r in finals) == ports
    [mine] = [r for r in finals if r["local_port"] == cport]
    assert mine["cc"] == "cubic"
