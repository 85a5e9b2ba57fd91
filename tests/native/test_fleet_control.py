# SPDX-License-Identifier: GPL-2.0
"""copa-fleet control's backends on the host kernel (tests/native/run):

- the copa_prefix LPM map of copa_sockops.bpf.o, with bpf_copa
  registered and the program attached to a cgroup: policies applied
  through the controller read back, reach new connections (cc and
  delta, in copa_flows), and the kill switch removes every entry, the
  operator's too; a map filled to its 4,096 entries refuses the next
  change, which the controller audits and leaves out of its state;
- routes with congctl in a network namespace: a prefix reached through
  a gateway gets its own route, connections to it run its cc, and the
  kill switch removes the controller's routes and no other.

The BPF tests skip, with the reason, where BPF struct_ops congestion
control is unavailable; the route tests need root only."""
import json
import os
import subprocess
import sys
import time

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import netns  # noqa: E402
from netns import ROOT, Pair, copa_bpf, flow, run, sender_cc  # noqa: E402
from test_bpf_copa import cgroup, registered  # noqa: E402,F401

from copa_tools.fleet import control  # noqa: E402
from copa_tools.fleet.control import HOST_DEFAULT, Policy  # noqa: E402

WHY = netns.struct_ops_unavailable()
needs_bpf = pytest.mark.skipif(WHY is not None,
                               reason=f"BPF struct_ops: {WHY}")
TAG = str(os.getpid() % 100000 + 1)


@pytest.fixture(scope="module")
def pair():
    if os.geteuid() != 0:
        pytest.skip("needs root")
    with Pair(TAG, prefixes=2) as p:
        p.server()
        yield p


def controller(tmp_path, backend):
    return control.Controller(str(tmp_path), backend, control.Config(),
                              None, default_cc="cubic")


def change(prefix, target, current=HOST_DEFAULT):
    return control.Decision(prefix, current, target, "bloated",
                            "a native test", {})


def audit(tmp_path):
    with open(tmp_path / control.AUDIT) as f:
        return [json.loads(line) for line in f]


@needs_bpf
def test_map_apply_and_kill_switch(pair, cgroup, tmp_path):  # noqa: F811
    backend = control.BpfMap(control.available_ccs())
    assert backend.capacity() == 4096
    ctl = controller(tmp_path, backend)
    copa_bpf("prefix", "add", "198.51.100.0/24", "cc=bbr")   # the operator's
    try:
        assert ctl.apply(change("198.18.0.0/24", Policy("copa", 200)), 0)
        assert ctl.apply(change("198.18.1.0/24", Policy("copa_policer")), 0)
        assert backend.entries() == {
            "198.18.0.0/24": Policy("copa", 200),
            "198.18.1.0/24": Policy("copa_policer"),
            "198.51.100.0/24": Policy("bbr")}
        listed = copa_bpf("prefix", "list").stdout
        assert "198.18.0.0/24 cc=bpf_copa delta=0.2" in listed
        assert "198.18.1.0/24 cc=bpf_copa_pol" in listed
        # New connections on the namespace's default cc take the policy.
        a = pair.iperf(pair.dst(0), cport=41050, cgroup=cgroup, secs=1)
        b = pair.iperf(pair.dst(1), cport=41051, cgroup=cgroup, secs=1)
        assert sender_cc(a) == "bpf_copa" and sender_cc(b) == "bpf_copa_pol"
        assert flow(41050)["delta"] == 200 and flow(41050)["source"] == 1
    finally:
        done = ctl.reset()
    assert sorted(done) == ["198.18.0.0/24", "198.18.1.0/24",
                            "198.51.100.0/24"]
    assert backend.entries() == {}
    assert ctl.paused()
    c = pair.iperf(pair.dst(0), cport=41052, cgroup=cgroup, secs=1)
    assert sender_cc(c) == netns.run(
        "ip", "netns", "exec", pair.snd, "sysctl", "-n",
        "net.ipv4.tcp_congestion_control").stdout.strip()
    events = [(a["event"], a["prefix"]) for a in audit(tmp_path)]
    assert events[:2] == [("change", "198.18.0.0/24"),
                          ("change", "198.18.1.0/24")]
    assert sorted(events[2:]) == [("reset", p) for p in sorted(done)]


def fill(count):
    """copa_prefix filled with ``count`` entries of 10.0.0.0/8, through
    one bpftool batch."""
    from copa_tools import bpf_cli
    value = bpf_cli.hexbytes(bpf_cli.prefix_value("cubic", {}))
    lines = []
    for i in range(count):
        key = bpf_cli.hexbytes(bpf_cli.prefix_key(
            f"10.{i >> 8}.{i & 255}.0/24"))
        lines.append(" ".join(["map", "update", "pinned",
                               bpf_cli.PIN_PREFIX, "key", *key, "value",
                               *value]))
    subprocess.run(["bpftool", "batch", "file", "-"], check=True, text=True,
                   input="\n".join(lines) + "\n", capture_output=True)


@needs_bpf
def test_map_full(pair, cgroup, tmp_path):  # noqa: F811
    backend = control.BpfMap(control.available_ccs())
    ctl = controller(tmp_path, backend)
    fill(backend.capacity())
    try:
        applied = backend.entries()
        assert len(applied) == 4096
        d = change("198.18.0.0/24", Policy("copa", 500))
        accepted, refused = control.validate([d], applied, set(),
                                             backend.capacity(),
                                             backend.names, ctl.cfg)
        assert refused == [d] and "map full: 4096 of 4096" in d.note
        # Past validation (a race with the operator): the map refuses.
        assert not ctl.apply(d, 0)
        assert "No space left" in d.note or "too long" in d.note
        assert ctl.policies() == {}
        assert [a["event"] for a in audit(tmp_path)] == ["change", "failed"]
    finally:
        started = time.monotonic()
        assert len(ctl.reset()) == 4096
        print(f"kill switch: 4096 entries in "
              f"{time.monotonic() - started:.1f} s")
    assert backend.entries() == {}


ROUTES = r"""
import json, sys
sys.path.insert(0, sys.argv[1])
from copa_tools.fleet import control
r = control.Routes(control.available_ccs())
for arg in sys.argv[2:]:
    prefix, _, cc = arg.partition("=")
    r.apply(prefix, control.Policy(cc))
print(json.dumps({p: str(v) for p, v in r.entries().items()}))
"""


def routes(pair, *changes):
    """Apply PREFIX=CC ``changes`` with control.Routes in the sender's
    namespace; the controller's routes after them."""
    out = pair.sx(sys.executable, "-c", ROUTES, os.path.join(ROOT, "tools"),
                  *changes).stdout
    return json.loads(out)


def test_routes_in_netns(pair, tmp_path):
    """198.19.1.0/24 and 198.19.2.0/24 are the receiver's, behind the
    gateway 198.18.0.2 (one /16 route), as a client prefix is behind a
    router."""
    for i in (1, 2):
        pair.rx("ip", "addr", "add", f"198.19.{i}.2/24", "dev", "lo")
    pair.sx("ip", "route", "add", "198.19.0.0/16", "via", "198.18.0.2")
    available = control.available_ccs()
    cc = "bbr" if "bbr" in available else "reno"
    assert routes(pair, f"198.19.1.0/24={cc}", "198.19.2.0/24=cubic") == {
        "198.19.1.0/24": cc, "198.19.2.0/24": "cubic"}
    shown = pair.sx("ip", "route", "show", "198.19.1.0/24").stdout
    assert "via 198.18.0.2" in shown and f"congctl {cc}" in shown
    a = pair.iperf("198.19.1.2", secs=1)
    b = pair.iperf("198.19.2.2", secs=1, cc="reno")
    assert sender_cc(a) == cc
    # An application's own choice wins over the route's.
    assert sender_cc(b) == "reno"
    # The kill switch: the controller's routes go, the /16 stays.
    assert routes(pair, "198.19.1.0/24=default",
                  "198.19.2.0/24=default") == {}
    left = pair.sx("ip", "route", "show").stdout
    assert "198.19.0.0/16 via 198.18.0.2" in left
    assert "198.19.1.0/24" not in left
    assert sender_cc(pair.iperf("198.19.1.2", secs=1)) == pair.sx(
        "sysctl", "-n", "net.ipv4.tcp_congestion_control").stdout.strip()


def test_routes_refuse_an_unreachable_prefix(pair):
    with pytest.raises(subprocess.CalledProcessError) as e:
        routes(pair, "203.0.113.0/24=cubic")
    assert "ip -j route get 203.0.113.0" in e.value.stderr
