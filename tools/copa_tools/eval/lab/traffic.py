# SPDX-License-Identifier: GPL-2.0
"""The traffic of one experiment: an iperf3 server per flow in the
receiver namespace and, when the flow starts, its iperf3 client in the
flow's sender namespace, each writing its JSON into a work directory."""

import contextlib
import json
import os
import signal
import subprocess
import time

from ... import netlink
from .config import LabError
from .topology import RECEIVER_ADDR

BASE_PORT = 5201
BASE_CPORT = 20001          # client data ports, below the ephemeral range
FLOW_GRACE_S = 8.0          # iperf3 start-up and shutdown under TCG


class Traffic:
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
