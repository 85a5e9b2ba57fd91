# SPDX-License-Identifier: GPL-2.0
"""Helpers for the native (host kernel) tests and scripts/bpf-bench: veth
namespaces, iperf3, dmesg (copa_tools.kernel_log says which lines fail a
test); copa-bpf and the checks of kernel, BTF and
build tools are copa_tools.bpf's. Every address used is inside the
namespaces created here (198.18.0.0/15, the benchmarking range)."""
import json
import os
import shutil
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tools"))
from copa_tools import bpf, kernel_log, params  # noqa: E402,F401
from copa_tools.bpf import copa_bpf  # noqa: E402

CGROUP2 = next((p for p in ("/sys/fs/cgroup/unified", "/sys/fs/cgroup")
                if os.path.exists(os.path.join(p, "cgroup.subtree_control"))),
               None)
# Client ports the tests pass to Pair.iperf(cport=...), reserved in the
# sender's namespace.
CPORTS = "41000-41099"


def run(*cmd, check=True, **kw):
    return subprocess.run([str(c) for c in cmd], check=check, text=True,
                          capture_output=True, **kw)


def struct_ops_unavailable():
    """None if this host can run BPF struct_ops congestion controls, else
    the reason: root, copa_tools.bpf's checks (kernel, BTF, build tools),
    the tools the flows use and the kernel's struct_ops."""
    if os.geteuid() != 0:
        return "needs root"
    why = bpf.unsupported_reason()
    if why:
        return why
    for tool in ("iperf3", "ip", "tc"):
        if not shutil.which(tool):
            return f"{tool} not installed (scripts/deps bpf)"
    kallsyms = open("/proc/kallsyms").read()
    if " bpf_tcp_ca_init" not in kallsyms and "bpf_tcp_congestion_ops" not in kallsyms:
        return "kernel lacks BPF struct_ops tcp_congestion_ops"
    return None


def dmesg_lines():
    return run("dmesg").stdout.splitlines()


class Pair:
    """Sender and receiver namespaces joined by veth. The receiver has
    one address per prefix: 198.18.<i>.2, the sender 198.18.<i>.1."""

    def __init__(self, tag, prefixes=1):
        self.snd, self.rcv = f"cpb-s-{tag}", f"cpb-r-{tag}"
        self.sdev, self.rdev = f"cpbs{tag}"[:15], f"cpbr{tag}"[:15]
        self.prefixes = prefixes
        self.servers = []

    def __enter__(self):
        self.close()
        run("ip", "netns", "add", self.snd)
        run("ip", "netns", "add", self.rcv)
        run("ip", "link", "add", self.sdev, "netns", self.snd, "type", "veth",
            "peer", "name", self.rdev, "netns", self.rcv)
        for ns, dev, host in ((self.snd, self.sdev, 1), (self.rcv, self.rdev, 2)):
            for i in range(self.prefixes):
                run("ip", "-n", ns, "addr", "add", f"198.18.{i}.{host}/24",
                    "dev", dev)
            run("ip", "-n", ns, "link", "set", dev, "up")
            run("ip", "-n", ns, "link", "set", "lo", "up")
        # The tests name their flows by client port (iperf3 --cport, the
        # copa_flows key). Keep those ports out of the ephemeral range:
        # a control connection given one of them, still in TIME_WAIT to
        # the same server, made a later --cport connect fail with
        # EADDRINUSE.
        run("ip", "netns", "exec", self.snd, "sysctl", "-qw",
            f"net.ipv4.ip_local_reserved_ports={CPORTS}")
        return self

    def dst(self, i=0):
        return f"198.18.{i}.2"

    def sx(self, *cmd, **kw):
        return run("ip", "netns", "exec", self.snd, *cmd, **kw)

    def rx(self, *cmd, **kw):
        return run("ip", "netns", "exec", self.rcv, *cmd, **kw)

    def server(self, port=5201):
        p = subprocess.Popen(["ip", "netns", "exec", self.rcv, "iperf3", "-s",
                              "-p", str(port)], stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL)
        self.servers.append(p)
        for _ in range(50):
            if f":{port}" in self.rx("ss", "-ltn").stdout:
                return p
            time.sleep(0.1)
        raise RuntimeError("iperf3 server did not start")

    def iperf(self, dst, port=5201, secs=2, cc=None, cport=None, cgroup=None,
              extra=()):
        """One iperf3 flow from the sender; returns iperf3's JSON."""
        cmd = ["ip", "netns", "exec", self.snd, "iperf3", "-c", dst, "-p",
               str(port), "-t", str(secs), "-J"]
        if cc:
            cmd += ["-C", cc]
        if cport:
            cmd += ["--cport", str(cport)]
        cmd += list(extra)
        if cgroup:
            cmd = ["sh", "-c", 'echo $$ > "$0"/cgroup.procs && exec "$@"',
                   cgroup] + cmd
        r = run(*cmd, check=False, timeout=secs + 30)
        out = json.loads(r.stdout) if r.stdout.strip() else {}
        if r.returncode or "error" in out:
            raise RuntimeError(f"iperf3 failed: {out.get('error') or r.stderr}")
        return out

    def close(self):
        for p in self.servers:
            p.terminate()
            p.wait()
        self.servers = []
        for ns in (self.snd, self.rcv):
            run("ip", "netns", "del", ns, check=False)

    def __exit__(self, *exc):
        self.close()


def sender_cc(result):
    return result["end"].get("sender_tcp_congestion")


def gbps(result):
    return result["end"]["sum_sent"]["bits_per_second"] / 1e9


def flows(**match):
    """The copa_flows records whose fields have the values in @match."""
    return [f for f in json.loads(copa_bpf("flows", "--json").stdout)
            if all(f[k] == v for k, v in match.items())]


def flow(sport):
    """The copa_flows record of the flow from local port @sport."""
    return next(iter(flows(sport=sport)), None)
