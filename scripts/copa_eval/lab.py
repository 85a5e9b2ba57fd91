# SPDX-License-Identifier: GPL-2.0
"""Emulated-link lab: network namespaces, a router with a bottleneck FIFO,
and iperf3 flows sampled through tcp_info.

Run as root on a kernel with netem, tbf, act_police and cls_matchall (the
project VM: ``scripts/vm-run -- ...``). Python stdlib only.

API
===

    from copa_eval.lab import Link, Flow, run

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

Measurement
===========
tcp_info of each flow's data socket is read every ``sample_ms`` through
NETLINK_SOCK_DIAG (what ``ss -tin`` prints, without spawning ``ss``):
bytes_acked, bytes_retrans, srtt, cwnd, and for copa the mode from its
tcpvegas_info. A flow's window starts at its first sample (its iperf3 data
connection exists) and lasts its duration. Throughput is bytes_acked over
that window; utilisation is throughput over Link.capacity_mbit; queueing
delay is each srtt sample minus the flow's configured base RTT (link
rtt_ms + extra_rtt_ms), floored at 0. The bottleneck backlog comes from
the tbf's counters (RTM_GETQDISC); its queueing delay is backlog / rate.

Topology and qdisc layout
=========================
::

    sender ns s0 --veth-- +------------------+
    sender ns s1 --veth-- |    router ns     | --veth "dst"-- receiver ns
       ...                +------------------+                (iperf3 -s)

    router, each sender-facing veth "s<i>" (ACK direction):
        root netem delay (rtt + extra_rtt_i) limit 100000
        ingress qdisc in shared block 7 with one
            matchall action police rate P burst B drop    (policer only)
    router, receiver-facing veth "dst" (data direction):
        root 10: tbf rate R burst max(R/HZ, 2 frames) limit BUF
                       (tbf's own byte FIFO of BUF bytes is the bottleneck
                        queue; as a netem child, measured under TCG, it
                        drained at about half its rate, so the whole base
                        RTT sits on the ACK path instead)
    receiver "eth0" (ACK direction, only with up_rate_mbit):
        root tbf rate U burst max(U/HZ, 2 frames) limit BUF(U)
    senders "eth0": no qdisc (veth noqueue), or with loss_pct a netem
        that only drops (no delay): TCP small queues see no delay.

Addresses: sender i 10.77.<i+1>.2/24 behind router 10.77.<i+1>.1;
receiver 10.78.0.2/24 behind router 10.78.0.1. Offloads are switched off
on every veth end unless ``offloads=True``. Namespaces are named
``copalab-<pid>-<n>-{r,d,s<i>}``; cleanup_stale() removes those of dead
processes.
"""

import contextlib
import ctypes
import fcntl
import json
import math
import os
import shutil
import signal
import socket
import struct
import subprocess
import tempfile
import time
from dataclasses import asdict, dataclass, field

from . import metrics
from . import netlink

NETNS_PREFIX = "copalab-"
FRAME_BYTES = 1514          # MTU 1500 + Ethernet header, as tbf counts it
PAYLOAD_BYTES = 1448        # TCP payload of a full frame (timestamps on)
NETEM_LIMIT = 100000        # packets; netem only delays, never queues
BASE_PORT = 5201
BASE_CPORT = 20001          # client data ports, below the ephemeral range
RECEIVER_ADDR = "10.78.0.2"
SELECTS = ("setsockopt", "sysctl", "route")
FLOW_GRACE_S = 8.0          # iperf3 start-up and shutdown under TCG

_topology_ids = iter(range(1 << 30))


class LabError(RuntimeError):
    """The lab could not build or run an experiment."""


class LinkError(ValueError):
    """A Link or Flow parameter is invalid; ``field`` names it."""

    def __init__(self, field_name, message):
        super().__init__(f"{field_name}: {message}")
        self.field = field_name


def _require(cond, field_name, message):
    if not cond:
        raise LinkError(field_name, message)


def _is_number(value):
    return isinstance(value, (int, float)) and not isinstance(value, bool) \
        and math.isfinite(value)


@dataclass
class Link:
    """An emulated path; see the module docstring."""
    rate_mbit: float
    rtt_ms: float
    buffer_bdp: float = 1.0
    buffer_pkts: int = None
    loss_pct: float = 0.0
    policer_mbit: float = None
    policer_burst: int = 20000
    offloads: bool = False
    up_rate_mbit: float = None

    def __post_init__(self):
        _require(_is_number(self.rate_mbit) and self.rate_mbit > 0,
                 "rate_mbit", f"must be a number > 0, got {self.rate_mbit!r}")
        _require(_is_number(self.rtt_ms) and self.rtt_ms >= 0,
                 "rtt_ms", f"must be a number >= 0, got {self.rtt_ms!r}")
        _require(_is_number(self.buffer_bdp) and self.buffer_bdp > 0,
                 "buffer_bdp", f"must be > 0, got {self.buffer_bdp!r}")
        _require(self.buffer_pkts is None or (
            isinstance(self.buffer_pkts, int) and self.buffer_pkts >= 1),
            "buffer_pkts", f"must be an integer >= 1, got "
            f"{self.buffer_pkts!r}")
        _require(_is_number(self.loss_pct) and 0 <= self.loss_pct < 100,
                 "loss_pct", f"must be within [0, 100), got {self.loss_pct!r}")
        _require(self.policer_mbit is None or (
            _is_number(self.policer_mbit) and self.policer_mbit > 0),
            "policer_mbit", f"must be > 0, got {self.policer_mbit!r}")
        _require(isinstance(self.policer_burst, int)
                 and self.policer_burst >= FRAME_BYTES, "policer_burst",
                 f"must be an integer >= {FRAME_BYTES} bytes, got "
                 f"{self.policer_burst!r}")
        _require(isinstance(self.offloads, bool), "offloads",
                 f"must be true or false, got {self.offloads!r}")
        _require(self.up_rate_mbit is None or (
            _is_number(self.up_rate_mbit) and self.up_rate_mbit > 0),
            "up_rate_mbit", f"must be > 0, got {self.up_rate_mbit!r}")

    @property
    def capacity_mbit(self):
        """The configured capacity: the bottleneck rate or, if lower, the
        policer's rate. Utilisation figures are relative to it."""
        return min(self.rate_mbit, self.policer_mbit or self.rate_mbit)

    @property
    def bdp_bytes(self):
        """Bandwidth-delay product of the data direction, in bytes."""
        return bdp_bytes(self.rate_mbit, self.rtt_ms)

    @property
    def buffer_bytes(self):
        """Size of the bottleneck byte FIFO."""
        if self.buffer_pkts is not None:
            return self.buffer_pkts * FRAME_BYTES
        return fifo_bytes(self.buffer_bdp, self.rate_mbit, self.rtt_ms)

    def to_dict(self):
        d = asdict(self)
        d.update(capacity_mbit=self.capacity_mbit, bdp_bytes=self.bdp_bytes,
                 buffer_bytes=self.buffer_bytes)
        return d


def bdp_bytes(rate_mbit, rtt_ms):
    """Bandwidth-delay product in bytes."""
    return rate_mbit * 1e6 / 8 * rtt_ms / 1e3


def fifo_bytes(bdp_multiple, rate_mbit, rtt_ms):
    """A FIFO of ``bdp_multiple`` BDPs, at least two full frames."""
    return max(int(round(bdp_multiple * bdp_bytes(rate_mbit, rtt_ms))),
               2 * FRAME_BYTES)


@dataclass
class Flow:
    """One TCP flow; see the module docstring."""
    cc: str
    start_s: float = 0
    duration_s: float = None
    extra_rtt_ms: float = 0
    sysctls: dict = None
    select: str = "setsockopt"

    def __post_init__(self):
        _require(isinstance(self.cc, str) and self.cc.replace("_", "")
                 .isalnum(), "cc", f"not an algorithm name: {self.cc!r}")
        _require(_is_number(self.start_s) and self.start_s >= 0, "start_s",
                 f"must be >= 0, got {self.start_s!r}")
        _require(self.duration_s is None or (
            _is_number(self.duration_s) and self.duration_s > 0),
            "duration_s", f"must be > 0, got {self.duration_s!r}")
        _require(_is_number(self.extra_rtt_ms) and self.extra_rtt_ms >= 0,
                 "extra_rtt_ms", f"must be >= 0, got {self.extra_rtt_ms!r}")
        _require(self.select in SELECTS, "select",
                 f"must be one of {', '.join(SELECTS)}, got {self.select!r}")
        self.sysctls = dict(self.sysctls or {})
        for name in self.sysctls:
            _require(isinstance(name, str) and name.startswith("net."),
                     "sysctls", f"only net.* sysctls are per namespace: "
                     f"{name!r}")


@dataclass
class FlowResult:
    """Figures of one flow over its own window."""
    index: int
    cc: str
    cc_observed: str    # the algorithm sock_diag reported for the socket
    select: str
    sysctls: dict
    start_s: float
    duration_s: float
    base_rtt_ms: float
    throughput_mbit: float
    utilisation: float
    bytes_acked: int
    bytes_retrans: int
    retrans_overhead: float
    qdelay_mean_ms: float
    qdelay_p50_ms: float
    qdelay_p95_ms: float
    series: dict
    iperf: dict
    samples: dict       # raw tcp_info samples, one list per field
    measure_from_s: float = 0   # figures count samples from here on


@dataclass
class LinkStats:
    """Figures of the bottleneck over the whole run."""
    utilisation: float
    wire_utilisation: float
    drops: int
    qdelay_mean_ms: float
    qdelay_p50_ms: float
    qdelay_p95_ms: float
    backlog: dict
    measure_from_s: float = 0   # figures count samples from here on


@dataclass
class Result:
    """Everything one run() measured, plus what is needed to redo it."""
    link: Link
    duration_s: float
    sample_ms: int
    flows: list
    link_stats: LinkStats
    jain_index: float
    cpu_busy: float
    sample_lag_p95_ms: float
    kernel: str
    layout: str
    events: list = field(default_factory=list)

    def to_dict(self):
        """A JSON-ready dict of the whole result."""
        d = asdict(self)
        d["link"] = self.link.to_dict()
        return d


def _run(cmd, check=True, stdin=None):
    proc = subprocess.run(cmd, capture_output=True, text=True, input=stdin)
    if check and proc.returncode:
        raise LabError(f"{' '.join(cmd)}: {proc.stderr.strip()[-800:]}")
    return proc


def _run_batches(batches):
    """Run [(argv, [command lines])] concurrently, feeding the lines on
    stdin (``ip -batch -``, ``tc -batch -``); raise on any failure.

    Spawning a process costs 0.3-1 s in the TCG guest, so the topology
    is built with one ip or tc process per namespace.
    """
    procs = [(argv, lines, subprocess.Popen(
        argv, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE, text=True)) for argv, lines in batches]
    errors = []
    for argv, lines, proc in procs:
        _, err = proc.communicate("\n".join(lines) + "\n")
        if proc.returncode:
            errors.append(f"{' '.join(argv)}: {err.strip()[-600:]}")
    if errors:
        raise LabError("topology setup failed (the lab needs root and the "
                       "netem, tbf, act_police and cls_matchall modules; "
                       "copa-eval --vm runs it in the project VM):\n"
                       + "\n".join(errors))


def write_sysctls(netns, sysctls):
    """Write {name: value} sysctls of network namespace ``netns``."""
    with netlink.in_netns(netns):
        for name, value in sysctls.items():
            path = "/proc/sys/" + name.replace(".", "/")
            try:
                with open(path, "w") as f:
                    f.write(str(value))
            except FileNotFoundError:
                raise LinkError("sysctls", f"{name}: no such sysctl (is "
                                f"its module loaded?)") from None
            except OSError as exc:
                raise LinkError("sysctls", f"{name}={value!r}: "
                                f"{exc.strerror}") from None


SIOCETHTOOL = 0x8946
ETHTOOL_OFFLOAD_CMDS = (0x1f, 0x24, 0x2c)      # ETHTOOL_S{TSO,GSO,GRO}


def set_offloads(netns, dev, enabled):
    """Switch TSO, GSO and GRO of ``dev`` in ``netns`` (ethtool -K)."""
    sock = netlink.socket_in_netns(netns, 0, socket.AF_INET,
                                   socket.SOCK_DGRAM)
    with sock:
        for cmd in ETHTOOL_OFFLOAD_CMDS:
            value = ctypes.create_string_buffer(
                struct.pack("=II", cmd, int(enabled)))
            ifreq = struct.pack("16sP", dev.encode(),
                                ctypes.addressof(value)).ljust(40, b"\0")
            fcntl.ioctl(sock.fileno(), SIOCETHTOOL, ifreq)


def kernel_hz():
    """CONFIG_HZ of the running kernel (100, the worst case, if unknown)."""
    with contextlib.suppress(OSError):
        with open(f"/boot/config-{os.uname().release}") as f:
            for line in f:
                if line.startswith("CONFIG_HZ="):
                    return int(line.split("=")[1])
    return 100


def tbf_burst(rate_mbit):
    """tbf bucket in bytes: at least rate/HZ and two full frames."""
    return max(int(math.ceil(rate_mbit * 1e6 / 8 / kernel_hz())),
               2 * FRAME_BYTES)


def _kbit(mbit):
    return f"{int(round(mbit * 1000))}kbit"


def _ms(value):
    return f"{value:.3f}ms"


def available_cc():
    with open("/proc/sys/net/ipv4/tcp_available_congestion_control") as f:
        return f.read().split()


def ensure_cc(name):
    """Load tcp_<name> if needed; LabError if the algorithm is missing."""
    if name in available_cc():
        return
    _run(["modprobe", "-q", f"tcp_{name}"], check=False)
    if name not in available_cc():
        raise LabError(f"congestion control {name!r} is not available "
                       f"(modprobe tcp_{name} failed; is the module "
                       f"installed?)")


def _pid_alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def cleanup_stale():
    """Delete lab namespaces left behind by processes that have died."""
    stale = []
    with contextlib.suppress(FileNotFoundError):
        for name in os.listdir("/run/netns"):
            if not name.startswith(NETNS_PREFIX):
                continue
            pid = name[len(NETNS_PREFIX):].split("-")[0]
            if pid.isdigit() and not _pid_alive(int(pid)):
                stale.append(f"netns del {name}")
    if stale:
        _run(["ip", "-force", "-batch", "-"], check=False,
             stdin="\n".join(stale) + "\n")


class Topology:
    """Namespaces, veths and qdiscs of one experiment.

    Build with ``with Topology(link, flows) as topo:`` (or build() and
    destroy()); the live-change methods may be called from run() events.
    """

    def __init__(self, link, flows):
        self.link = link
        self.flows = list(flows)
        prefix = f"{NETNS_PREFIX}{os.getpid()}-{next(_topology_ids)}"
        self.router = f"{prefix}-r"
        self.receiver = f"{prefix}-d"
        self.senders = [f"{prefix}-s{i}" for i in range(len(self.flows))]
        self.rate_mbit = link.rate_mbit
        self.rtt_ms = link.rtt_ms
        self.loss_pct = link.loss_pct
        self.buffer_bytes = link.buffer_bytes
        self.policer = None

    def __enter__(self):
        self.build()
        return self

    def __exit__(self, *exc):
        self.destroy()

    @property
    def namespaces(self):
        return [self.router, self.receiver] + self.senders

    def build(self):
        """Create namespaces, links, addresses, routes and qdiscs."""
        if len(self.flows) > 250:
            raise LinkError("flows", "at most 250 flows")
        for flow in self.flows:
            ensure_cc(flow.cc)
        try:
            _run_batches([(["ip", "-batch", "-"], self._link_cmds())])
            _run_batches(self._config_batches())
            self._configure_in_process()
        except BaseException:
            self.destroy()
            raise

    def _link_cmds(self):
        cmds = [f"netns add {ns}" for ns in self.namespaces]
        for i, ns in enumerate(self.senders):
            cmds.append(f"link add eth0 netns {ns} type veth "
                        f"peer name s{i} netns {self.router}")
        cmds.append(f"link add dst netns {self.router} type veth "
                    f"peer name eth0 netns {self.receiver}")
        return cmds

    def _config_batches(self):
        batches = [(["ip", "-n", self.router, "-batch", "-"],
                    self._router_ip_cmds()),
                   (["tc", "-n", self.router, "-batch", "-"],
                    self._router_tc_cmds()),
                   (["ip", "-n", self.receiver, "-batch", "-"],
                    ["link set lo up", "link set eth0 up",
                     f"addr add {RECEIVER_ADDR}/24 dev eth0",
                     "route add default via 10.78.0.1"])]
        if self.link.up_rate_mbit:
            batches.append((["tc", "-n", self.receiver, "-batch", "-"],
                            [self._ack_tbf_cmd()]))
        if self.loss_pct:
            batches += [(["tc", "-n", ns, "-batch", "-"], [self._loss_cmd()])
                        for ns in self.senders]
        for i, flow in enumerate(self.flows):
            congctl = f" congctl {flow.cc}" if flow.select == "route" else ""
            batches.append((["ip", "-n", self.senders[i], "-batch", "-"], [
                "link set lo up", "link set eth0 up",
                f"addr add 10.77.{i + 1}.2/24 dev eth0",
                f"route add default via 10.77.{i + 1}.1{congctl}"]))
        return batches

    def _router_ip_cmds(self):
        cmds = ["link set lo up", "link set dst up",
                "addr add 10.78.0.1/24 dev dst"]
        for i in range(len(self.flows)):
            cmds += [f"link set s{i} up",
                     f"addr add 10.77.{i + 1}.1/24 dev s{i}"]
        return cmds

    def _router_tc_cmds(self):
        cmds = [f"qdisc add dev dst root handle 10: {self._tbf_args()}"]
        cmds += [f"qdisc add dev s{i} root {self._ack_netem_args(flow)}"
                 for i, flow in enumerate(self.flows)]
        cmds += [f"qdisc add dev s{i} ingress_block 7 ingress"
                 for i in range(len(self.flows))]
        if self.link.policer_mbit:
            cmds.append(self._policer_cmd(self.link.policer_mbit,
                                          self.link.policer_burst))
            self.policer = (self.link.policer_mbit, self.link.policer_burst)
        return cmds

    def _ack_tbf_cmd(self):
        up = self.link.up_rate_mbit
        limit = fifo_bytes(self.link.buffer_bdp, up, self.link.rtt_ms)
        return (f"qdisc add dev eth0 root tbf rate {_kbit(up)} "
                f"burst {tbf_burst(up)} limit {limit}")

    def _configure_in_process(self):
        """Sysctls and offloads: no process spawn needed."""
        buffers = {"net.ipv4.tcp_wmem": "4096 16384 67108864",
                   "net.ipv4.tcp_rmem": "4096 131072 67108864"}
        write_sysctls(self.router, {"net.ipv4.ip_forward": "1"})
        write_sysctls(self.receiver, buffers)
        for i, flow in enumerate(self.flows):
            sysctls = dict(buffers)
            if flow.select == "sysctl":
                sysctls["net.ipv4.tcp_congestion_control"] = flow.cc
            sysctls.update(flow.sysctls)
            write_sysctls(self.senders[i], sysctls)
        offloads = self.link.offloads
        devices = [(self.router, "dst"), (self.receiver, "eth0")]
        devices += [(ns, "eth0") for ns in self.senders]
        devices += [(self.router, f"s{i}") for i in range(len(self.flows))]
        for ns, dev in devices:
            set_offloads(ns, dev, offloads)

    def _loss_cmd(self):
        """Random loss on a sender's egress: no delay there, so TCP small
        queues see none, and the bottleneck tbf stays the root qdisc (a
        netem parent made tbf drain at about half its rate under TCG)."""
        return (f"qdisc replace dev eth0 root netem loss {self.loss_pct:g}% "
                f"limit {NETEM_LIMIT}")

    def _ack_netem_args(self, flow):
        return (f"netem delay {_ms(self.rtt_ms + flow.extra_rtt_ms)} "
                f"limit {NETEM_LIMIT}")

    @staticmethod
    def _policer_cmd(rate_mbit, burst):
        return (f"filter add block 7 protocol ip pref 1 matchall action "
                f"police rate {_kbit(rate_mbit)} burst {burst} drop")

    def _tbf_args(self):
        return (f"tbf rate {_kbit(self.rate_mbit)} "
                f"burst {tbf_burst(self.rate_mbit)} limit {self.buffer_bytes}")

    def _tc(self, *cmds):
        _run_batches([(["tc", "-n", self.router, "-batch", "-"], list(cmds))])

    def set_rate(self, rate_mbit):
        """Change the bottleneck rate (the FIFO keeps its size in bytes)."""
        Link(rate_mbit=rate_mbit, rtt_ms=self.rtt_ms)
        self.rate_mbit = rate_mbit
        self._tc(f"qdisc change dev dst root handle 10: {self._tbf_args()}")

    def set_buffer(self, nbytes):
        """Resize the bottleneck FIFO to ``nbytes`` bytes."""
        _require(isinstance(nbytes, int) and nbytes >= FRAME_BYTES,
                 "buffer_bytes", f"must be >= {FRAME_BYTES}, got {nbytes!r}")
        self.buffer_bytes = nbytes
        self._tc(f"qdisc change dev dst root handle 10: {self._tbf_args()}")

    def set_rtt(self, rtt_ms):
        """Change the base RTT of every flow (extra_rtt_ms is kept)."""
        Link(rate_mbit=self.rate_mbit, rtt_ms=rtt_ms)
        self.rtt_ms = rtt_ms
        self._tc(*[f"qdisc change dev s{i} root {self._ack_netem_args(flow)}"
                   for i, flow in enumerate(self.flows)])

    def set_loss(self, loss_pct):
        """Change the random loss of data packets."""
        Link(rate_mbit=self.rate_mbit, rtt_ms=self.rtt_ms, loss_pct=loss_pct)
        self.loss_pct = loss_pct
        _run_batches([(["tc", "-n", ns, "-batch", "-"], [self._loss_cmd()])
                      for ns in self.senders])

    def set_policer(self, rate_mbit, burst=20000):
        """Install (or replace) the policer shared by all flows."""
        Link(rate_mbit=self.rate_mbit, rtt_ms=self.rtt_ms,
             policer_mbit=rate_mbit, policer_burst=burst)
        cmds = [self._policer_cmd(rate_mbit, burst)]
        if self.policer:
            cmds.insert(0, "filter del block 7 protocol ip pref 1")
        self._tc(*cmds)
        self.policer = (rate_mbit, burst)

    def remove_policer(self):
        """Remove the policer (the empty ingress qdiscs stay)."""
        if self.policer:
            self._tc("filter del block 7 protocol ip pref 1")
            self.policer = None

    def layout(self):
        """``tc qdisc show`` of the router (and receiver), and the policer."""
        proc = _run(["tc", "-n", self.router, "-batch", "-"], check=False,
                    stdin="qdisc show\nfilter show block 7\n")
        out = [f"[router] {line}" for line in proc.stdout.splitlines()]
        if self.link.up_rate_mbit:
            proc = _run(["tc", "-n", self.receiver, "qdisc", "show", "dev",
                         "eth0"], check=False)
            out += [f"[receiver] {line}" for line in proc.stdout.splitlines()]
        return "\n".join(out)

    def destroy(self):
        """Delete every namespace of this topology (idempotent)."""
        cmds = [f"netns del {ns}" for ns in self.namespaces
                if os.path.exists(f"/run/netns/{ns}")]
        if cmds:
            _run(["ip", "-force", "-batch", "-"], check=False,
                 stdin="\n".join(cmds) + "\n")


class _Recorder:
    """Samples tcp_info of every flow and the bottleneck qdisc."""

    TBF_HANDLE = 0x00100000        # tc handle "10:" (hex)

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
            if q["handle"] == self.TBF_HANDLE and q["kind"] == "tbf":
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


def _cpu_times():
    with open("/proc/stat") as f:
        fields = [int(x) for x in f.readline().split()[1:]]
    idle = fields[3] + fields[4]
    return sum(fields), idle


class _Traffic:
    """iperf3 servers and clients of one run, with their JSON outputs."""

    def __init__(self, topo, workdir):
        self.topo = topo
        self.workdir = workdir
        self.servers = []
        self.clients = {}

    def _spawn(self, netns, args, name):
        out = open(os.path.join(self.workdir, name), "w")
        with out:
            return subprocess.Popen(
                ["iperf3"] + args, stdout=out, stderr=subprocess.STDOUT,
                start_new_session=True,
                preexec_fn=lambda: netlink.enter_netns(netns))

    def start_servers(self):
        for i in range(len(self.topo.flows)):
            self.servers.append(self._spawn(
                self.topo.receiver,
                ["-s", "-1", "-J", "-B", RECEIVER_ADDR,
                 "-p", str(BASE_PORT + i)], f"server{i}"))
        sock = netlink.socket_in_netns(self.topo.receiver,
                                       netlink.NETLINK_SOCK_DIAG)
        wanted = {BASE_PORT + i for i in range(len(self.topo.flows))}
        deadline = time.monotonic() + 30
        with sock:
            while time.monotonic() < deadline:
                listening = {s["sport"] for s in netlink.tcp_sockets(
                    sock, 1 << netlink.TCP_LISTEN_STATE)}
                if wanted <= listening:
                    return
                time.sleep(0.05)
        raise LabError("iperf3 servers did not start listening within 30 s")

    def start_client(self, i, seconds):
        flow = self.topo.flows[i]
        args = ["-c", RECEIVER_ADDR, "-p", str(BASE_PORT + i),
                "--cport", str(BASE_CPORT + i), "-t", str(seconds), "-J",
                "-i", "0"]
        if flow.select == "setsockopt":
            args += ["-C", flow.cc]
        self.clients[i] = self._spawn(self.topo.senders[i], args,
                                      f"client{i}")

    def running(self):
        return [i for i, p in self.clients.items() if p.poll() is None]

    def stop(self, timeout):
        """Wait up to ``timeout`` s for every iperf3, then kill the rest."""
        deadline = time.monotonic() + timeout
        for proc in list(self.clients.values()) + self.servers:
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(max(0.1, deadline - time.monotonic()))
            if proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()

    def summary(self, i):
        """Sender/receiver byte counts from flow i's iperf3 client JSON."""
        try:
            with open(os.path.join(self.workdir, f"client{i}")) as f:
                data = json.load(f)
        except (OSError, ValueError) as exc:
            return {"error": f"no iperf3 JSON: {exc}"}
        if data.get("error"):
            return {"error": data["error"]}
        end = data.get("end", {})
        return {"sent_bytes": end.get("sum_sent", {}).get("bytes"),
                "received_bytes": end.get("sum_received", {}).get("bytes"),
                "retransmits": end.get("sum_sent", {}).get("retransmits")}


def flow_duration(flow, duration_s):
    """The flow's own duration: its duration_s or the rest of the run."""
    seconds = flow.duration_s if flow.duration_s is not None \
        else duration_s - flow.start_s
    if seconds <= 0:
        raise LinkError("start_s", f"flow starts at {flow.start_s} s, after "
                        f"the run's end ({duration_s} s)")
    return seconds


def run(link, flows, duration_s, events=None, sample_ms=100,
        measure_from_s=0):
    """Run ``flows`` over ``link`` for ``duration_s`` seconds; see module doc.

    Returns a Result. Always removes the namespaces and processes it made.
    """
    _require(_is_number(duration_s) and duration_s > 0, "duration_s",
             f"must be > 0, got {duration_s!r}")
    _require(isinstance(sample_ms, int) and 10 <= sample_ms <= 10000,
             "sample_ms", f"must be an integer in 10..10000, got "
             f"{sample_ms!r}")
    _require(_is_number(measure_from_s) and 0 <= measure_from_s <
             duration_s, "measure_from_s", f"must be >= 0 and below "
             f"duration_s = {duration_s}, got {measure_from_s!r}")
    _require(len(flows) >= 1, "flows", "at least one flow")
    durations = [flow_duration(f, duration_s) for f in flows]
    events = sorted(events or [], key=lambda e: e[0])
    cleanup_stale()
    workdir = tempfile.mkdtemp(prefix="copalab-")
    try:
        with Topology(link, flows) as topo:
            traffic = _Traffic(topo, workdir)
            recorder = _Recorder(topo)
            try:
                traffic.start_servers()
                cpu, lag = _drive(topo, traffic, recorder, durations,
                                  duration_s, events, sample_ms / 1000.0)
                layout = topo.layout()
            finally:
                traffic.stop(FLOW_GRACE_S)
                recorder.close()
            iperf = [traffic.summary(i) for i in range(len(flows))]
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    return _result(link, flows, durations, duration_s, sample_ms, recorder,
                   iperf, (cpu, lag), layout, events, measure_from_s)


def _drive(topo, traffic, recorder, durations, duration_s, events, step):
    """The run's clock: start flows, fire events, sample until the run's
    end and until every iperf3 client has finished (each flow's window
    starts when its connection does, a little after its start time).

    Returns (cpu_busy, p95 lateness of the sampling ticks in ms): a busy
    or starved machine shows up in both, and its figures are suspect.
    """
    flows = topo.flows
    pending = sorted(range(len(flows)), key=lambda i: flows[i].start_s)
    events = list(events)
    cpu0 = _cpu_times()
    t0 = time.monotonic()
    tick = 0
    lags = []
    while True:
        t = time.monotonic() - t0
        while pending and flows[pending[0]].start_s <= t:
            i = pending.pop(0)
            traffic.start_client(i, int(math.ceil(durations[i])))
        while events and events[0][0] <= t:
            events.pop(0)[1](topo)
        running = traffic.running()
        recorder.sample(t, running)
        if t >= duration_s and (not running or
                                t >= duration_s + FLOW_GRACE_S):
            break
        tick += 1
        time.sleep(max(0.0, t0 + tick * step - time.monotonic()))
        lags.append((time.monotonic() - t0 - tick * step) * 1000)
    cpu1 = _cpu_times()
    total = cpu1[0] - cpu0[0]
    busy = 1 - (cpu1[1] - cpu0[1]) / total if total else None
    return busy, metrics.percentile(lags, 95)


def _flow_result(i, flow, seconds, link, samples, cc_seen, iperf,
                 measure_from_s=0):
    base = link.rtt_ms + flow.extra_rtt_ms
    figures = metrics.flow_figures(samples, seconds, base,
                                   link.capacity_mbit, measure_from_s)
    columns = ["t", "bytes_acked", "bytes_retrans", "rtt_us", "cwnd",
               "state"] + (["mode"] if any("mode" in s for s in samples)
                           else [])
    raw = {key: [s.get(key) for s in samples] for key in columns}
    return FlowResult(
        index=i, cc=flow.cc, select=flow.select, sysctls=flow.sysctls,
        start_s=flow.start_s, duration_s=seconds, base_rtt_ms=base,
        cc_observed=cc_seen, iperf=iperf, samples=raw,
        measure_from_s=measure_from_s, **figures)


def _link_stats(link, duration_s, flow_results, samples, measure_from_s=0):
    """Bottleneck figures over [measure_from_s, duration_s] of the run;
    the backlog series covers the whole run."""
    every = metrics.in_window(samples, 0, duration_s)
    samples = metrics.in_window(samples, measure_from_s, duration_s)
    goodput_bytes = 0.0
    for fr in flow_results:
        if fr.throughput_mbit is not None:
            end = fr.start_s + fr.duration_s
            seconds = max(0.0, end - max(fr.start_s, measure_from_s))
            goodput_bytes += fr.throughput_mbit * 1e6 / 8 * seconds
    delays = [metrics.backlog_delay_ms(s["backlog"], s["rate_mbit"])
              for s in samples]
    dist = metrics.distribution(delays)
    wire = metrics.counter_rate_mbit(samples, "bytes")
    return LinkStats(
        utilisation=metrics.utilisation(
            metrics.mbit_per_s(goodput_bytes, duration_s - measure_from_s),
            link.capacity_mbit),
        wire_utilisation=metrics.utilisation(wire, link.capacity_mbit),
        drops=samples[-1]["drops"] if samples else None,
        qdelay_mean_ms=dist["mean"], qdelay_p50_ms=dist["p50"],
        qdelay_p95_ms=dist["p95"],
        backlog={"t": [round(s["t"], 3) for s in every],
                 "bytes": [s["backlog"] for s in every]},
        measure_from_s=measure_from_s)


def _result(link, flows, durations, duration_s, sample_ms, recorder, iperf,
            load, layout, events, measure_from_s=0):
    flow_results = [
        _flow_result(i, f, durations[i], link, recorder.flow_samples[i],
                     recorder.cc_seen[i], iperf[i], measure_from_s)
        for i, f in enumerate(flows)]
    throughputs = [fr.throughput_mbit or 0.0 for fr in flow_results]
    return Result(
        link=link, duration_s=duration_s, sample_ms=sample_ms,
        flows=flow_results,
        link_stats=_link_stats(link, duration_s, flow_results,
                               recorder.link_samples, measure_from_s),
        jain_index=metrics.jain_index(throughputs) if len(flows) > 1
        else None,
        cpu_busy=load[0], sample_lag_p95_ms=load[1],
        kernel=os.uname().release, layout=layout,
        events=[(t, getattr(fn, "__name__", repr(fn))) for t, fn in events])


def format_table(result):
    """A plain-text table of the per-flow figures of ``result``."""
    head = (f"{'flow':>4} {'cc':<14} {'Mbit/s':>7} {'util':>6} "
            f"{'qdelay mean':>11} {'p95 ms':>7} {'retrans':>8}")
    rows = [head]
    for fr in result.flows:
        rows.append(
            f"{fr.index:>4} {fr.cc:<14} {_fmt(fr.throughput_mbit, 2):>7} "
            f"{_fmt(fr.utilisation, 3):>6} {_fmt(fr.qdelay_mean_ms, 1):>11} "
            f"{_fmt(fr.qdelay_p95_ms, 1):>7} "
            f"{_fmt(fr.retrans_overhead, 4):>8}")
    ls = result.link_stats
    rows.append(f"link: util {_fmt(ls.utilisation, 3)} wire "
                f"{_fmt(ls.wire_utilisation, 3)} backlog delay mean "
                f"{_fmt(ls.qdelay_mean_ms, 1)} p95 {_fmt(ls.qdelay_p95_ms, 1)}"
                f" ms, drops {ls.drops}, jain {_fmt(result.jain_index, 3)}, "
                f"cpu busy {_fmt(result.cpu_busy, 2)}, tick lag p95 "
                f"{_fmt(result.sample_lag_p95_ms, 1)} ms")
    return "\n".join(rows)


def _fmt(value, digits):
    return "-" if value is None else f"{value:.{digits}f}"
