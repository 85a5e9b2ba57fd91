# SPDX-License-Identifier: GPL-2.0
"""copa-fleet: every TCP connection's tcp_info, recorded and reported.

    copa-fleet collect [--interval S] [--sample F] [--state-dir DIR] ...
    copa-fleet report [--state-dir DIR] [--hours H] [--baseline CC] ...
    copa-fleet ab start|status|stop|report ...
    copa-fleet control [--dry-run | --once | --reset | --resume] ...

collect samples every TCP socket of the host through inet_diag and
records each connection's final state at close, in ClickHouse's Native
format under the state directory; report reads them with chDB
(ClickHouse's engine in this process) and prints per-cc and per-prefix
tables.
Documentation/fleet.rst is the operator's guide.
"""

import argparse
import os
import signal
import sys
import tempfile
import time

from . import ab, control, queries, schema, store

STATE_DIR = "/var/lib/copa-fleet"


def records_dir(state_dir):
    return os.path.join(state_dir, "records")


def positive(kind):
    def parse(text):
        v = kind(text)
        if v <= 0:
            raise argparse.ArgumentTypeError(f"{text}: must be positive")
        return v
    return parse


def cmd_collect(args):
    from . import collector

    try:
        prefixes = collector.Prefixes(args.prefix_v4, args.prefix_v6)
        if not 0 < args.sample <= 1:
            raise ValueError(f"--sample {args.sample}: in (0, 1]")
        if args.interval < 1:
            raise ValueError(f"--interval {args.interval}: at least 1 s "
                             "(records are keyed by the second)")
    except ValueError as err:
        sys.exit(f"copa-fleet collect: {err}")
    try:
        local = store.Store(records_dir(args.state_dir), args.host,
                            rotate_bytes=args.rotate_mb << 20,
                            rotate_s=args.rotate_s,
                            keep_days=args.keep_days)
    except OSError as err:
        sys.exit(f"copa-fleet collect: {args.state_dir}: {err.strerror}")
    if local.recovered_bytes:
        print(f"copa-fleet: cut {local.recovered_bytes} bytes of a torn "
              f"last batch left by a stopped collector", file=sys.stderr)
    sinks = [local]
    if args.clickhouse:
        from . import clickhouse
        try:
            sinks.append(clickhouse.Sink(
                args.clickhouse, os.path.join(args.state_dir, "spool"),
                max_spool_bytes=args.clickhouse_spool_mb << 20))
        except (ValueError, OSError) as err:
            sys.exit(f"copa-fleet collect: --clickhouse: {err}")
    try:
        coll = collector.Collector(sinks, host=local.host,
                                   fraction=args.sample, prefixes=prefixes,
                                   netns=args.netns, arms=ab.Arms())
    except OSError as err:
        sys.exit(f"copa-fleet collect: sock_diag: {err.strerror or err} "
                 f"(root, or CAP_NET_ADMIN, is needed)")
    for sink in sinks[1:]:
        sink.start()
    stopping = []
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stopping.append(True))
    try:
        coll.run(args.interval, stop=lambda: bool(stopping),
                 sweeps=args.sweeps)
        coll.emit(coll.closes())
    finally:
        for sink in sinks[1:]:
            sink.stop()
        local.close()
        coll.close()
    print(f"copa-fleet: {coll.stats}", file=sys.stderr)


def cmd_clickhouse_schema(args):
    from . import clickhouse

    if not args.create:
        print(clickhouse.create_table_sql(engine=args.engine,
                                          ttl_days=args.ttl_days) + ";")
        return
    try:
        print(clickhouse.Server(args.create).create_table(
            engine=args.engine) + ";")
    except (ValueError, clickhouse.ClickHouseError,
            clickhouse.Unreachable) as err:
        sys.exit(f"copa-fleet clickhouse-schema: {args.create}: {err}")


def report_source(args, scratch):
    """The engine and the source report reads: the server's table with
    --clickhouse, else chDB over a snapshot (in ``scratch``) of the state
    directory's files."""
    from . import report

    if args.clickhouse:
        from . import clickhouse
        return clickhouse.Engine(args.clickhouse), schema.TABLE
    engine = queries.Chdb()
    files = store.snapshot(records_dir(args.state_dir), scratch)
    if not files:
        raise report.ReportError(
            f"no records under {records_dir(args.state_dir)}")
    return engine, queries.file_source(files)


def cmd_report(args):
    from . import report

    end = time.time() + 1
    start = end - args.hours * 3600 if args.hours else 0
    try:
        with tempfile.TemporaryDirectory(prefix="copa-fleet-") as scratch:
            engine, source = report_source(args, scratch)
            tables = report.build(engine, source, start, end, args.baseline)
            if args.csv:
                os.makedirs(args.csv, exist_ok=True)
                for name, rows in tables.items():
                    with open(os.path.join(args.csv, f"{name}.csv"),
                              "w") as f:
                        f.write(report.to_csv(rows))
            if args.plots:
                os.makedirs(args.plots, exist_ok=True)
                report.plots(engine, source, start, end, args.plots,
                             args.window)
    except (report.ReportError, queries.QueryError, OSError) as err:
        sys.exit(f"copa-fleet report: {err}")
    for name, rows in tables.items():
        print(report.markdown(rows, report.TITLES[name]))


def parser():
    p = argparse.ArgumentParser(prog="copa-fleet",
                                description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="command", required=True)
    c = sub.add_parser("collect", help="sample sockets, record closes")
    c.add_argument("--state-dir", default=STATE_DIR,
                   help=f"where records go (default {STATE_DIR})")
    c.add_argument("--interval", type=float, default=10.0,
                   help="seconds between sweeps (default 10)")
    c.add_argument("--sample", type=float, default=1.0,
                   help="fraction of sockets recorded, by socket cookie "
                        "(default 1)")
    schema.add_prefix_options(c, "the peer's ")
    c.add_argument("--host", help="host name in records (default: "
                                  "this host's)")
    c.add_argument("--netns", help="collect in this network namespace "
                                   "(a name under /run/netns)")
    c.add_argument("--rotate-mb", type=positive(int), default=64,
                   help="start a new file at this size (default 64)")
    c.add_argument("--rotate-s", type=positive(float), default=3600,
                   help="... or at this age in seconds (default 3600)")
    c.add_argument("--keep-days", type=positive(float), default=None,
                   help="remove record files older than this")
    c.add_argument("--sweeps", type=positive(int), default=None,
                   help="stop after this many sweeps (default: never)")
    c.add_argument("--clickhouse", metavar="URL",
                   help="also send the records to this ClickHouse server's "
                        "HTTP interface, e.g. http://ch:8123/?database=fleet"
                        ", spooling them under STATE_DIR/spool")
    c.add_argument("--clickhouse-spool-mb", type=positive(int),
                   default=1024, help="the most the spool holds while "
                                      "the server is away (default 1024)")
    c.set_defaults(func=cmd_collect)
    r = sub.add_parser("report", help="per-cc and per-prefix tables")
    r.add_argument("--state-dir", default=STATE_DIR,
                   help=f"where the records are (default {STATE_DIR})")
    r.add_argument("--clickhouse", metavar="URL",
                   help="read the records from this ClickHouse server's "
                        "table instead (collect --clickhouse's URL)")
    r.add_argument("--hours", type=positive(float),
                   help="only the last H hours (default: everything)")
    r.add_argument("--baseline", help="cc the RTT reduction is against, "
                                      "e.g. cubic")
    r.add_argument("--csv", metavar="DIR",
                   help="also write each table as DIR/NAME.csv")
    r.add_argument("--plots", metavar="DIR",
                   help="write cdf.png, worst_prefixes.png and "
                        "rate_vs_rtt.png into DIR (matplotlib)")
    r.add_argument("--window", type=positive(int), default=300,
                   help="seconds per window of the prefixes-over-time "
                        "plot (default 300)")
    r.set_defaults(func=cmd_report)
    s = sub.add_parser("clickhouse-schema",
                       help="print (or create) the ClickHouse table")
    s.add_argument("--engine", default="MergeTree",
                   help="table engine, e.g. ReplicatedMergeTree(...) on a "
                        "cluster (default MergeTree)")
    s.add_argument("--ttl-days", type=int, default=30,
                   help="days records are kept; 0: no TTL, for servers "
                        "older than 19.6 (default 30)")
    s.add_argument("--create", metavar="URL",
                   help="create it on this server instead, with a TTL of "
                        "30 days where the server has TTL")
    s.set_defaults(func=cmd_clickhouse_schema)
    ab.add_parser(sub, STATE_DIR)
    control.add_parser(sub)
    return p


def main(argv=None):
    args = parser().parse_args(argv)
    args.func(args)


if __name__ == "__main__":
    main()
