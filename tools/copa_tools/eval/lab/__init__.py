# SPDX-License-Identifier: GPL-2.0
"""Emulated-link lab: network namespaces, a router with a bottleneck FIFO,
and iperf3 flows sampled through tcp_info.

One module per concern, each readable on its own:

- ``config``: Link and Flow, their checks, BDP and FIFO arithmetic;
- ``topology``: namespaces, veths, addresses, routes and qdiscs
  (Topology), with the qdisc layout;
- ``traffic``: the iperf3 servers and clients;
- ``sampling``: tcp_info and qdisc counters over netlink during a run;
- ``results``: the figures of a run (Result) and format_table();
- ``experiment``: run(), which ties them together.

This package exports what the harness and the tests use.

Run as root on a kernel with netem, tbf, act_police and cls_matchall (the
project VM: ``scripts/vm-run -- ...``). Python stdlib only.

API
===

    from copa_tools.eval.lab import Link, Flow, run

    link = Link(rate_mbit=12, rtt_ms=40, buffer_bdp=4)
    res = run(link, [Flow("cubic"), Flow("bbr", start_s=5)], duration_s=20)
    f = res.flows[0]
    f.throughput_mbit, f.utilisation, f.qdelay_p95_ms, f.retrans_overhead
    res.link_stats.qdelay_p95_ms, res.jain_index, res.to_dict()

``Link(rate_mbit, rtt_ms, buffer_bdp=1.0, buffer_pkts=None, loss_pct=0.0,
policer_mbit=None, policer_burst=20000, offloads=False, up_rate_mbit=None)``
    The path. ``rate_mbit`` is the bottleneck rate in the data direction,
    counted on Ethernet frames (a full 1514-byte frame carries 1448 bytes of
    TCP payload, so goodput tops out at 95.6% of it). ``rtt_ms`` is the base
    (propagation) RTT. The FIFO holds ``buffer_pkts`` full frames if given,
    else ``buffer_bdp`` x BDP(rate, rtt) bytes, never less than 2 frames.
    ``loss_pct`` is random loss of data packets before the bottleneck.
    ``policer_mbit``/``policer_burst`` (bytes) add a token-bucket policer
    shared by all flows. ``offloads`` leaves GSO/TSO/GRO on (off by
    default). ``up_rate_mbit`` limits the ACK direction too.
    Bad values raise LinkError naming the field.

``Flow(cc, start_s=0, duration_s=None, extra_rtt_ms=0, sysctls=None,
select="setsockopt")``
    One iperf3 TCP flow from its own sender namespace. ``duration_s``
    defaults to the rest of the run. ``extra_rtt_ms`` is added to the
    link's base RTT for this flow only. ``sysctls`` ({name: value}) are
    written in the flow's sender namespace before it starts, e.g.
    {"net.ipv4.tcp_copa.delta": "0.1"}. ``select`` chooses the algorithm
    by "setsockopt" (iperf3 -C), "sysctl" (net.ipv4.tcp_congestion_control
    of the sender namespace) or "route" (``ip route ... congctl``).

``run(link, flows, duration_s, events=None, sample_ms=100,
measure_from_s=0) -> Result``
    Builds the topology, runs the flows, samples every ``sample_ms`` and
    always tears everything down. ``events`` is a list of
    (t_seconds, callable(Topology)) fired during the run, e.g.
    ``(10, lambda topo: topo.remove_policer())``. ``measure_from_s``
    leaves out a warm-up: every figure (flows and link) counts only the
    samples taken from that second of the run on; the series keep all.

``Topology`` (also a context manager: ``with Topology(link, flows) as t``)
    Live changes: set_rate(mbit), set_rtt(ms), set_loss(pct),
    set_buffer(nbytes), set_policer(mbit, burst), remove_policer().
    ``layout()`` returns the router's and receiver's ``tc qdisc show``.

``Result``
    ``flows``: FlowResult per flow (index, cc, cc_observed (as sock_diag
    reported it), select, sysctls, start_s, duration_s, base_rtt_ms,
    throughput_mbit, utilisation, bytes_acked, bytes_retrans,
    retrans_overhead, qdelay_mean_ms, qdelay_p50_ms, qdelay_p95_ms,
    series {t, throughput_mbit, rtt_ms, cwnd[, mode]}, iperf
    {sent_bytes, received_bytes, retransmits | error}, samples (raw
    tcp_info: t, bytes_acked, bytes_retrans, rtt_us, cwnd, state[, mode])).
    Figures are None when undefined (e.g. no sample).
    ``link_stats``: LinkStats (utilisation = goodput of all flows over the
    run / capacity, wire_utilisation from the bottleneck's byte counter,
    drops, backlog series {t, bytes}, qdelay_*_ms from the backlog,
    measure_from_s).
    ``jain_index`` over the flows' throughputs (None for one flow),
    ``cpu_busy`` of the machine during the run, ``sample_lag_p95_ms``
    (lateness of the sampling ticks: a starved machine shows here),
    ``kernel``, ``layout``, ``events``, ``to_dict()``.
    ``format_table(result)`` renders the per-flow figures as text.
"""

from .config import (FRAME_BYTES, SELECTS, Flow, LabError, Link, LinkError,
                     bdp_bytes, fifo_bytes, flow_duration)
from .experiment import run
from .results import FlowResult, LinkStats, Result, format_table
from .topology import (NETNS_PREFIX, RECEIVER_ADDR, Topology, available_cc,
                       cleanup_stale, ensure_cc, kernel_hz, set_offloads,
                       tbf_burst, write_sysctls)
from .traffic import BASE_CPORT, BASE_PORT

__all__ = ["BASE_CPORT", "BASE_PORT", "FRAME_BYTES", "Flow", "FlowResult",
           "LabError", "Link", "LinkError", "LinkStats", "NETNS_PREFIX",
           "RECEIVER_ADDR", "Result", "SELECTS", "Topology", "available_cc",
           "bdp_bytes", "cleanup_stale", "ensure_cc", "fifo_bytes",
           "flow_duration", "format_table", "kernel_hz", "run",
           "set_offloads", "tbf_burst", "write_sysctls"]
