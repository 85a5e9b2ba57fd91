# SPDX-License-Identifier: GPL-2.0
"""The one list of copa-fleet's record columns.

A record is one JSON object (ClickHouse's JSONEachRow) whose keys are
column names. The collector writes it, the JSON lines writer checks it,
clickhouse.py renders the server's table from COLUMNS, queries.py reads
the files through chDB with structure(), and Documentation/fleet.rst's
table is generated from here; nobody repeats the list.

Types are those ClickHouse 18.16 (Debian bookworm) and current engines
both accept: no DateTime64, IPv6 domain or LowCardinality. A metric the
kernel did not send is absent from the record and NULL in the store, not
0, so it cannot pull a quantile down. The cc name is a String, never an
enum: xTCP's enum showed copa as UNKNOWN.

(host, cookie, time, kind) is a record's unique key: a batch sent twice
can be told from two batches.

``python3 -m copa_tools.fleet.schema`` prints the columns as the table
in Documentation/fleet.rst (a unit test checks that they agree).
"""

from collections import namedtuple

Column = namedtuple("Column", "name type meaning")

TABLE = "tcp_records"

# The peer prefix a record, a controller's policy and an experiment's
# prefix unit are keyed by: Edgio's /24, and the /56 an ISP commonly
# delegates to one IPv6 customer. Either may be changed per command.
PREFIX_V4, PREFIX_V6 = 24, 56


def add_prefix_options(parser, lead):
    """--prefix-v4 and --prefix-v6 on ``parser``, their help starting
    with ``lead``."""
    for opt, family, default in (("--prefix-v4", "IPv4", PREFIX_V4),
                                 ("--prefix-v6", "IPv6", PREFIX_V6)):
        parser.add_argument(opt, type=int, default=default,
                            help=f"{lead}{family} prefix length (default "
                                 f"{default})")


def check_prefix_lengths(v4, v6):
    """Raise ValueError unless /v4 and /v6 are IPv4's and IPv6's lengths."""
    if not 0 <= v4 <= 32 or not 0 <= v6 <= 128:
        raise ValueError(f"prefix lengths /{v4} (IPv4: 0 to 32) and "
                         f"/{v6} (IPv6: 0 to 128)")


SAMPLE = "sample"       # a periodic inet_diag sweep saw the socket
FINAL = "final"         # the socket's state when it was destroyed
KINDS = (SAMPLE, FINAL)

COLUMNS = (
    Column("time", "DateTime",
           "when the record was taken, Unix seconds (UTC)"),
    Column("host", "String", "the collector's host name"),
    Column("kind", "String",
           f"'{SAMPLE}' (periodic sweep) or '{FINAL}' (state at close)"),
    Column("cookie", "UInt64", "the kernel's socket cookie"),
    Column("local_addr", "String", "local address"),
    Column("local_port", "UInt16", "local port"),
    Column("peer_addr", "String", "peer address"),
    Column("peer_port", "UInt16", "peer port"),
    Column("peer_prefix", "String",
           "the peer's prefix, e.g. 192.0.2.0/24 (lengths configurable, "
           "/24 and /56 by default)"),
    Column("cc", "String",
           "congestion control name (copa, copa_policer, bpf_copa, cubic, "
           "bbr...)"),
    Column("copa_delta", "Nullable(Float64)",
           "Copa's delta: bpf_copa's from copa_flows, the module's from "
           "its namespace's sysctl; NULL for other algorithms"),
    Column("copa_mode", "Nullable(String)",
           "Copa's mode (tcp_copa_params.h's COPA_MODES); NULL for other "
           "algorithms"),
    Column("ab_arm", "String", "A/B test arm, empty outside a test"),
    Column("delivery_rate_bps", "Nullable(UInt64)",
           "tcpi_delivery_rate in bits per second"),
    Column("app_limited", "Nullable(UInt8)",
           "1 if that delivery rate was application-limited"),
    Column("min_rtt_us", "Nullable(UInt32)", "tcpi_min_rtt"),
    Column("srtt_us", "Nullable(UInt32)", "tcpi_rtt, the smoothed RTT"),
    Column("rttvar_us", "Nullable(UInt32)", "tcpi_rttvar"),
    Column("bytes_acked", "Nullable(UInt64)", "tcpi_bytes_acked"),
    Column("bytes_sent", "Nullable(UInt64)",
           "tcpi_bytes_sent, retransmissions included"),
    Column("bytes_retrans", "Nullable(UInt64)", "tcpi_bytes_retrans"),
    Column("lost_segs", "Nullable(UInt32)",
           "tcpi_lost: segments now marked lost"),
    Column("retrans_segs", "Nullable(UInt32)",
           "tcpi_retrans: retransmitted segments now in flight"),
    Column("total_retrans_segs", "Nullable(UInt32)",
           "tcpi_total_retrans: segments retransmitted over the "
           "connection's life"),
    Column("cwnd_segs", "Nullable(UInt32)", "tcpi_snd_cwnd"),
    Column("pacing_rate_bps", "Nullable(UInt64)",
           "tcpi_pacing_rate in bits per second; NULL when unpaced"),
    Column("busy_us", "Nullable(UInt64)",
           "tcpi_busy_time: time with data in flight"),
    Column("rwnd_limited_us", "Nullable(UInt64)",
           "tcpi_rwnd_limited: time limited by the receive window"),
    Column("sndbuf_limited_us", "Nullable(UInt64)",
           "tcpi_sndbuf_limited: time limited by the send buffer"),
    Column("age_ms", "UInt64",
           "time since the collector first saw the socket (a lower bound "
           "for sockets older than the collector)"),
)

KEY = ("host", "cookie", "time", "kind")

NAMES = tuple(c.name for c in COLUMNS)
BY_NAME = {c.name: c for c in COLUMNS}


def nullable(column):
    """Whether ``column`` may be absent from a record (NULL in the store)."""
    return column.type.startswith("Nullable(")


REQUIRED = tuple(c.name for c in COLUMNS if not nullable(c))
_NAME_SET = frozenset(NAMES)
_REQUIRED_SET = frozenset(REQUIRED)


def structure():
    """The columns as a ClickHouse structure, ``name Type, ...``: what
    file(..., JSONEachRow, structure) and CREATE TABLE take."""
    return ", ".join(f"{c.name} {c.type}" for c in COLUMNS)


class RecordError(ValueError):
    """A record that does not fit the schema."""


def check(record):
    """Raise RecordError unless ``record`` has every required column, no
    key outside the schema and a known kind."""
    keys = record.keys()
    if not (keys <= _NAME_SET and keys >= _REQUIRED_SET):
        missing = [n for n in REQUIRED if n not in record]
        extra = [k for k in record if k not in BY_NAME]
        raise RecordError(f"record {record.get('cookie')!r}: "
                          f"missing {missing}, unknown {extra}")
    if record["kind"] not in KINDS:
        raise RecordError(f"record {record['cookie']!r}: kind "
                          f"{record['kind']!r} is not one of {KINDS}")


def rst_table():
    """COLUMNS as the reStructuredText list-table of fleet.rst."""
    lines = [".. list-table::", "   :header-rows: 1",
             "   :widths: 20 20 60", "",
             "   * - column", "     - ClickHouse type", "     - meaning"]
    for c in COLUMNS:
        lines += [f"   * - ``{c.name}``", f"     - ``{c.type}``",
                  f"     - {c.meaning}"]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    print(rst_table(), end="")
