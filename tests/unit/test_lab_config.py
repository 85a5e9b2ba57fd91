# SPDX-License-Identifier: GPL-2.0
"""The lab's link arithmetic and qdisc layout, checked without root."""
import pytest

from copa_tools.eval import lab
from copa_tools.eval.lab import Flow, Link, LinkError, Topology


def test_buffer_sizes():
    link = Link(rate_mbit=12, rtt_ms=40, buffer_bdp=4)
    assert link.bdp_bytes == 60000
    assert link.buffer_bytes == 240000
    assert Link(12, 40, buffer_pkts=5).buffer_bytes == 5 * lab.FRAME_BYTES
    # never less than two full frames
    assert Link(1, 1, buffer_bdp=0.1).buffer_bytes == 2 * lab.FRAME_BYTES


def test_capacity_is_the_policer_when_lower():
    assert Link(24, 40, policer_mbit=6).capacity_mbit == 6
    assert Link(24, 40, policer_mbit=60).capacity_mbit == 24


def test_tbf_burst_covers_a_tick_and_two_frames(monkeypatch):
    monkeypatch.setattr(lab.topology, "kernel_hz", lambda: 250)
    assert lab.tbf_burst(12) == 6000                 # 12 Mbit/s / 250 Hz
    assert lab.tbf_burst(1) == 2 * lab.FRAME_BYTES


@pytest.mark.parametrize("kwargs,field", [
    ({"rate_mbit": 0, "rtt_ms": 40}, "rate_mbit"),
    ({"rate_mbit": 12, "rtt_ms": -1}, "rtt_ms"),
    ({"rate_mbit": 12, "rtt_ms": 40, "loss_pct": 100}, "loss_pct"),
    ({"rate_mbit": 12, "rtt_ms": 40, "buffer_bdp": 0}, "buffer_bdp"),
    ({"rate_mbit": 12, "rtt_ms": 40, "policer_burst": 100}, "policer_burst"),
    ({"rate_mbit": 12, "rtt_ms": 40, "offloads": "yes"}, "offloads"),
])
def test_link_errors_name_the_field(kwargs, field):
    with pytest.raises(LinkError) as err:
        Link(**kwargs)
    assert err.value.field == field


@pytest.mark.parametrize("kwargs,field", [
    ({"cc": "cu bic"}, "cc"), ({"cc": "cubic", "select": "magic"}, "select"),
    ({"cc": "cubic", "start_s": -1}, "start_s"),
    ({"cc": "cubic", "sysctls": {"kernel.hz": 1}}, "sysctls"),
])
def test_flow_errors_name_the_field(kwargs, field):
    with pytest.raises(LinkError) as err:
        Flow(**kwargs)
    assert err.value.field == field


def test_qdisc_layout(monkeypatch):
    monkeypatch.setattr(lab.topology, "kernel_hz", lambda: 250)
    link = Link(12, 40, buffer_bdp=2, loss_pct=1, policer_mbit=4)
    topo = Topology(link, [Flow("cubic"), Flow("bbr", extra_rtt_ms=20)])
    cmds = topo._router_tc_cmds()
    # the bottleneck: tbf at the root of the receiver-facing veth, its own
    # byte FIFO of 2 BDP (2 x 60000 B)
    assert cmds[0] == ("qdisc add dev dst root handle 10: tbf rate "
                       "12000kbit burst 6000 limit 120000")
    # the base RTT (plus each flow's extra) on that flow's ACK path
    assert "dev s0 root netem delay 40.000ms" in cmds[1]
    assert "dev s1 root netem delay 60.000ms" in cmds[2]
    assert cmds[-1].endswith("police rate 4000kbit burst 20000 drop")
    # random loss: a drop-only netem on each sender's egress
    batches = dict((tuple(argv), c) for argv, c in topo._config_batches())
    loss = batches[("tc", "-n", topo.senders[1], "-batch", "-")]
    assert loss == ["qdisc replace dev eth0 root netem loss 1% limit 100000"]
    assert topo.router.startswith(lab.NETNS_PREFIX)
    assert len(set(topo.namespaces)) == 4


def test_route_selection_and_ack_rate(monkeypatch):
    monkeypatch.setattr(lab.topology, "kernel_hz", lambda: 250)
    topo = Topology(Link(10, 20, up_rate_mbit=1),
                    [Flow("bbr", select="route")])
    batches = dict((tuple(argv), cmds) for argv, cmds in
                   topo._config_batches())
    sender = batches[("ip", "-n", topo.senders[0], "-batch", "-")]
    assert "route add default via 10.77.1.1 congctl bbr" in sender
    ack = batches[("tc", "-n", topo.receiver, "-batch", "-")]
    assert ack == ["qdisc add dev eth0 root tbf rate 1000kbit burst 3028 "
                   "limit 3028"]


def test_flow_duration_defaults_to_the_rest_of_the_run():
    assert lab.flow_duration(Flow("cubic", start_s=5), 20) == 15
    assert lab.flow_duration(Flow("cubic", duration_s=3), 20) == 3
    with pytest.raises(LinkError, match="start_s"):
        lab.flow_duration(Flow("cubic", start_s=25), 20)


def test_a_drawn_policer_reaches_tc(monkeypatch):
    # scenarios' random_links draw policer_burst as an integer: the Link
    # takes whole bytes only, as tc police does
    from copa_tools.eval import scenarios
    monkeypatch.setattr(lab.topology, "kernel_hz", lambda: 250)
    case = scenarios.load("policer-random").cases[0]
    link = Link(**case.link)
    assert link.capacity_mbit == link.policer_mbit == 6.09
    cmds = Topology(link, [Flow("copa")])._router_tc_cmds()
    assert cmds[-1].endswith("police rate 6090kbit burst 44738 drop")
    with pytest.raises(LinkError, match="policer_burst"):
        Link(11.08, 39.91, policer_mbit=6.09, policer_burst=44738.0)
