# SPDX-License-Identifier: GPL-2.0
"""Objects served and fetched over TCP: the traffic of the fleet's
benchmark (scripts/ab-bench) and VM tests (tests/vm/fleet_control.py).

    python3 -m copa_tools.fleet.objects serve PORT [--ccs A,B]
        [--served FILE]
    python3 -m copa_tools.fleet.objects fetch SERVER PORT SEED SIZES
        [--source ADDR] [--timeout S]

A fetcher connects, sends the object's size (8 bytes, network order),
reads that many bytes and closes, then fetches the next, its sizes drawn
from SIZES (comma-separated bytes) by a generator seeded with SEED; a
failed connection waits a second. The server sends each connection the
size it asked for, on a congestion control drawn from --ccs (the
namespace's default without it), and appends "ADDRESS PORT TIME" to
--served once the object is sent.
"""

import argparse
import random
import socket
import socketserver
import struct
import sys
import time

CHUNK = bytes(65536)


def serve(port, ccs=(), served=None):
    log = open(served, "a", buffering=1) if served else None

    class Object(socketserver.BaseRequestHandler):
        def handle(self):
            if ccs:
                self.request.setsockopt(socket.IPPROTO_TCP,
                                        socket.TCP_CONGESTION,
                                        random.choice(ccs).encode())
            n = struct.unpack("!Q", self.request.recv(8,
                                                      socket.MSG_WAITALL))[0]
            try:
                while n > 0:
                    n -= self.request.send(CHUNK[:min(n, len(CHUNK))])
            except OSError:     # the fetcher stopped (a phase's end)
                return
            if log:
                log.write("%s %d %.3f\n" % (*self.client_address,
                                            time.time()))

    socketserver.ThreadingTCPServer.allow_reuse_address = True
    socketserver.ThreadingTCPServer(("0.0.0.0", port), Object) \
        .serve_forever()


def fetch(server, port, seed, sizes, source=None, timeout=60):
    rng = random.Random(seed)
    while True:
        n = rng.choice(sizes)
        try:
            s = socket.create_connection((server, port), timeout=timeout,
                                         source_address=(source or "", 0))
            s.sendall(struct.pack("!Q", n))
            while n > 0:
                got = len(s.recv(1 << 20))
                if not got:
                    break
                n -= got
            s.close()
        except OSError:
            time.sleep(1)


def sizes_arg(text):
    """SIZES: comma-separated positive byte counts."""
    try:
        sizes = [int(x) for x in text.split(",")]
    except ValueError:
        sizes = []
    if not sizes or min(sizes) < 1:
        raise argparse.ArgumentTypeError(
            f"{text!r}: comma-separated positive byte counts")
    return sizes


def main(argv=None):
    p = argparse.ArgumentParser(prog="copa_tools.fleet.objects",
                                description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("serve")
    s.add_argument("port", type=int)
    s.add_argument("--ccs", default="",
                   help="comma-separated congestion controls to draw from")
    s.add_argument("--served", help="append each object served here")
    f = sub.add_parser("fetch")
    f.add_argument("server")
    f.add_argument("port", type=int)
    f.add_argument("seed", type=int)
    f.add_argument("sizes", type=sizes_arg,
                   help="comma-separated object sizes, bytes")
    f.add_argument("--source", help="local address to connect from")
    f.add_argument("--timeout", type=float, default=60)
    args = p.parse_args(argv)
    try:
        if args.cmd == "serve":
            serve(args.port, [c for c in args.ccs.split(",") if c],
                  args.served)
        else:
            fetch(args.server, args.port, args.seed, args.sizes,
                  args.source, args.timeout)
    except KeyboardInterrupt:
        sys.exit(130)


if __name__ == "__main__":
    main()
