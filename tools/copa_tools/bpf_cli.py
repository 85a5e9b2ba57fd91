# SPDX-License-Identifier: GPL-2.0
"""Load, configure and observe the BPF build of Copa (bpf/, make bpf).

  copa-bpf build                    build both objects for this kernel
  copa-bpf register                 register bpf_copa and bpf_copa_pol
  copa-bpf unregister               unregister both, remove the pins
  copa-bpf get                      show the defaults (.data.params)
  copa-bpf set NAME VALUE           set one default, e.g. set delta 0.1
  copa-bpf sockops attach CGROUP    load bpf/copa_sockops.bpf.o, attach it
  copa-bpf sockops detach CGROUP    detach and unpin it
  copa-bpf prefix add PREFIX [cc=NAME] [delta=D] [competitive=0|1]
                                    [loss_reaction=P]
  copa-bpf prefix del PREFIX
  copa-bpf prefix list
  copa-bpf flows                    what each flow runs with (copa_flows)
  copa-bpf stats                    the counters of both objects

Values are parsed and range-checked as the module's sysctls are, with
the ranges of tcp_copa_params.h (listed below); anything else fails with
EINVAL and changes nothing. Everything goes through bpftool; CGROUP is a
cgroup v2 directory.

The objects are in bpf/ of a source tree (make bpf, or build); an
installed copa-tools builds them into /var/lib/copa-tools/bpf, from the
sources it ships. COPA_BPF_DIR names another directory for build to fill
and the others to read; COPA_BPF_OBJ another tcp_copa.bpf.o to register
(one built for another kernel).
"""
import errno
import ipaddress
import json
import os
import re
import struct
import subprocess
import sys

from . import bpf as copa_bpf
from . import params as copa_params
from . import paths

# A source tree builds in place; copa-tools, under /usr, where it may not
# write, in its state directory.
STATE_DIR = os.environ.get("COPA_BPF_DIR") or paths.source_tree() or \
    "/var/lib/copa-tools"
BPF_DIR = os.path.join(STATE_DIR, "bpf")
CC_OBJ = os.environ.get("COPA_BPF_OBJ") or os.path.join(BPF_DIR,
                                                        "tcp_copa.bpf.o")
SOCKOPS_OBJ = os.path.join(BPF_DIR, "copa_sockops.bpf.o")
BPFFS = "/sys/fs/bpf"
PIN_SOCKOPS = BPFFS + "/copa_sockops"
PINNED_MAPS = ("copa_flows", "copa_sk_params", "copa_prefix")
CC_NAMES = ("bpf_copa", "bpf_copa_pol")

PARAMS = copa_params.load()
# struct copa_bpf_defaults (bpf/copa_bpf.h), in order: one u32 for each
# tunable of tcp_copa_params.h, tcp_copa's, tcp_copa_policer's, then the
# BPF build's own. name -> copa_params.Tunable
DEFAULTS = {name: t for group in ("tcp_copa", "tcp_copa_policer", "bpf")
            for name, t in PARAMS.tunables[group].items()}
# struct copa_sk_params: set, then tcp_copa's tunables in order, each
# with its set bit
SET_BITS = {name: 1 << i for i, name in enumerate(PARAMS.tunables["tcp_copa"])}
SK_PARAMS = f"={1 + len(SET_BITS)}I"
SK_PARAMS_LEN = struct.calcsize(SK_PARAMS)
CC_NAME_LEN = 16
# The maps' fields are host-endian (bpf/copa_bpf.h): the struct formats
# below are "=", native order with standard sizes.
SRC_NAMES = {0: "default", 1: "override", 2: "rejected"}
# sk_pacing_status (enum sk_pacing): who paces the flow
PACING_NAMES = {0: "none", 1: "tcp", 2: "fq"}
MODE_NAMES = PARAMS.modes


class Error(Exception):
    def __init__(self, msg, code=1):
        super().__init__(msg)
        self.code = code


def parse_value(name, text):
    """Parse as the sysctls do (tcp_copa.c: copa_tunable_parse): white
    space around one unsigned value; "milli" values take up to three
    decimals."""
    if name not in DEFAULTS:
        raise Error(f"unknown parameter {name!r}", errno.EINVAL)
    lo, hi, milli = DEFAULTS[name].min, DEFAULTS[name].max, \
        DEFAULTS[name].milli
    m = re.fullmatch(r"(\d*)(?:\.(\d{0,3}))?" if milli else r"(\d+)()",
                     text.strip(" \t\n\v\f\r"))
    if m and (m.group(1) or m.group(2)):
        v = int(m.group(1) or "0") * (1000 if milli else 1)
        v += int((m.group(2) or "").ljust(3, "0")) if milli else 0
        if lo <= v <= hi:
            return v
    raise Error(f"{name}: invalid value {text!r}: {os.strerror(errno.EINVAL)}",
                errno.EINVAL)


def fmt_value(name, v):
    if name not in DEFAULTS or not DEFAULTS[name].milli:
        return str(v)
    return f"{v // 1000}.{v % 1000:03d}".rstrip("0").rstrip(".")


def bpftool(*args, json_out=False, check=True):
    cmd = ["bpftool"] + (["-j"] if json_out else []) + [str(a) for a in args]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if check and r.returncode:
        raise Error(f"{' '.join(cmd)}: {r.stderr.strip() or r.stdout.strip()}")
    if json_out:
        return json.loads(r.stdout) if r.stdout.strip() else None
    return r


def ensure_bpffs():
    with open("/proc/mounts") as f:
        if any(line.split()[1] == BPFFS and line.split()[2] == "bpf"
               for line in f):
            return
    subprocess.run(["mount", "-t", "bpf", "bpf", BPFFS], check=True)


def hexbytes(b):
    return ["hex"] + [f"{x:02x}" for x in b]


def raw(v):
    return bytes(int(x, 16) for x in v)


def find_map(name):
    """The newest map called @name (the one the registered CCs use)."""
    maps = [m for m in bpftool("map", "show", json_out=True) or []
            if m.get("name") == name]
    if not maps:
        raise Error(f"no map {name}: is bpf_copa registered (copa-bpf register)?")
    return max(m["id"] for m in maps)


def registered():
    """Our CCs the stack offers now. (bpftool struct_ops show also lists
    an unregistered one that sockets still hold.)"""
    with open("/proc/sys/net/ipv4/tcp_available_congestion_control") as f:
        avail = f.read().split()
    return [n for n in CC_NAMES if n in avail]


# ---------------------------------------------------------------------------

def cmd_build(args):
    if args:
        raise Error("usage: copa-bpf build", errno.EINVAL)
    try:
        work = copa_bpf.build(STATE_DIR, targets=("all",))
    except copa_bpf.BpfError as e:
        raise Error(str(e))
    print(f"built {work}/tcp_copa.bpf.o and copa_sockops.bpf.o for "
          f"{os.uname().release}")


def cmd_register(args):
    ensure_bpffs()
    if not os.path.exists(CC_OBJ):
        raise Error(f"{CC_OBJ} missing: run copa-bpf build", errno.ENOENT)
    for name in registered():
        raise Error(f"{name} is already registered (copa-bpf unregister)",
                    errno.EEXIST)
    r = bpftool("struct_ops", "register", CC_OBJ, check=False)
    sys.stdout.write(r.stdout)
    if r.returncode or set(registered()) != set(CC_NAMES):
        raise Error(f"register failed: {r.stderr.strip()}")


def registered_ids():
    """(id, name) of our struct_ops maps that are registered (INUSE). An
    unregistered map that sockets still hold (TOBEFREE) may share the
    name, so unregister goes by id."""
    out, info = [], None
    for e in bpftool("struct_ops", "dump", json_out=True, check=False) or []:
        if "bpf_map_info" in e:
            info = e["bpf_map_info"]
            continue
        ops = e.get("bpf_struct_ops_tcp_congestion_ops") or {}
        state = ops.get("common", ops).get("state")
        if info and info.get("name") in CC_NAMES and \
                state == "BPF_STRUCT_OPS_STATE_INUSE":
            out.append((info["id"], info["name"]))
        info = None
    return out


def cmd_unregister(args):
    for mid, name in registered_ids():
        bpftool("struct_ops", "unregister", "id", mid)
        print(f"unregistered {name} (map id {mid})")
    for m in PINNED_MAPS:
        if m != "copa_prefix" or not os.path.exists(PIN_SOCKOPS):
            try:
                os.unlink(os.path.join(BPFFS, m))
            except FileNotFoundError:
                pass


def read_defaults():
    mid = find_map(".data.params")
    v = raw(bpftool("map", "lookup", "id", mid, "key", 0, 0, 0, 0,
                    json_out=True)["value"])
    vals = struct.unpack(f"={len(DEFAULTS)}I", v[:4 * len(DEFAULTS)])
    return mid, dict(zip(DEFAULTS, vals))


def cmd_get(args):
    _, d = read_defaults()
    for k, v in d.items():
        print(f"{k} = {fmt_value(k, v)}")


def cmd_set(args):
    if len(args) != 2:
        raise Error("usage: copa-bpf set NAME VALUE")
    v = parse_value(args[0], args[1])
    mid, d = read_defaults()
    d[args[0]] = v
    val = struct.pack(f"={len(DEFAULTS)}I", *d.values())
    bpftool("map", "update", "id", mid, "key", 0, 0, 0, 0,
            "value", *hexbytes(val))


def cmd_sockops(args):
    if len(args) != 2 or args[0] not in ("attach", "detach"):
        raise Error("usage: copa-bpf sockops attach|detach CGROUP")
    cg = args[1]
    if args[0] == "attach":
        ensure_bpffs()
        if not os.path.exists(SOCKOPS_OBJ):
            raise Error(f"{SOCKOPS_OBJ} missing: run copa-bpf build",
                        errno.ENOENT)
        if not os.path.exists(PIN_SOCKOPS):
            bpftool("prog", "load", SOCKOPS_OBJ, PIN_SOCKOPS, "type", "sockops")
        bpftool("cgroup", "attach", cg, "sock_ops", "pinned", PIN_SOCKOPS)
        return
    bpftool("cgroup", "detach", cg, "sock_ops", "pinned", PIN_SOCKOPS,
            check=False)
    for p in (PIN_SOCKOPS, BPFFS + "/copa_prefix", BPFFS + "/copa_ab",
              BPFFS + "/copa_ab_scope", BPFFS + "/copa_ab_arms"):
        try:
            os.unlink(p)
        except FileNotFoundError:
            pass


def prefix_key(text):
    net = ipaddress.ip_network(text, strict=False)
    if net.version == 4:
        addr = ipaddress.IPv6Address("::ffff:" + str(net.network_address))
        plen = 96 + net.prefixlen
    else:
        addr, plen = net.network_address, net.prefixlen
    return struct.pack("=I", plen) + addr.packed


def key_prefix(b):
    plen = struct.unpack("=I", b[:4])[0]
    addr = ipaddress.IPv6Address(b[4:20])
    if addr.ipv4_mapped and plen >= 96:
        return f"{addr.ipv4_mapped}/{plen - 96}"
    return f"{addr}/{plen}"


PIN_PREFIX = BPFFS + "/copa_prefix"


def prefix_value(cc, params):
    """A copa_prefix value: congestion control ``cc`` ("" keeps the
    connection's) and ``params``, {per-prefix parameter: parsed value}."""
    cc = cc.encode()
    if len(cc) >= CC_NAME_LEN:
        raise Error(f"cc={cc.decode()}: 1 to {CC_NAME_LEN - 1} characters",
                    errno.EINVAL)
    vals, st = dict.fromkeys(SET_BITS, 0), 0
    for k, v in params.items():
        if k not in SET_BITS:
            raise Error(f"{k}: not a per-prefix parameter", errno.EINVAL)
        vals[k] = v
        st |= SET_BITS[k]
    return cc.ljust(CC_NAME_LEN, b"\0") + struct.pack(SK_PARAMS, st,
                                                      *vals.values())


def prefix_entries(pin=PIN_PREFIX):
    """copa_prefix's entries: {prefix: (cc, {parameter: value})}, only
    the parameters the entry sets."""
    out = {}
    for e in bpftool("map", "dump", "pinned", pin, json_out=True) or []:
        v = raw(e["value"])
        cc = v[:CC_NAME_LEN].split(b"\0")[0].decode()
        st, *vals = struct.unpack(SK_PARAMS,
                                  v[CC_NAME_LEN:CC_NAME_LEN + SK_PARAMS_LEN])
        out[key_prefix(raw(e["key"]))] = (cc, {
            k: x for (k, bit), x in zip(SET_BITS.items(), vals) if st & bit})
    return out


def cmd_prefix(args):
    pin = PIN_PREFIX
    if not args or args[0] not in ("add", "del", "list"):
        raise Error("usage: copa-bpf prefix add|del|list ...")
    if args[0] != "list" and len(args) < 2:
        raise Error(f"usage: copa-bpf prefix {args[0]} PREFIX ...")
    if not os.path.exists(pin):
        raise Error("no copa_prefix map: run copa-bpf sockops attach CGROUP")
    if args[0] == "list":
        for prefix, (cc, params) in prefix_entries(pin).items():
            parts = [f"cc={cc}"] if cc else []
            parts += [f"{k}={fmt_value(k, x)}" for k, x in params.items()]
            print(prefix, " ".join(parts))
        return
    try:
        key = prefix_key(args[1])
    except ValueError as e:
        raise Error(f"{args[1]}: {e}", errno.EINVAL)
    if args[0] == "del":
        bpftool("map", "delete", "pinned", pin, "key", *hexbytes(key))
        return
    cc, params = "", {}
    for a in args[2:]:
        k, eq, v = a.partition("=")
        if not eq:
            raise Error(f"{a!r}: expected NAME=VALUE", errno.EINVAL)
        if k == "cc":
            if not v:
                raise Error(f"cc=: 1 to {CC_NAME_LEN - 1} characters",
                            errno.EINVAL)
            cc = v
            continue
        if k not in SET_BITS:
            raise Error(f"{k}: not a per-prefix parameter", errno.EINVAL)
        params[k] = parse_value(k, v)
    bpftool("map", "update", "pinned", pin, "key", *hexbytes(key),
            "value", *hexbytes(prefix_value(cc, params)))


def flows():
    """copa_flows as a list of dicts."""
    out = []
    for e in bpftool("map", "dump", "pinned", BPFFS + "/copa_flows",
                     json_out=True) or []:
        k, v = raw(e["key"]), raw(e["value"])
        saddr, daddr = (ipaddress.IPv6Address(k[i:i + 16]) for i in (0, 16))
        netns, sport, dport = struct.unpack("=IHH", k[32:40])
        f = dict(zip(("delta", "competitive", "loss_reaction", "source",
                      "inv_delta", "mode", "velocity", "rtt_min_us",
                      "rtt_standing_us", "cwnd", "target", "pacing",
                      "noise_us"),
                     struct.unpack("=13I", v[:52])))
        f["updates"] = struct.unpack("=Q", v[56:64])[0]
        f["saddr"] = str(saddr.ipv4_mapped or saddr)
        f["daddr"] = str(daddr.ipv4_mapped or daddr)
        f["netns"], f["sport"], f["dport"] = netns, sport, dport
        out.append(f)
    return out


def endpoint(addr, port):
    return f"[{addr}]:{port}" if ":" in addr else f"{addr}:{port}"


def cmd_flows(args):
    if args == ["--json"]:
        print(json.dumps(flows(), indent=1))
        return
    print("netns      local                         "
          "peer                          delta source   "
          "mode        v  rttmin rttstand noise  cwnd target pacing updates")
    for f in flows():
        print(f"{f['netns']:<10} {endpoint(f['saddr'], f['sport']):29} "
              f"{endpoint(f['daddr'], f['dport']):29} "
              f"{fmt_value('delta', f['delta']):5} "
              f"{SRC_NAMES.get(f['source'], '?'):8} "
              f"{MODE_NAMES.get(f['mode'], '?'):11} {f['velocity']:2} "
              f"{f['rtt_min_us']:7} {f['rtt_standing_us']:8} {f['noise_us']:5} "
              f"{f['cwnd']:5} "
              f"{f['target']:6} {PACING_NAMES.get(f['pacing'], '?'):6} "
              f"{f['updates']}")


def cmd_stats(args):
    for name in ("tcp_copa.bss", "copa_soc.bss"):
        try:
            mid = find_map(name)
        except Error:
            continue
        e = bpftool("map", "lookup", "id", mid, "key", 0, 0, 0, 0,
                    json_out=True)
        for d in e["formatted"]["value"][".bss"]:
            for k, v in d.items():
                print(f"{k} = {v}")


COMMANDS = {
    "build": cmd_build, "register": cmd_register, "unregister": cmd_unregister, "get": cmd_get,
    "set": cmd_set, "sockops": cmd_sockops, "prefix": cmd_prefix,
    "flows": cmd_flows, "stats": cmd_stats,
}


def usage():
    """The docstring, and each parameter's range from tcp_copa_params.h."""
    lines = [__doc__, "Parameters (set; prefix add takes "
             f"{', '.join(SET_BITS)}):"]
    for name, t in DEFAULTS.items():
        lo, hi = (fmt_value(name, t.min), fmt_value(name, t.max))
        lines.append(f"  {name:14} {lo} to {hi}{' (decimal)' if t.milli else ''}"
                     f", default {fmt_value(name, t.default)}")
    return "\n".join(lines) + "\n"


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if argv in (["--help"], ["-h"]):
        sys.stdout.write(usage())
        return 0
    if not argv or argv[0] not in COMMANDS:
        sys.stderr.write(usage())
        return 2
    try:
        COMMANDS[argv[0]](argv[1:])
    except Error as e:
        sys.stderr.write(f"copa-bpf: {e}\n")
        return e.code
    return 0


if __name__ == "__main__":
    sys.exit(main())
