# SPDX-License-Identifier: GPL-2.0
"""Show Copa's state for every copa or copa_policer TCP socket.

ss -ti prints none of the tcpvegas_info fields that Copa answers inet_diag
with, so this decodes them through NETLINK_SOCK_DIAG:

    copa-diag [--json] [--all]

One line (or JSON object) per socket, in the current network namespace
(use `ip netns exec NS copa-diag` for another): addresses, algorithm,
mode (tcp_copa_params.h's COPA_MODES: slow_start, ...), velocity,
RTTstanding and RTTmin in microseconds. --all also lists sockets of other algorithms.
"""
import argparse
import json
import socket
import sys

# The decoder is the harness's too (its lab samples flows with it).
from . import netlink, params
from .netlink import NETLINK_SOCK_DIAG

INET_DIAG_VEGASINFO = netlink.INET_DIAG_VEGASINFO
INET_DIAG_CONG = netlink.INET_DIAG_CONG
MODES = params.load().modes
COPA_NAMES = ("copa", "copa_policer")
SEQ = 1


def request(family):
    ext = (1 << (INET_DIAG_VEGASINFO - 1)) | (1 << (INET_DIAG_CONG - 1))
    return netlink.inet_diag_request(family, ext, seq=SEQ)


def address(family, addr, port):
    return f"[{addr}]:{port}" if family == socket.AF_INET6 \
        else f"{addr}:{port}"


def decode(msg):
    diag = netlink.decode_inet_diag(msg)
    entry = {"src": address(diag["family"], diag["src"], diag["sport"]),
             "dst": address(diag["family"], diag["dst"], diag["dport"]),
             "cc": diag["cc"]}
    if "vegas" in diag and entry["cc"] in COPA_NAMES:
        v = diag["vegas"]
        entry.update(mode=MODES.get(v["tcpv_enabled"],
                                    str(v["tcpv_enabled"])),
                     velocity=v["tcpv_rttcnt"],
                     rtt_standing_us=v["tcpv_rtt"],
                     rtt_min_us=v["tcpv_minrtt"])
    return entry


def messages(sock):
    """The replies to request() on sock; NetlinkError (an OSError) on a
    malformed message, OSError on an error reply."""
    yield from netlink.dump_replies(sock, SEQ)


def sockets():
    with socket.socket(socket.AF_NETLINK, socket.SOCK_RAW,
                       NETLINK_SOCK_DIAG) as sock:
        for family in (socket.AF_INET, socket.AF_INET6):
            sock.send(request(family))
            yield from (decode(m) for m in messages(sock))


def line(entry):
    fields = " ".join(f"{k}={v}" for k, v in entry.items()
                      if k not in ("src", "dst"))
    return f"{entry['src']} -> {entry['dst']} {fields}"


def main(argv=None):
    parser = argparse.ArgumentParser(prog="copa-diag",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true",
                        help="one JSON object per line")
    parser.add_argument("--all", action="store_true",
                        help="list sockets of every algorithm")
    args = parser.parse_args(argv)
    try:
        for entry in sockets():
            if args.all or entry["cc"] in COPA_NAMES:
                print(json.dumps(entry) if args.json else line(entry))
    except netlink.NetlinkError as err:
        sys.exit(f"copa-diag: sock_diag: {err}")
    except OSError as err:
        sys.exit(f"copa-diag: sock_diag: {err.strerror}")


if __name__ == "__main__":
    main()
