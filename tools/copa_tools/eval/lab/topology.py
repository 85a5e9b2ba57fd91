# SPDX-License-Identifier: GPL-2.0
"""Namespaces, links and qdiscs of one experiment: Topology builds them
from a Link and its Flows, changes them live and deletes them.

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
import math
import os
import socket
import struct
import subprocess

from ... import bpf, netlink
from .config import FRAME_BYTES, LabError, Link, LinkError, fifo_bytes, \
    require

NETNS_PREFIX = "copalab-"
NETEM_LIMIT = 100000        # packets; netem only delays, never queues
RECEIVER_ADDR = "10.78.0.2"
TBF_HANDLE = 0x00100000     # the bottleneck tbf's tc handle "10:" (hex)

_topology_ids = iter(range(1 << 30))


def run_cmd(cmd, check=True, stdin=None):
    proc = subprocess.run(cmd, capture_output=True, text=True, input=stdin)
    if check and proc.returncode:
        raise LabError(f"{' '.join(cmd)}: {proc.stderr.strip()[-800:]}")
    return proc


def run_batches(batches):
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


available_cc = bpf.available   # what the stack offers now


def ensure_cc(name):
    """Load tcp_<name>, or register the BPF build for bpf_copa and
    bpf_copa_pol, if needed; LabError if the algorithm is missing."""
    if name in available_cc():
        return
    if name in bpf.NAMES:
        try:
            bpf.ensure_registered()
        except bpf.BpfError as exc:
            raise LabError(f"congestion control {name!r}: {exc}") from exc
        return
    run_cmd(["modprobe", "-q", f"tcp_{name}"], check=False)
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
        run_cmd(["ip", "-force", "-batch", "-"], check=False,
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
            run_batches([(["ip", "-batch", "-"], self._link_cmds())])
            run_batches(self._config_batches())
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
        run_batches([(["tc", "-n", self.router, "-batch", "-"], list(cmds))])

    def set_rate(self, rate_mbit):
        """Change the bottleneck rate (the FIFO keeps its size in bytes)."""
        Link(rate_mbit=rate_mbit, rtt_ms=self.rtt_ms)
        self.rate_mbit = rate_mbit
        self._tc(f"qdisc change dev dst root handle 10: {self._tbf_args()}")

    def set_buffer(self, nbytes):
        """Resize the bottleneck FIFO to ``nbytes`` bytes."""
        require(isinstance(nbytes, int) and nbytes >= FRAME_BYTES,
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
        run_batches([(["tc", "-n", ns, "-batch", "-"], [self._loss_cmd()])
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
        proc = run_cmd(["tc", "-n", self.router, "-batch", "-"], check=False,
                       stdin="qdisc show\nfilter show block 7\n")
        out = [f"[router] {line}" for line in proc.stdout.splitlines()]
        if self.link.up_rate_mbit:
            proc = run_cmd(["tc", "-n", self.receiver, "qdisc", "show", "dev",
                           "eth0"], check=False)
            out += [f"[receiver] {line}" for line in proc.stdout.splitlines()]
        return "\n".join(out)

    def destroy(self):
        """Delete every namespace of this topology (idempotent)."""
        cmds = [f"netns del {ns}" for ns in self.namespaces
                if os.path.exists(f"/run/netns/{ns}")]
        if cmds:
            run_cmd(["ip", "-force", "-batch", "-"], check=False,
                    stdin="\n".join(cmds) + "\n")
