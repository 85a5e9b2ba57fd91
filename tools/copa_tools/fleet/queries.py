# SPDX-License-Identifier: GPL-2.0
"""copa-fleet's queries, written once in ClickHouse SQL.

Each query reads ``{source}``: on one host, chDB's file() over the
store's files (file_source(), with schema.py's structure); in a
fleet, the server's table (schema.TABLE). The text is the subset both
ClickHouse 18.16 (Debian bookworm's server) and chDB's 26.9 engine take:
no window functions (the prefixes are computed by the collector), no
DateTime64, windows by intDiv() rather than toStartOfInterval(); an
aggregate over a Nullable column goes through -If with ifNull(), since
18.16 cannot put quantiles' Array into a Nullable. Quantiles are
t-digests (quantilesTDigest): bounded memory on a day of records, within
about 1% of the exact value.

Statistics are per record: a connection counts once per sweep that saw
it (about once per interval of its life) and once at close. Delivery
rate leaves out application-limited records. Retransmission overhead is
Facebook's: over the connections of a group, the bytes retransmitted
over the bytes acked, each connection's counters taken at their largest
(its last record).
"""

import json
import os

from . import schema, store

RATE_LEVELS = (0.5, 0.1, 0.01)                  # median, p10, p1
RTT_LEVELS = (0.5, 0.75, 0.9, 0.95, 0.99)
CDF_LEVELS = tuple(round(i / 100, 2) for i in range(1, 100))
GROUPS = {"cc": ("cc",), "prefix": ("peer_prefix", "cc")}

RATE_OK = ("isNotNull(delivery_rate_bps) AND ifNull(app_limited, 1) = 0")


def _levels(levels):
    return ", ".join(str(x) for x in levels)


def _quantiles(column, levels, condition=None):
    cond = condition or f"isNotNull({column})"
    return (f"quantilesTDigestIf({_levels(levels)})"
            f"(toFloat64(ifNull({column}, 0)), {cond})")


def _between(start, end):
    return f"time >= {int(start)} AND time < {int(end)}"


def summary(source, keys, start, end):
    """Per group: connections, records, rate_q (delivery rate at
    RATE_LEVELS, over the rate_records not app-limited), srtt_q and
    min_rtt_q (at RTT_LEVELS). An alias never takes a column's name: the
    engine would read the aggregate where the column is meant."""
    k = ", ".join(keys)
    return f"""SELECT {k},
    uniqExact(host, cookie) AS connections,
    count() AS records,
    countIf({RATE_OK}) AS rate_records,
    {_quantiles("delivery_rate_bps", RATE_LEVELS, RATE_OK)} AS rate_q,
    {_quantiles("srtt_us", RTT_LEVELS)} AS srtt_q,
    {_quantiles("min_rtt_us", RTT_LEVELS)} AS min_rtt_q
FROM {source}
WHERE {_between(start, end)}
GROUP BY {k}
ORDER BY {k}"""


def retrans(source, keys, start, end):
    """Per group: bytes acked and retransmitted by its connections, and
    their ratio, the retransmission overhead."""
    k = ", ".join(keys)
    return f"""SELECT {k},
    count() AS connections,
    sum(acked) AS bytes_acked,
    sum(retrans) AS bytes_retrans,
    sum(retrans) / greatest(sum(acked), 1) AS retrans_overhead
FROM (
    SELECT {k}, host, cookie,
        max(ifNull(bytes_acked, 0)) AS acked,
        max(ifNull(bytes_retrans, 0)) AS retrans
    FROM {source}
    WHERE {_between(start, end)}
    GROUP BY {k}, host, cookie
)
GROUP BY {k}
ORDER BY {k}"""


def cdf(source, column, start, end):
    """Per cc: ``column`` at CDF_LEVELS (delivery rate: not app-limited)."""
    cond = RATE_OK if column == "delivery_rate_bps" else None
    return f"""SELECT cc,
    {_quantiles(column, CDF_LEVELS, cond)} AS points
FROM {source}
WHERE {_between(start, end)}
GROUP BY cc
ORDER BY cc"""


def windows(source, window_s, start, end):
    """Per window of ``window_s`` seconds, prefix and cc: the controller's
    query. Records, srtt_q (srtt at p50 and p90), rate_q (delivery rate
    at its median and p10)."""
    w = int(window_s)
    return f"""SELECT intDiv(toUInt32(time), {w}) * {w} AS window_start,
    peer_prefix, cc,
    count() AS records,
    {_quantiles("srtt_us", (0.5, 0.9))} AS srtt_q,
    {_quantiles("delivery_rate_bps", (0.5, 0.1), RATE_OK)} AS rate_q
FROM {source}
WHERE {_between(start, end)}
GROUP BY window_start, peer_prefix, cc
ORDER BY window_start, peer_prefix, cc"""


def span(source):
    """The first and last record's time, and the ccs recorded."""
    return f"""SELECT min(toUInt32(time)) AS first_time,
    max(toUInt32(time)) AS last_time, count() AS records,
    groupUniqArray(cc) AS ccs
FROM {source}"""


def _large(min_bytes):
    """A record of a connection that had acked at least ``min_bytes``."""
    return f"ifNull(bytes_acked, 0) >= {int(min_bytes)}"


# A record outside any A/B experiment: an experiment's arms override the
# controller's policy on its scope (copa_sockops.bpf.c), so the controller
# judges a prefix by the connections its own policy served.
NO_ARM = "ab_arm = ''"

# The controller's groups are per prefix, cc and this: Copa's delta, -1
# for a record without one.
DELTA_KEY = "ifNull(copa_delta, -1)"


def control_groups(source, start, end, min_bytes):
    """The controller's numbers per prefix, cc and Copa delta (delta_key:
    the delta, -1 for none), over the records of connections outside any
    A/B experiment that had acked at least ``min_bytes``: connections,
    records, rate_q (delivery rate at its median and p10, not
    app-limited), srtt_q (p50, p90) and
    base_rtt_q (min_rtt at p10, the path's RTT without a queue)."""
    large = f"{_large(min_bytes)} AND {NO_ARM}"
    return f"""SELECT peer_prefix, cc,
    {DELTA_KEY} AS delta_key,
    uniqExact(host, cookie) AS connections,
    count() AS records,
    countIf({RATE_OK}) AS rate_records,
    {_quantiles("delivery_rate_bps", (0.5, 0.1), RATE_OK)} AS rate_q,
    {_quantiles("srtt_us", (0.5, 0.9))} AS srtt_q,
    {_quantiles("min_rtt_us", (0.1,))} AS base_rtt_q
FROM {source}
WHERE {_between(start, end)} AND {large}
GROUP BY peer_prefix, cc, delta_key
ORDER BY peer_prefix, cc, delta_key"""


def control_retrans(source, start, end, min_bytes):
    """Retransmission overhead per prefix, cc and delta_key, over the
    connections outside any A/B experiment that acked at least
    ``min_bytes``: retrans() for the controller's groups."""
    return f"""SELECT peer_prefix, cc, delta_key,
    count() AS connections,
    sum(retrans) / greatest(sum(acked), 1) AS retrans_overhead
FROM (
    SELECT peer_prefix, cc, {DELTA_KEY} AS delta_key,
        host, cookie,
        max(ifNull(bytes_acked, 0)) AS acked,
        max(ifNull(bytes_retrans, 0)) AS retrans
    FROM {source}
    WHERE {_between(start, end)} AND {NO_ARM}
    GROUP BY peer_prefix, cc, delta_key, host, cookie
    HAVING acked >= {int(min_bytes)}
)
GROUP BY peer_prefix, cc, delta_key
ORDER BY peer_prefix, cc, delta_key"""


# The metrics the controller's duty cycle may rank prefixes by: column,
# the records that count, and whether a low value is the poor one.
DUTY_METRICS = {"delivery_rate": ("delivery_rate_bps", RATE_OK, True),
                "srtt": ("srtt_us", "isNotNull(srtt_us)", False)}


def control_windows(source, window_s, start, end, min_bytes, metric):
    """Per window of ``window_s`` seconds and prefix: the median of
    DUTY_METRICS[``metric``] over the large connections' records outside
    any A/B experiment (value), and the newest record's time of any
    connection (newest)."""
    column, ok, _ = DUTY_METRICS[metric]
    w = int(window_s)
    cond = f"{_large(min_bytes)} AND {NO_ARM} AND {ok}"
    return f"""SELECT intDiv(toUInt32(time), {w}) * {w} AS window_start,
    peer_prefix,
    countIf({cond}) AS samples,
    quantileTDigestIf(0.5)(toFloat64(ifNull({column}, 0)), {cond}) AS value,
    max(toUInt32(time)) AS newest
FROM {source}
WHERE {_between(start, end)}
GROUP BY window_start, peer_prefix
ORDER BY window_start, peer_prefix"""


def every_query(source, control_group, start=0, end=2 ** 32 - 1):
    """Every query of this module over ``source``: what the tests run on
    each engine; ``control_group`` is one of control_groups()'s (prefix, cc,
    delta in thousandths or None) in it."""
    out = {"span": span(source), "windows": windows(source, 60, start, end)}
    for group, keys in GROUPS.items():
        out[f"summary_{group}"] = summary(source, keys, start, end)
        out[f"retrans_{group}"] = retrans(source, keys, start, end)
    for column in ("delivery_rate_bps", "srtt_us", "min_rtt_us"):
        out[f"cdf_{column}"] = cdf(source, column, start, end)
    out["control_groups"] = control_groups(source, start, end, 1000)
    out["control_retrans"] = control_retrans(source, start, end, 1000)
    for metric in DUTY_METRICS:
        out[f"control_windows_{metric}"] = control_windows(
            source, 300, start, end, 1000, metric)
    labels = ("", "ab/treatment")     # "": records outside a test
    out["ab_records"] = ab_records(source, labels, start, end)
    out["ab_connections"] = ab_connections(source, labels, start, end)
    out["group_records"] = group_records(source, *control_group, start,
                                         end, 1000)
    out["group_connections"] = group_connections(source, *control_group,
                                                 start, end, 1000)
    return out


def _quote(text):
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def file_source(paths):
    """chDB's source over the store's files ``paths``: one file() per
    directory and format (store.file_format()), naming its files
    ({a,b,...}), with schema.py's structure."""
    if not paths:
        raise ValueError("no record files to query")
    groups = {}
    for p in paths:
        key = os.path.dirname(p), store.file_format(p)
        groups.setdefault(key, []).append(os.path.basename(p))
    parts = []
    for (directory, fmt), names in sorted(groups.items()):
        pattern = names[0] if len(names) == 1 \
            else "{" + ",".join(names) + "}"
        parts.append(f"SELECT * FROM file("
                     f"{_quote(os.path.join(directory, pattern))}, "
                     f"'{fmt}', {_quote(schema.structure())})")
    return "(" + " UNION ALL ".join(parts) + ")"


def parse_rows(text):
    """A JSONEachRow answer as a list of dicts. 18.16 quotes 64-bit
    integers and current servers do not: the callers convert."""
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def _labels(labels):
    return ", ".join(_quote(x) for x in labels)


def _records(source, where):
    """The records that ``where`` selects, one row each, for a bootstrap
    to resample: arm, host, cookie, peer, t (Unix seconds), rate
    (delivery rate, bit/s) and rate_ok (not app-limited), srtt (us) and
    srtt_ok."""
    return f"""SELECT ab_arm AS arm, host, cookie, peer_addr AS peer,
    toUInt32(time) AS t,
    toFloat64(ifNull(delivery_rate_bps, 0)) AS rate,
    toUInt8({RATE_OK}) AS rate_ok,
    toFloat64(ifNull(srtt_us, 0)) AS srtt,
    toUInt8(isNotNull(srtt_us)) AS srtt_ok
FROM {source}
WHERE {where}"""


def _connections(source, where, having="1"):
    """The connections of the records that ``where`` selects, one row
    each: arm, host, cookie, peer, first_time (its first record), and its
    bytes acked and retransmitted at their largest."""
    return f"""SELECT ab_arm AS arm, host, cookie, any(peer_addr) AS peer,
    min(toUInt32(time)) AS first_time,
    max(ifNull(bytes_acked, 0)) AS acked,
    max(ifNull(bytes_retrans, 0)) AS retrans
FROM {source}
WHERE {where}
GROUP BY ab_arm, host, cookie
HAVING {having}"""


def ab_records(source, labels, start, end):
    """The records of the A/B arms ``labels`` (_records())."""
    return _records(source, f"{_between(start, end)} AND "
                            f"ab_arm IN ({_labels(labels)})")


def ab_connections(source, labels, start, end):
    """The connections of the A/B arms ``labels`` (_connections())."""
    return _connections(source, f"{_between(start, end)} AND "
                                f"ab_arm IN ({_labels(labels)})")


def _group(prefix, cc, delta):
    """The records of one of control_groups()'s groups: ``delta`` in
    thousandths (the controller's unit), None for none."""
    milli = -1000 if delta is None else int(delta)
    return (f"peer_prefix = {_quote(prefix)} AND cc = {_quote(cc)} AND "
            f"round({DELTA_KEY} * 1000) = {milli} AND {NO_ARM}")


def group_records(source, prefix, cc, delta, start, end, min_bytes):
    """The records one of control_groups()'s groups counted, one row each
    (_records()): what the controller's leave rules resample."""
    return _records(source, f"{_between(start, end)} AND "
                            f"{_group(prefix, cc, delta)} AND "
                            f"{_large(min_bytes)}")


def group_connections(source, prefix, cc, delta, start, end, min_bytes):
    """The connections control_retrans() counted in one of
    control_groups()'s groups, one row each (_connections())."""
    return _connections(source, f"{_between(start, end)} AND "
                                f"{_group(prefix, cc, delta)}",
                        f"acked >= {int(min_bytes)}")


def read_records(engine, directory, where="1"):
    """The records of the store ``directory`` that ``where`` selects, as
    the collector made them: dicts without the columns a record lacks,
    time in Unix seconds; ordered by time, kind and cookie (one host's
    key, so the order is total)."""
    import tempfile
    with tempfile.TemporaryDirectory() as scratch:
        files = store.snapshot(directory, scratch)
        if not files:
            return []
        rows = engine.rows(
            f"SELECT * EXCEPT time, toUInt32(time) AS unix_time "
            f"FROM {file_source(files)} WHERE {where} "
            f"ORDER BY unix_time, kind, cookie SETTINGS "
            f"output_format_json_quote_64bit_integers = 0")
    out = []
    for row in rows:
        row["time"] = row.pop("unix_time")
        out.append({k: row[k] for k in schema.NAMES if row[k] is not None})
    return out


class QueryError(RuntimeError):
    """The engine refused a query."""


class Chdb:
    """The embedded engine: chDB in this process."""

    def __init__(self):
        try:
            import chdb
        except ImportError as err:
            raise QueryError(
                "the embedded store needs chDB: pip install chdb (in a "
                "source tree, scripts/deps installs it; see "
                "Documentation/fleet.rst)") from err
        self.chdb = chdb

    def rows(self, sql):
        try:
            return parse_rows(self.chdb.query(sql, "JSONEachRow").bytes()
                              .decode())
        except Exception as err:        # chDB raises its own RuntimeError
            raise QueryError(f"chDB: {err}") from err
