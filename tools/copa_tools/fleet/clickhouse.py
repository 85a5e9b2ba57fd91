# SPDX-License-Identifier: GPL-2.0
"""copa-fleet's ClickHouse server: the table, rendered from schema.py, and
the sink that ships records to it over the HTTP interface.

The sink is spool first: write() (the collector's sink interface) puts
the records in a new file of the spool directory (a temporary file,
fsync'd, renamed) and returns; a sender thread inserts the spool's files
every batch_s seconds, oldest first and up to batch_rows records at a
time, with ``INSERT INTO ... FORMAT JSONEachRow``, and deletes them once
the server has answered 200. Each host thus makes about one insert per
batch_s, as ClickHouse wants (few large inserts, not many small ones).
While the server is down or refuses, the files wait and the sender
retries with exponential back-off and jitter.

No record is counted twice: ClickHouse 18.16 deduplicates inserts only in
Replicated tables (insert_deduplicate; a plain MergeTree's
non_replicated_deduplication_window came in later versions), so the sink
does it itself. A batch that may have reached the server (an attempt
that failed without an answer, or a file an earlier run left behind) is
sent again only after the sender has waited until no insert of this
sink still runs on the server (each carries a query_id with the sink's
prefix) and asked which of the batch's keys (schema.KEY) the table
already holds; only the others are sent. The same on every server
version, and the table stays a plain MergeTree that every query reads
without FINAL.

The spool holds at most max_spool_bytes: past it write() fails with
ENOSPC, as a full disk would.

A batch the server refuses for its content (a parse or type error) is
moved to spool/rejected/ with the server's message beside it, so it does
not hold up the rest; a spool file that cannot be read back is moved to
spool/corrupt/. Both are reported; moving a file back into the spool
directory queues it again.
"""

import base64
import errno
import http.client
import itertools
import json
import os
import random
import re
import socket
import sys
import threading
import time
import urllib.parse
import zlib

from ..files import fsync_dir
from . import batch, queries, schema

# Days a record is kept: the table's TTL where the server has TTL (19.6
# and later); on older servers (Debian's 18.16) drop old days with
# ALTER TABLE ... DROP PARTITION (Documentation/fleet.rst).
TTL_DAYS = 30
TTL_SINCE = (19, 6)

# The per-prefix queries group and filter by prefix, cc and time.
ORDER_BY = ("peer_prefix", "cc", "time")

# ClickHouse error codes of a batch refused for what it holds: set aside.
# Any other error (table missing, too many parts, memory, access) is the
# server's state, and the batch is retried.
DATA_ERRORS = {
    6,      # CANNOT_PARSE_TEXT
    25,     # CANNOT_PARSE_ESCAPE_SEQUENCE
    26,     # CANNOT_PARSE_QUOTED_STRING
    27,     # CANNOT_PARSE_INPUT_ASSERTION_FAILED
    38,     # CANNOT_PARSE_DATE
    41,     # CANNOT_PARSE_DATETIME
    53,     # TYPE_MISMATCH
    69,     # ARGUMENT_OUT_OF_BOUND
    70,     # CANNOT_CONVERT_TYPE
    72,     # CANNOT_PARSE_NUMBER
    117,    # INCORRECT_DATA (e.g. a field the table lacks)
    131,    # TOO_LARGE_STRING_SIZE
    349,    # CANNOT_INSERT_NULL_IN_ORDINARY_COLUMN
}


def quote(text):
    """``text`` as a ClickHouse string literal."""
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def create_table_sql(table=schema.TABLE, engine="MergeTree",
                     ttl_days=TTL_DAYS):
    """The CREATE TABLE statement for the records: schema.COLUMNS with
    their meanings as comments, partitioned by day, ordered for the
    per-prefix queries, and with a TTL of ``ttl_days`` unless it is None
    (servers older than 19.6 have no TTL). ``engine`` may be, on a
    cluster, "ReplicatedMergeTree('/clickhouse/tables/{shard}/t',
    '{replica}')"."""
    columns = ",\n".join(f"    {c.name} {c.type} COMMENT {quote(c.meaning)}"
                         for c in schema.COLUMNS)
    ttl = f"\nTTL time + INTERVAL {ttl_days} DAY" if ttl_days else ""
    return (f"CREATE TABLE IF NOT EXISTS {table}\n(\n{columns}\n)\n"
            f"ENGINE = {engine}\nPARTITION BY toDate(time)\n"
            f"ORDER BY ({', '.join(ORDER_BY)}){ttl}")


class ClickHouseError(Exception):
    """The server answered with an error; ``code`` is ClickHouse's error
    code (None if the answer had none)."""

    def __init__(self, status, text):
        match = re.match(r"Code: (\d+)", text)
        self.code = int(match.group(1)) if match else None
        self.status = status
        super().__init__(f"HTTP {status}: {text.strip()}")


class Unreachable(Exception):
    """No answer: the connection was refused, broke or timed out. Whatever
    was being inserted may or may not have been."""


class Server:
    """ClickHouse's HTTP interface at ``url``, e.g.
    http://user:password@host:8123/?database=fleet: its query parameters
    (database, user, password, settings) go with every request."""

    def __init__(self, url, timeout=30.0):
        parts = urllib.parse.urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"{url}: not an http:// or https:// URL")
        self.url = url
        self.scheme = parts.scheme
        self.host = parts.hostname
        self.port = parts.port
        self.params = urllib.parse.parse_qsl(parts.query)
        self.headers = {}
        if parts.username is not None:
            auth = f"{urllib.parse.unquote(parts.username)}:" \
                   f"{urllib.parse.unquote(parts.password or '')}"
            self.headers["Authorization"] = \
                "Basic " + base64.b64encode(auth.encode()).decode()
        self.timeout = timeout

    def __str__(self):
        return f"{self.scheme}://{self.host}:{self.port or ''}"

    def request(self, query, body=b"", query_id=None, settings=(),
                send=None):
        """POST ``query`` (with ``body`` after it, as an INSERT's data) and
        return the answer's text. ``settings`` are (name, value) pairs;
        ``send(conn, body)`` writes the body (tests interpose there).
        Raise ClickHouseError or Unreachable."""
        params = self.params + list(settings) + [("query", query)]
        if query_id:
            params.append(("query_id", query_id))
        cls = http.client.HTTPSConnection if self.scheme == "https" \
            else http.client.HTTPConnection
        conn = cls(self.host, self.port, timeout=self.timeout)
        try:
            conn.putrequest("POST", "/?" + urllib.parse.urlencode(params))
            for name, value in self.headers.items():
                conn.putheader(name, value)
            conn.putheader("Content-Length", str(len(body)))
            conn.endheaders()
            (send or send_body)(conn, body)
            response = conn.getresponse()
            text = response.read().decode(errors="replace")
        except (OSError, http.client.HTTPException) as e:
            raise Unreachable(str(e) or type(e).__name__) from e
        finally:
            conn.close()
        if response.status != 200:
            raise ClickHouseError(response.status, text)
        return text

    def version(self):
        """The server's version as a tuple of ints, e.g. (18, 16, 1)."""
        text = self.request("SELECT version()").strip()
        return tuple(int(n) for n in text.split(".") if n.isdigit())

    def create_table(self, table=schema.TABLE, engine="MergeTree"):
        """Create the records' table unless it exists, with a TTL where
        the server has TTL. Return the statement run."""
        ttl = TTL_DAYS if self.version() >= TTL_SINCE else None
        sql = create_table_sql(table, engine, ttl)
        self.request(sql)
        return sql


class Engine:
    """queries.py's engine (rows(sql)) over a server: what copa-fleet
    report reads a fleet's table with."""

    def __init__(self, url):
        try:
            self.server = Server(url)
        except ValueError as e:
            raise queries.QueryError(str(e)) from e

    def rows(self, sql):
        try:
            return queries.parse_rows(
                self.server.request(sql + "\nFORMAT JSONEachRow"))
        except (ClickHouseError, Unreachable) as e:
            raise queries.QueryError(f"{self.server}: {e}") from e


def send_body(conn, body, piece=1 << 20):
    for i in range(0, len(body), piece):
        conn.send(body[i:i + piece])


def record_key(record):
    """schema.KEY's values of ``record``, as the server returns them."""
    return (record["host"], int(record["cookie"]), int(record["time"]),
            record["kind"])


def stored_keys_sql(table, records):
    """A query for the keys of the rows of ``table`` that may be some of
    ``records``: their hosts and prefixes (the sorting key's first
    column), within their span of time."""
    hosts = ", ".join(sorted({quote(r["host"]) for r in records}))
    prefixes = ", ".join(sorted({quote(r["peer_prefix"]) for r in records}))
    times = [int(r["time"]) for r in records]
    return (f"SELECT host, cookie, toUInt32(time) AS time, kind "
            f"FROM {table} WHERE host IN ({hosts}) "
            f"AND peer_prefix IN ({prefixes}) "
            f"AND time >= toDateTime({min(times)}) "
            f"AND time <= toDateTime({max(times)})")


class SpoolError(Exception):
    """A spool file that cannot be read back as records."""


def read_spool_file(path, parse=True):
    """The (line, record) pairs of a spool file; without ``parse``, the
    records are None (a file this sink wrote and has not sent yet: its
    records were checked then). Raise SpoolError naming the file and line
    that is not a JSON object with the key columns, or is cut short."""
    pairs = []
    with open(path, "rb") as f:
        for number, line in enumerate(f, 1):
            if not parse:
                pairs.append((line, None))
                continue
            try:
                record = json.loads(line)
                schema.check(record)
                record_key(record)
                if not all(isinstance(record[k], str)
                           for k in ("host", "kind", "peer_prefix")):
                    raise TypeError("host, kind or peer_prefix is not "
                                    "a string")
            except (ValueError, TypeError, KeyError, AttributeError) as e:
                raise SpoolError(f"{path}, line {number}: not a record "
                                 f"({type(e).__name__}: {e})") from e
            pairs.append((line, record))
    if pairs and not pairs[-1][0].endswith(b"\n"):
        raise SpoolError(f"{path}, line {len(pairs)}: truncated")
    return pairs


def backoff_delay(failures, base, cap):
    """Seconds to wait after ``failures`` consecutive failures:
    exponential, capped, with jitter so hosts do not retry in step."""
    return min(cap, base * 2 ** (failures - 1)) * random.uniform(0.5, 1.0)


class Sink:
    """Ships records to ``url``'s table through a spool directory (see the
    module's doc). write() from any thread; start() the sender thread, or
    call drain() to send in the caller's thread."""

    def __init__(self, url, spool_dir, table=schema.TABLE, batch_rows=50000,
                 batch_s=10.0, backoff=(1.0, 60.0), timeout=30.0,
                 max_spool_bytes=1 << 30, report=None):
        self.server = Server(url, timeout)
        self.table = table
        self.spool = spool_dir
        self.batch_rows = batch_rows
        self.batch_s = batch_s
        self.max_spool_bytes = max_spool_bytes
        self.backoff = backoff
        self.report = report or (lambda msg: print(
            f"copa-fleet: clickhouse: {msg}", file=sys.stderr, flush=True))
        for sub in ("", "rejected", "corrupt"):
            os.makedirs(os.path.join(spool_dir, sub), exist_ok=True)
        for name in os.listdir(spool_dir):
            if name.endswith(".tmp"):     # a write() that never returned
                os.unlink(os.path.join(spool_dir, name))
        tag = zlib.crc32(os.path.realpath(spool_dir).encode())
        self.query_prefix = f"copa-fleet-{socket.gethostname()}-{tag:08x}-"
        self.sent_rows = 0
        self.failures = 0
        self._last_error = None
        self._fresh = set()     # spooled by this sink, never sent
        self._written = itertools.count()
        self.spool_bytes = sum(os.path.getsize(os.path.join(spool_dir, n))
                               for n in self.spooled())
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._thread = None

    # The spool.

    def write(self, records):
        """Write ``records`` (dicts of schema.COLUMNS) to a new spool file,
        durably, before returning. Raise schema.RecordError for a record
        that does not fit the schema, and OSError if the file cannot be
        written (ENOSPC too when the spool would outgrow
        max_spool_bytes); either way nothing is spooled."""
        data = batch.jsonl(records)
        if not data:
            return
        if self.spool_bytes + len(data) > self.max_spool_bytes:
            raise OSError(errno.ENOSPC, f"the ClickHouse spool {self.spool} "
                          f"holds {self.spool_bytes >> 20} MB, its limit "
                          f"{self.max_spool_bytes >> 20} MB")
        name = f"{time.time_ns():020d}-{os.getpid()}-" \
               f"{next(self._written):08d}.jsonl"
        tmp = os.path.join(self.spool, f".{name}.tmp")
        try:
            with open(tmp, "wb") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
            with self._lock:
                os.rename(tmp, os.path.join(self.spool, name))
                self._fresh.add(name)
                self.spool_bytes += len(data)
        except BaseException:
            try:
                os.unlink(tmp)
            except OSError:
                pass
            raise
        fsync_dir(self.spool)

    def spooled(self):
        """The spool's files waiting to be sent, oldest first."""
        return sorted(n for n in os.listdir(self.spool)
                      if n.endswith(".jsonl") and not n.startswith("."))

    def _unspool(self, name, sub=None):
        """Delete spool file ``name``, or move it into ``sub``."""
        path = os.path.join(self.spool, name)
        size = os.path.getsize(path)
        if sub:
            os.rename(path, os.path.join(self.spool, sub, name))
        else:
            os.unlink(path)
        with self._lock:
            self.spool_bytes -= size

    def _set_aside(self, name, sub, why):
        self._unspool(name, sub)
        with open(os.path.join(self.spool, sub, name + ".error"), "w") as f:
            f.write(why + "\n")
        fsync_dir(self.spool)
        self.report(f"{why}; moved to {os.path.join(self.spool, sub)}/")

    # Sending.

    def drain(self, deadline=None):
        """Send the spool's files until none is left (return True) or
        ``deadline`` (time.monotonic()) passes or stop() is called (return
        False); wait between failed attempts with back-off."""
        while not self._stop.is_set():
            if self.send_once():
                if not self.spooled():
                    return True
                continue
            delay = backoff_delay(self.failures, *self.backoff)
            if deadline is not None and \
                    time.monotonic() + delay > deadline:
                return False
            self._stop.wait(delay)
        return False

    def send_once(self):
        """One attempt at the oldest batch of the spool. Return False if
        it failed and should be retried later, True otherwise."""
        batch = self._next_batch()
        if not batch:
            return True
        try:
            self._send(batch)
        except (ClickHouseError, Unreachable) as e:
            self.failures += 1
            if str(e) != self._last_error:
                self.report(f"{self.server}: {e}; retrying, "
                            f"{len(self.spooled())} file(s) spooled in "
                            f"{self.spool}")
                self._last_error = str(e)
            return False
        if self.failures:
            self.report(f"{self.server}: sending again after "
                        f"{self.failures} failed attempt(s)")
        self.failures = 0
        self._last_error = None
        return True

    def _next_batch(self):
        """Oldest spool files, read, up to batch_rows records (at least
        one file), all never sent or all maybe sent before: a list of
        (name, pairs). Unreadable ones are set aside."""
        batch, rows, first_fresh = [], 0, None
        for name in self.spooled():
            with self._lock:
                fresh = name in self._fresh
            if batch and fresh != first_fresh:
                break
            pairs = self._read(name, parse=not fresh)
            if pairs is None:
                continue
            if batch and rows + len(pairs) > self.batch_rows:
                break
            first_fresh = fresh
            batch.append((name, pairs))
            rows += len(pairs)
        return batch

    def _read(self, name, parse=True):
        """read_spool_file() of spool file ``name``, or None if it was
        unreadable and has been set aside."""
        try:
            return read_spool_file(os.path.join(self.spool, name), parse)
        except (SpoolError, OSError) as e:
            self._set_aside(name, "corrupt", f"corrupt spool file: {e}")
            return None

    def _send(self, batch):
        """Insert ``batch``; on a refusal for content, send its files one
        by one and set aside the ones refused."""
        try:
            self._insert(batch)
        except ClickHouseError as e:
            if e.code not in DATA_ERRORS:
                raise
            if len(batch) > 1:
                for name, _ in batch:
                    pairs = self._read(name)
                    if pairs is not None:
                        self._send([(name, pairs)])
                return
            self._set_aside(batch[0][0], "rejected",
                            f"{self.server} refused {batch[0][0]}: {e}")

    def _insert(self, batch):
        names = [name for name, _ in batch]
        with self._lock:
            fresh = all(n in self._fresh for n in names)
            self._fresh.difference_update(names)
        pairs = [p for _, file_pairs in batch for p in file_pairs]
        if not fresh:
            pairs = self._not_yet_stored(pairs)
        if pairs:
            body = b"".join(line for line, _ in pairs)
            self.server.request(
                f"INSERT INTO {self.table} FORMAT JSONEachRow", body,
                query_id=self.query_prefix + names[0].split(".")[0],
                send=self.send_body)
        for name in names:
            self._unspool(name)
        fsync_dir(self.spool)
        self.sent_rows += len(pairs)

    def send_body(self, conn, body):
        send_body(conn, body)

    def _not_yet_stored(self, pairs):
        """The pairs whose records the table does not hold, once no
        insert of this sink runs on the server any more."""
        while int(self.server.request(
                f"SELECT count() FROM system.processes WHERE query_id "
                f"LIKE {quote(self.query_prefix + '%')}")):
            if self._stop.wait(0.1):
                raise Unreachable("stopped while an earlier insert ran")
        answer = self.server.request(
            stored_keys_sql(self.table, [r for _, r in pairs]) +
            " FORMAT JSONEachRow",
            settings=[("max_query_size", 1 << 26)])
        stored = {record_key(json.loads(line))
                  for line in answer.splitlines()}
        return [p for p in pairs if record_key(p[1]) not in stored]

    # The sender thread.

    def start(self):
        self._thread = threading.Thread(target=self._run, daemon=True,
                                        name="copa-fleet clickhouse sink")
        self._thread.start()

    def _run(self):
        while not self._stop.is_set():
            try:
                self.drain()
            except OSError as e:    # the spool directory itself failed
                self.report(f"{self.spool}: {e}; trying again in "
                            f"{self.batch_s:g} s")
            self._wake.wait(self.batch_s)
            self._wake.clear()

    def stop(self, timeout=10.0):
        """Give the sender thread up to ``timeout`` seconds to empty the
        spool, then stop it. What is left stays spooled for the next
        run."""
        deadline = time.monotonic() + timeout
        self._wake.set()
        while self._thread and self.spooled() and \
                time.monotonic() < deadline:
            time.sleep(0.1)
        self._stop.set()
        self._wake.set()
        if self._thread:
            self._thread.join()
            self._thread = None
