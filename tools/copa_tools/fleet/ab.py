# SPDX-License-Identifier: GPL-2.0
"""copa-fleet ab: an A/B experiment between two policies (a congestion
control and Copa's parameters), applied to sockets by the sock_ops
program (bpf/copa_sockops.bpf.c) and recorded by the collector.

    copa-fleet ab start NAME --control 'cc=cubic'
                             --treatment 'cc=bpf_copa delta=0.1'
                             [--unit connection|client|prefix]
                             [--switchback S --washout S] [--share F]
                             [--scope PREFIX]... [--salt N]
    copa-fleet ab status
    copa-fleet ab stop
    copa-fleet ab report NAME [--by-prefix | --groups FILE] ...

The arm of a unit is a hash of a salt, the unit (the socket cookie, the
peer's address, or its prefix) and, with --switchback, the period:
copa_ab_hash() of bpf/copa_bpf.h. The sock_ops program computes it when
a connection is established, applies the arm's policy and keeps the
arm's label ("NAME/control", "NAME/treatment") under the socket's cookie
in copa_ab_arms; the collector copies that label into each record's
ab_arm. arm() below is the same hash in Python: the report uses it to
tell which arm a switchback period ran and to check the recorded arms,
and a native test checks that the two agree. The experiment's
definition is kept in STATE_DIR/ab/NAME.json.
"""

import ctypes
import errno
import ipaddress
import json
import os
import re
import secrets
import struct
import sys
import time

from .. import bpf_cli
from . import schema

UNITS = {"connection": 1, "client": 2, "prefix": 3}
ARMS = ("control", "treatment")
SHARES = 10000                  # COPA_AB_SHARES
LABEL_LEN = 32                  # COPA_AB_LABEL_LEN
NAME_RE = re.compile(r"[A-Za-z0-9_.-]{1,%d}" % (LABEL_LEN - 11))
PIN_CONFIG = bpf_cli.BPFFS + "/copa_ab"
PIN_SCOPE = bpf_cli.BPFFS + "/copa_ab_scope"
PIN_ARMS = bpf_cli.BPFFS + "/copa_ab_arms"
U64 = (1 << 64) - 1
# struct copa_ab_config up to its policies: unit, treat_share, salt,
# prefix_v4, prefix_v6, start_ns, period_ns
CONFIG_HEAD = "=IIQIIQQ"


# When an A/B estimate of an effect agrees with a reference measurement
# of it (the same links run one policy at a time): scripts/ab-bench and
# tests/vm/fleet_ab.py.
AGREE_SHARE = 0.25      # of the reference's relative difference ...
AGREE_FLOOR = 0.05      # ... or this much apart, where both are small


def agrees(estimate, reference):
    """Sign and size: the relative differences within AGREE_SHARE of the
    reference's, or AGREE_FLOOR of each other where both are small."""
    if estimate is None or reference is None:
        return False
    return abs(estimate - reference) <= max(AGREE_SHARE * abs(reference),
                                            AGREE_FLOOR)


class AbError(ValueError):
    """An experiment that cannot start, stop or be reported; nothing was
    changed."""


def _mix(h, w):
    """copa_ab_mix(): murmur3's 64-bit finaliser over h ^ w."""
    h ^= w
    h ^= h >> 33
    h = (h * 0xff51afd7ed558ccd) & U64
    h ^= h >> 33
    h = (h * 0xc4ceb9fe1a85ec53) & U64
    return h ^ (h >> 33)


def arm(salt, share, w0, w1, period):
    """copa_ab_hash(): 1 (treatment) or 0 (control)."""
    h = _mix(_mix(_mix(salt, w0), w1), period)
    return int(h % SHARES < share)


def address_words(addr, plen=None):
    """The two host-endian u64 words of ``addr`` IPv4-mapped, its bits
    past ``plen`` (the family's prefix length) cleared."""
    ip = ipaddress.ip_address(addr)
    if ip.version == 6 and ip.ipv4_mapped:
        ip = ip.ipv4_mapped
    if plen is not None:
        ip = ipaddress.ip_network(f"{ip}/{plen}", strict=False) \
            .network_address
    packed = ip.packed if ip.version == 6 \
        else bytes(10) + b"\xff\xff" + ip.packed
    return (int.from_bytes(packed[:8], sys.byteorder),
            int.from_bytes(packed[8:], sys.byteorder))


def _policy(text, what):
    """``text`` ("cc=NAME delta=D ...", as copa-bpf prefix add takes) as
    a copa_prefix_policy value."""
    cc, params = "", {}
    for part in text.replace(",", " ").split():
        k, eq, v = part.partition("=")
        if not eq or not v:
            raise AbError(f"{what} {text!r}: {part!r} is not NAME=VALUE")
        try:
            if k == "cc":
                cc = v
            else:
                params[k] = bpf_cli.parse_value(k, v)
            value = bpf_cli.prefix_value(cc, params)
        except bpf_cli.Error as err:
            raise AbError(f"{what} {text!r}: {err}") from err
    if not cc and not params:
        raise AbError(f"{what} {text!r}: names no cc and no parameter")
    return value


class Experiment:
    """An experiment's definition, as kept in its JSON file."""

    FIELDS = ("name", "unit", "control", "treatment", "share", "salt",
              "scope", "prefix_v4", "prefix_v6", "switchback_s",
              "washout_s", "started", "start_boot_ns", "stopped")

    def __init__(self, **kw):
        unknown = set(kw) - set(self.FIELDS)
        if unknown:
            raise AbError(f"unknown experiment fields {sorted(unknown)}")
        for f in self.FIELDS:
            setattr(self, f, kw.get(f))
        self.check()

    def check(self):
        if not isinstance(self.name, str) or not NAME_RE.fullmatch(
                self.name):
            raise AbError(f"name {self.name!r}: 1 to {LABEL_LEN - 11} of "
                          "A-Z a-z 0-9 _ . -")
        if self.unit not in UNITS:
            raise AbError(f"unit {self.unit!r}: one of {', '.join(UNITS)}")
        if not 0 < self.share < 1:
            raise AbError(f"share {self.share}: the treatment's share, "
                          "in (0, 1)")
        if not 0 <= self.salt <= U64:
            raise AbError(f"salt {self.salt}: a 64-bit unsigned number")
        try:
            schema.check_prefix_lengths(self.prefix_v4, self.prefix_v6)
        except ValueError as err:
            raise AbError(str(err)) from None
        if self.switchback_s is not None:
            if self.unit != "prefix":
                raise AbError("--switchback alternates whole prefixes: "
                              "it needs --unit prefix")
            if not 0 <= self.washout_s < self.switchback_s:
                raise AbError(f"washout {self.washout_s} s: at least 0 "
                              f"and shorter than the period "
                              f"{self.switchback_s} s")
        for p in self.scope:
            try:
                ipaddress.ip_network(p, strict=False)
            except ValueError as err:
                raise AbError(f"scope {p}: {err}") from err
        self.policies = (_policy(self.control, "--control"),
                         _policy(self.treatment, "--treatment"))

    def label(self, i):
        return f"{self.name}/{ARMS[i]}"

    def labels(self):
        return tuple(self.label(i) for i in range(2))

    def period(self, t):
        """The switchback period of the Unix time ``t`` (0 without)."""
        if self.switchback_s is None:
            return 0
        return int((t - self.started) // self.switchback_s)

    def in_washout(self, t):
        """Whether ``t`` is in the washout that starts each period."""
        return (self.switchback_s is not None
                and (t - self.started) % self.switchback_s < self.washout_s)

    def unit_words(self, cookie, peer_addr):
        if self.unit == "connection":
            return cookie, 0
        if self.unit == "client":
            return address_words(peer_addr)
        ip = ipaddress.ip_address(peer_addr)
        v4 = ip.version == 4 or bool(ip.ipv4_mapped)
        return address_words(peer_addr,
                             self.prefix_v4 if v4 else self.prefix_v6)

    def arm(self, cookie, peer_addr, t=None):
        """The arm (0, 1) the sock_ops program gives a connection to
        ``peer_addr`` with ``cookie`` established at Unix time ``t``."""
        w0, w1 = self.unit_words(cookie, peer_addr)
        return arm(self.salt, self.share_units(), w0, w1,
                   self.period(t) if t is not None else 0)

    def share_units(self):
        return round(self.share * SHARES)

    def config_value(self, size):
        """struct copa_ab_config, padded to the map's value ``size``."""
        head = struct.pack(CONFIG_HEAD, UNITS[self.unit],
                           self.share_units(), self.salt, self.prefix_v4,
                           self.prefix_v6, self.start_boot_ns or 0,
                           int((self.switchback_s or 0) * 1e9))
        labels = b"".join(label.encode().ljust(LABEL_LEN, b"\0")
                          for label in self.labels())
        value = head + b"".join(self.policies) + labels
        if not 0 <= size - len(value) < 8:
            raise AbError(f"copa_ab's value is {size} bytes, this tool "
                          f"writes {len(value)}: rebuild and reattach "
                          "the sock_ops program (copa-bpf build; "
                          "copa-bpf sockops detach/attach)")
        return value.ljust(size, b"\0")

    def to_json(self):
        return {f: getattr(self, f) for f in self.FIELDS}

    @classmethod
    def load(cls, path):
        try:
            with open(path) as f:
                return cls(**json.load(f))
        except OSError as err:
            raise AbError(f"{path}: {err.strerror}") from err
        except (ValueError, TypeError) as err:
            raise AbError(f"{path}: {err}") from err

    def save(self, path):
        tmp = path + ".tmp"
        with open(tmp, "w") as f:
            json.dump(self.to_json(), f, indent=1)
            f.write("\n")
            f.flush()
            os.fsync(f.fileno())
        os.rename(tmp, path)


def experiment_path(state_dir, name):
    """NAME's definition file, or ``name`` itself if it is a path."""
    if os.sep in name or name.endswith(".json"):
        return name
    return os.path.join(state_dir, "ab", f"{name}.json")


# ---------------------------------------------------------------------------
# The maps, through bpftool (start, stop, status) and bpf() (the collector).

def _key0():
    return ["key", "0", "0", "0", "0"]


def running():
    """The label pair of the experiment in copa_ab, or None."""
    r = bpf_cli.bpftool("map", "lookup", "pinned", PIN_CONFIG, *_key0(),
                        json_out=True, check=False)
    if not r or "value" not in r:
        return None
    v = bpf_cli.raw(r["value"])
    tail = v[len(v) - _pad(len(v)) - 2 * LABEL_LEN:]
    return tuple(tail[i * LABEL_LEN:(i + 1) * LABEL_LEN].split(b"\0")[0]
                 .decode() for i in range(2))


def _pad(size):
    """The padding at the end of a copa_ab value of ``size`` bytes."""
    unpadded = (struct.calcsize(CONFIG_HEAD) + 2 * (
        bpf_cli.CC_NAME_LEN + bpf_cli.SK_PARAMS_LEN) + 2 * LABEL_LEN)
    return size - unpadded


def _value_size(pin):
    info = bpf_cli.bpftool("map", "show", "pinned", pin, json_out=True)
    return info["bytes_value"]


def _require_sockops():
    for pin in (PIN_CONFIG, PIN_SCOPE, PIN_ARMS):
        if not os.path.exists(pin):
            raise AbError(f"no {os.path.basename(pin)} map: attach the "
                          "sock_ops program first (copa-bpf sockops "
                          "attach CGROUP)")


def apply(exp):
    """Put ``exp`` into the maps: its scope, then its configuration (one
    update, which starts it). Undone if any step fails."""
    _require_sockops()
    if running():
        raise AbError(f"experiment {running()[0].split('/')[0]} is "
                      "running: copa-fleet ab stop first")
    value = exp.config_value(_value_size(PIN_CONFIG))
    added = []
    try:
        for p in exp.scope:
            key = bpf_cli.prefix_key(p)
            bpf_cli.bpftool("map", "update", "pinned", PIN_SCOPE, "key",
                            *bpf_cli.hexbytes(key), "value", "1")
            added.append(key)
        bpf_cli.bpftool("map", "update", "pinned", PIN_CONFIG, *_key0(),
                        "value", *bpf_cli.hexbytes(value))
    except bpf_cli.Error as err:
        for key in added:
            bpf_cli.bpftool("map", "delete", "pinned", PIN_SCOPE, "key",
                            *bpf_cli.hexbytes(key), check=False)
        raise AbError(f"cannot start: {err}") from err


def scope_prefixes():
    """The prefixes in copa_ab_scope, none where it is not pinned."""
    if not os.path.exists(PIN_SCOPE):
        return []
    return sorted(bpf_cli.key_prefix(bpf_cli.raw(e["key"])) for e in
                  bpf_cli.bpftool("map", "dump", "pinned", PIN_SCOPE,
                                  json_out=True) or [])


def withdraw():
    """Stop whatever experiment the maps hold: its configuration first
    (no new connection is assigned), then its scope."""
    bpf_cli.bpftool("map", "delete", "pinned", PIN_CONFIG, *_key0(),
                    check=False)
    for prefix in scope_prefixes():
        bpf_cli.bpftool("map", "delete", "pinned", PIN_SCOPE, "key",
                        *bpf_cli.hexbytes(bpf_cli.prefix_key(prefix)))


def arm_counts():
    """{label: sockets} in copa_ab_arms (recent sockets, LRU)."""
    out = {}
    for e in bpf_cli.bpftool("map", "dump", "pinned", PIN_ARMS,
                             json_out=True) or []:
        label = bpf_cli.raw(e["value"]).split(b"\0")[0].decode()
        out[label] = out.get(label, 0) + 1
    return out


class _Attr(ctypes.Structure):
    # union bpf_attr, as BPF_OBJ_GET and BPF_MAP_LOOKUP_ELEM read it
    _fields_ = [("a", ctypes.c_uint64), ("b", ctypes.c_uint64),
                ("c", ctypes.c_uint64), ("d", ctypes.c_uint64),
                ("pad", ctypes.c_uint64 * 12)]


_SYS_BPF = 321                  # x86_64
_BPF_MAP_LOOKUP_ELEM, _BPF_OBJ_GET = 1, 7


class Arms:
    """The arm labels of copa_ab_arms by socket cookie, for the
    collector: one bpf(BPF_MAP_LOOKUP_ELEM) per socket, through the pin
    (looked for again at most every ``retry_s`` while it is absent)."""

    def __init__(self, pin=PIN_ARMS, retry_s=1.0):
        self.pin, self.retry_s = pin, retry_s
        self.fd, self.tried = None, -retry_s
        self.libc = ctypes.CDLL(None, use_errno=True)
        self.value = ctypes.create_string_buffer(LABEL_LEN)
        self.key = ctypes.c_uint64()

    def _bpf(self, cmd, attr):
        r = self.libc.syscall(_SYS_BPF, cmd, ctypes.byref(attr),
                              ctypes.sizeof(attr))
        return r, ctypes.get_errno()

    def _open(self):
        now = time.monotonic()
        if now - self.tried < self.retry_s:
            return False
        self.tried = now
        path = ctypes.create_string_buffer(self.pin.encode())
        attr = _Attr(a=ctypes.addressof(path))
        fd, err = self._bpf(_BPF_OBJ_GET, attr)
        if fd < 0:
            return False
        self.fd = fd
        return True

    def get(self, cookie):
        """The label of the socket ``cookie``, "" if it has none."""
        if self.fd is None and not self._open():
            return ""
        self.key.value = cookie
        attr = _Attr(a=self.fd, b=ctypes.addressof(self.key),
                     c=ctypes.addressof(self.value))
        r, err = self._bpf(_BPF_MAP_LOOKUP_ELEM, attr)
        if r == 0:
            return self.value.value.decode(errors="replace")
        if err != errno.ENOENT:         # the map went away: look again
            os.close(self.fd)
            self.fd = None
        return ""

    def close(self):
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None


# ---------------------------------------------------------------------------
# The commands.

def cmd_start(args):
    exp = Experiment(
        name=args.name, unit=args.unit, control=args.control,
        treatment=args.treatment, share=args.share,
        salt=args.salt if args.salt is not None else secrets.randbits(64),
        scope=args.scope or ["0.0.0.0/0", "::/0"],
        prefix_v4=args.prefix_v4, prefix_v6=args.prefix_v6,
        switchback_s=args.switchback,
        washout_s=(args.washout if args.switchback is not None else None),
        started=time.time(),
        start_boot_ns=time.clock_gettime_ns(time.CLOCK_BOOTTIME),
        stopped=None)
    path = experiment_path(args.state_dir, exp.name)
    if os.path.exists(path):
        raise AbError(f"{path} exists: an experiment's name is its "
                      "records' label, so each name runs once")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    apply(exp)
    exp.save(path)
    print(f"copa-fleet ab: {exp.name} started: unit {exp.unit}, "
          f"{exp.share:.0%} treatment, salt {exp.salt}; {path}")


def cmd_stop(args):
    _require_sockops()
    labels = running()
    withdraw()
    if not labels:
        print("copa-fleet ab: no experiment was running")
        return
    name = labels[0].split("/")[0]
    path = experiment_path(args.state_dir, name)
    if os.path.exists(path):
        exp = Experiment.load(path)
        exp.stopped = time.time()
        exp.save(path)
    print(f"copa-fleet ab: {name} stopped; connections keep the policy "
          "they were given")


def cmd_status(args):
    _require_sockops()
    labels = running()
    if not labels:
        print("no experiment running")
        return
    name = labels[0].split("/")[0]
    path = experiment_path(args.state_dir, name)
    exp = Experiment.load(path) if os.path.exists(path) else None
    print(f"experiment {name} running" + (
        f" since {time.strftime('%F %T', time.localtime(exp.started))}, "
        f"unit {exp.unit}, treatment share {exp.share}" if exp else
        f" (no {path})"))
    if exp:
        for i, arm_name in enumerate(ARMS):
            print(f"  {arm_name}: {(exp.control, exp.treatment)[i]}")
        if exp.switchback_s:
            now = time.time()
            print(f"  switchback every {exp.switchback_s} s, washout "
                  f"{exp.washout_s} s; period {exp.period(now)}"
                  + (" (washout)" if exp.in_washout(now) else ""))
    counts = arm_counts()
    for label in labels:
        print(f"  {label}: {counts.get(label, 0)} recent sockets")


def cmd_report(args):
    from . import ab_report
    ab_report.main(args)


def add_parser(sub, state_dir):
    """copa-fleet ab's subcommands, under ``sub`` (cli.py's)."""
    ab = sub.add_parser("ab", help="A/B experiments between two policies")
    abs_ = ab.add_subparsers(dest="ab_command", required=True)

    def common(p):
        p.add_argument("--state-dir", default=state_dir,
                       help=f"where experiments and records are "
                            f"(default {state_dir})")
        return p

    s = common(abs_.add_parser("start", help="start an experiment"))
    s.add_argument("name", help="the experiment's name (its records' "
                                "label: NAME/control, NAME/treatment)")
    s.add_argument("--control", required=True,
                   help="the control's policy, e.g. 'cc=cubic'")
    s.add_argument("--treatment", required=True,
                   help="the treatment's, e.g. 'cc=bpf_copa delta=0.1'")
    s.add_argument("--unit", choices=UNITS, default="connection",
                   help="what is assigned an arm (default connection)")
    s.add_argument("--share", type=float, default=0.5,
                   help="the treatment's share of the units (default 0.5)")
    s.add_argument("--scope", action="append", metavar="PREFIX",
                   help="peers in the experiment (repeat; default all)")
    s.add_argument("--salt", type=int,
                   help="the hash's salt (default random; give the same "
                        "one on every host of a fleet)")
    schema.add_prefix_options(s, "--unit prefix: ")
    s.add_argument("--switchback", type=float, metavar="S",
                   help="alternate each prefix's arm every S seconds "
                        "(needs --unit prefix)")
    s.add_argument("--washout", type=float, default=60.0, metavar="S",
                   help="--switchback: seconds after each switch left "
                        "out of the report (default 60)")
    s.set_defaults(func=main, ab_func=cmd_start)
    common(abs_.add_parser("status", help="the running experiment")) \
        .set_defaults(func=main, ab_func=cmd_status)
    common(abs_.add_parser("stop", help="stop the running experiment")) \
        .set_defaults(func=main, ab_func=cmd_stop)
    r = common(abs_.add_parser("report", help="the arms compared"))
    r.add_argument("name", help="the experiment's name, or its .json")
    r.add_argument("--clickhouse", metavar="URL",
                   help="read the records from this ClickHouse server")
    g = r.add_mutually_exclusive_group()
    g.add_argument("--by-prefix", action="store_true",
                   help="break down by the experiment's prefix")
    g.add_argument("--groups", metavar="FILE",
                   help="break down by region: lines 'PREFIX GROUP'")
    r.add_argument("--alpha", type=float, default=0.05,
                   help="1 - the intervals' confidence, and the false "
                        "discovery rate (default 0.05)")
    r.add_argument("--resamples", type=int, default=2000,
                   help="bootstrap resamples (default 2000)")
    r.add_argument("--seed", type=int, default=0,
                   help="the bootstrap's random seed (default 0)")
    r.add_argument("--csv", metavar="DIR",
                   help="also write each table as DIR/NAME.csv")
    r.add_argument("--plots", metavar="DIR",
                   help="write ab_differences.png into DIR")
    r.set_defaults(func=main, ab_func=cmd_report)


def main(args):
    try:
        args.ab_func(args)
    except (AbError, bpf_cli.Error, OSError) as err:
        sys.exit(f"copa-fleet ab {args.ab_command}: {err}")
