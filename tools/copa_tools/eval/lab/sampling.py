# SPDX-License-Identifier: GPL-2.0
"""Sampling during a run: tcp_info of each flow's data socket and the
bottleneck tbf's counters, both over netlink, and the machine's CPU time.

tcp_info of each flow's data socket is read every ``sample_ms`` through
NETLINK_SOCK_DIAG (what ``ss -tin`` prints, without spawning ``ss``):
bytes_acked, bytes_retrans, srtt, cwnd, and for copa the mode from its
tcpvegas_info. The bottleneck backlog comes from the tbf's counters
(RTM_GETQDISC). results.py turns the samples into figures."""

from ... import netlink
from .topology import TBF_HANDLE
from .traffic import BASE_CPORT


class Recorder:
    """Samples tcp_info of every flow and the bottleneck qdisc."""

    def __init__(self, topo):
        self.topo = topo
        self.diag = [netlink.socket_in_netns(ns, netlink.NETLINK_SOCK_DIAG)
                     for ns in topo.senders]
        self.route = netlink.socket_in_netns(topo.router,
                                             netlink.NETLINK_ROUTE)
        self.flow_samples = [[] for _ in topo.flows]
        self.cc_seen = [None] * len(topo.flows)
        self.link_samples = []

    def close(self):
        for sock in self.diag + [self.route]:
            sock.close()

    def sample(self, t, active):
        """Record one sample of the flows whose index is in ``active``."""
        for i in active:
            for sock in netlink.tcp_sockets(self.diag[i]):
                if sock["sport"] == BASE_CPORT + i and sock["info"]:
                    self.flow_samples[i].append(_flow_sample(t, sock))
                    self.cc_seen[i] = sock["cc"] or self.cc_seen[i]
                    break
        for q in netlink.qdisc_stats(self.route):
            if q["handle"] == TBF_HANDLE and q["kind"] == "tbf":
                self.link_samples.append({
                    "t": t, "bytes": q["bytes"], "backlog": q["backlog"],
                    "drops": q["drops"], "rate_mbit": self.topo.rate_mbit})
                break


def _flow_sample(t, sock):
    info = sock["info"]
    sample = {"t": t, "bytes_acked": info["bytes_acked"],
              "bytes_retrans": info["bytes_retrans"],
              "rtt_us": info["rtt_us"], "cwnd": info["snd_cwnd"],
              "state": sock["state"]}
    if "vegas" in sock:
        sample["mode"] = sock["vegas"]["tcpv_enabled"]
    return sample


def cpu_times():
    with open("/proc/stat") as f:
        fields = [int(x) for x in f.readline().split()[1:]]
    idle = fields[3] + fields[4]
    return sum(fields), idle
