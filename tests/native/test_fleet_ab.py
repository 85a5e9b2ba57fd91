# SPDX-License-Identifier: GPL-2.0
"""copa-fleet ab on the host kernel: start an experiment, open
connections in a network namespace from a process in the sock_ops
program's cgroup, and check that each socket runs its arm's congestion
control (cubic or reno: no struct_ops needed), that the collector's
records carry the arm, and that the arm is the one the Python hash
(ab.Experiment.arm) gives: the sock_ops program and copa-fleet agree on
every socket, per connection, per client, per prefix and under
switchback. Needs root, cgroup v2 and the sock_ops object (make bpf)."""
import contextlib
import os
import socket
import subprocess
import sys
import time

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import netns  # noqa: E402
from netns import copa_bpf  # noqa: E402

from copa_tools import bpf, netlink  # noqa: E402
from copa_tools.fleet import ab, collector  # noqa: E402

WHY = ("needs root" if os.geteuid() != 0 else
       "no cgroup v2 hierarchy" if not netns.CGROUP2 else
       bpf.unsupported_reason())
pytestmark = pytest.mark.skipif(WHY is not None, reason=f"sock_ops: {WHY}")
TAG = str(os.getpid() % 100000)
NS = f"cpab-{TAG}"
SERVER = "198.19.255.1"
# Clients: 4 addresses in each of 32 /24s.
CLIENTS = [f"198.18.{p}.{h}" for p in range(32) for h in range(1, 5)]
ARM_CC = {"control": "cubic", "treatment": "reno"}


def cli(*args, check=True):
    r = subprocess.run([sys.executable, "-m", "copa_tools.fleet.cli", "ab",
                        *args], cwd=os.path.join(netns.ROOT, "tools"),
                       capture_output=True, text=True)
    if check and r.returncode:
        raise AssertionError(r.stderr)
    return r


@pytest.fixture(scope="module")
def cgroup():
    r = copa_bpf("build", check=False)
    if r.returncode:
        pytest.fail(f"copa-bpf build failed:\n{r.stdout}{r.stderr}")
    path = os.path.join(netns.CGROUP2, f"copa-ab-{TAG}")
    os.makedirs(path, exist_ok=True)
    copa_bpf("sockops", "detach", path, check=False)
    copa_bpf("sockops", "attach", path)
    subprocess.run(["ip", "netns", "del", NS], capture_output=True)
    netns.run("ip", "netns", "add", NS)
    netns.run("ip", "-n", NS, "link", "set", "lo", "up")
    for a in CLIENTS + [SERVER]:
        netns.run("ip", "-n", NS, "addr", "add", f"{a}/32", "dev", "lo")
    yield path
    netns.run("ip", "netns", "del", NS, check=False)
    copa_bpf("sockops", "detach", path, check=False)
    os.rmdir(path)


@contextlib.contextmanager
def inside(cgroup):
    """This process in ``cgroup`` (its sockets meet the program)."""
    with open("/proc/self/cgroup") as f:
        home = next(line.split(":", 2)[2].strip() for line in f
                    if line.startswith("0::"))
    with open(os.path.join(cgroup, "cgroup.procs"), "w") as f:
        f.write(str(os.getpid()))
    try:
        yield
    finally:
        with open(os.path.join(netns.CGROUP2, home.lstrip("/"),
                               "cgroup.procs"), "w") as f:
            f.write(str(os.getpid()))


@pytest.fixture
def experiment(cgroup, tmp_path):
    started = []

    def start(name, *args):
        cli("start", name, "--state-dir", str(tmp_path), "--control",
            "cc=cubic", "--treatment", "cc=reno", "--scope",
            "198.18.0.0/15", "--salt", "12345", *args)
        started.append(name)
        return ab.Experiment.load(ab.experiment_path(str(tmp_path), name))

    yield start
    cli("stop", "--state-dir", str(tmp_path), check=False)


def connections(cgroup, sources, gap=0.0):
    """One connection from each of ``sources`` to SERVER, opened inside
    the cgroup (the listener too: an accepted socket is in its
    listener's cgroup): [(client, server socket, (CLOCK_BOOTTIME in ns
    before connect, and after accept))]. The program reads that clock
    when either end is established, which is between the two."""
    out = []
    with inside(cgroup):
        lst = netlink.socket_in_netns(NS, 0, socket.AF_INET,
                                      socket.SOCK_STREAM)
        lst.bind((SERVER, 0))
        lst.listen(len(sources))
        for src in sources:
            c = netlink.socket_in_netns(NS, 0, socket.AF_INET,
                                        socket.SOCK_STREAM)
            c.bind((src, 0))
            before = time.clock_gettime_ns(time.CLOCK_BOOTTIME)
            c.connect(lst.getsockname())
            s = lst.accept()[0]
            after = time.clock_gettime_ns(time.CLOCK_BOOTTIME)
            out.append((c, s, (before, after)))
            time.sleep(gap)
    lst.close()
    return out


class Sink:
    def write(self, records):
        pass


def records(conns):
    coll = collector.Collector([Sink()], host="t", netns=NS,
                               arms=ab.Arms())
    try:
        recs = coll.sweep()
    finally:
        coll.close()
        for c, s, _ in conns:
            c.close()
            s.close()
    return recs


def client_end(r):
    """The client's (address, port) of either end's record: a port alone
    is not unique, since clients bound to different addresses may share
    one."""
    if r["peer_addr"] == SERVER:
        return r["local_addr"], r["local_port"]
    return r["peer_addr"], r["peer_port"]


def check_arms(exp, recs, times=None):
    """Every record: the arm's label, the arm's cc, and the hash's arm
    (at the connection's time, under switchback)."""
    assert recs
    arms = set()
    for r in recs:
        assert r["ab_arm"] in exp.labels(), r
        arm_name = r["ab_arm"].split("/")[1]
        assert r["cc"] == ARM_CC[arm_name], r
        t = times.get(client_end(r)) if times else None
        assert exp.label(exp.arm(r["cookie"], r["peer_addr"], t)) == \
            r["ab_arm"], r
        arms.add(arm_name)
    assert arms == set(ARM_CC)


@pytest.mark.parametrize("unit", ["connection", "client", "prefix"])
def test_arms_applied_recorded_and_agreeing(cgroup, experiment, unit):
    exp = experiment(f"n-{unit}", "--unit", unit)
    status = cli("status").stdout
    assert f"experiment n-{unit} running" in status
    # Both ends of each connection are in the cgroup: 256 sockets.
    check_arms(exp, records(connections(cgroup, CLIENTS)))
    r = cli("start", "again", "--control", "cc=cubic", "--treatment",
            "cc=reno", check=False)
    assert r.returncode and "running" in r.stderr


def test_switchback_alternates_by_period(cgroup, experiment):
    exp = experiment("n-switch", "--unit", "prefix", "--switchback", "1",
                     "--washout", "0.2")
    conns = connections(cgroup, CLIENTS[::4] * 3, gap=0.02)
    # The program's period, (now - start_boot_ns) // period, is known
    # only where a connection's bracket lies inside one period; 1 ms
    # either side covers the rounding of exp.period's Unix time.
    period_ns = int(exp.switchback_s * 1e9)
    times = {}
    for c, _, (before, after) in conns:
        first, last = (
            (t - exp.start_boot_ns) // period_ns
            for t in (before - 1_000_000, after + 1_000_000))
        if first == last:
            times[c.getsockname()] = (
                exp.started + (before - exp.start_boot_ns) / 1e9)
    recs = [r for r in records(conns) if client_end(r) in times]
    check_arms(exp, recs, times)
    assert len({exp.period(t) for t in times.values()}) >= 2


def test_stop_returns_new_connections_to_the_default(cgroup, experiment,
                                                     tmp_path):
    experiment("n-stop")
    cli("stop", "--state-dir", str(tmp_path))
    assert "no experiment running" in cli("status").stdout
    default = netns.run("ip", "netns", "exec", NS, "sysctl", "-n",
                        "net.ipv4.tcp_congestion_control").stdout
    recs = records(connections(cgroup, CLIENTS[:8]))
    assert {r["ab_arm"] for r in recs} == {""}
    assert {r["cc"] for r in recs} == {default.strip()}
    stopped = ab.Experiment.load(str(tmp_path / "ab" / "n-stop.json"))
    assert stopped.stopped >= stopped.started
