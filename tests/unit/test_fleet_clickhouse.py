# SPDX-License-Identifier: GPL-2.0
"""copa-fleet's ClickHouse side against a real server: Debian's
clickhouse-server (18.16 on bookworm), started privately by
tests/clickhouse_server.py. The table from schema.py, the sink's inserts,
its spool while the server is down, no record lost or counted twice when
the server is killed mid-batch, and the bad input: a refused connection,
a refused batch, a corrupt spool file."""

import errno
import json
import os
import re
import sys
import time

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from clickhouse_server import (  # noqa: E402
    ClickHouseServer, available, free_port)
from copa_tools.fleet import clickhouse, schema  # noqa: E402

pytestmark = pytest.mark.skipif(
    not available(), reason="clickhouse-server is missing (run scripts/deps)")

DAY = 1795737600        # 2026-11-27 00:00:00 UTC


def record(i, time=DAY + 3600, host="h1"):
    """A record of schema.COLUMNS: every required column, some of the
    others, unique key (host, i, time, "sample")."""
    return {
        "time": time + i % 600, "host": host, "kind": schema.SAMPLE,
        "cookie": i, "local_addr": "192.0.2.1", "local_port": 443,
        "peer_addr": f"198.51.100.{i % 250}", "peer_port": 40000 + i % 1000,
        "peer_prefix": f"198.51.{i % 7}.0/24",
        "cc": ("cubic", "bbr", "copa")[i % 3], "ab_arm": "",
        "copa_delta": 0.5 if i % 3 == 2 else None,
        "delivery_rate_bps": 1000000 + i, "app_limited": i % 2,
        "min_rtt_us": 1000 + i % 50, "srtt_us": 2000 + i % 500,
        "rttvar_us": 100, "bytes_acked": 10 * i, "bytes_sent": 11 * i,
        "bytes_retrans": i, "cwnd_segs": 10, "age_ms": i,
    }


def records(n, start=0, **kw):
    return [record(i, **kw) for i in range(start, start + n)]


@pytest.fixture(scope="module")
def server():
    with ClickHouseServer() as s:
        yield s


@pytest.fixture
def table(server):
    """An empty records table on the server; its name."""
    server.query(f"DROP TABLE IF EXISTS {schema.TABLE}")
    clickhouse.Server(server.url).create_table()
    return schema.TABLE


@pytest.fixture
def reports():
    return []


@pytest.fixture
def sink(server, table, tmp_path, reports):
    return clickhouse.Sink(server.url, str(tmp_path / "spool"),
                           backoff=(0.01, 0.05), timeout=10,
                           report=reports.append)


def counts(server):
    """(rows, distinct keys) in the table."""
    rows, keys = server.query(
        f"SELECT count(), uniqExact({', '.join(schema.KEY)}) "
        f"FROM {schema.TABLE}").split()
    return int(rows), int(keys)


def test_table_has_schema_columns(server, table):
    got = server.query(f"SELECT name, type FROM system.columns WHERE "
                       f"table = '{table}' FORMAT TSV").splitlines()
    assert got == [f"{c.name}\t{c.type}" for c in schema.COLUMNS]
    ddl = server.query(f"SHOW CREATE TABLE {table} FORMAT TSVRaw")
    assert "PARTITION BY toDate(time)" in ddl
    assert f"ORDER BY ({', '.join(clickhouse.ORDER_BY)})" in ddl


def test_ttl_where_the_server_has_it(server, table):
    """Current servers take the TTL; 18.16 refuses it (a syntax error), so
    create_table leaves it out there."""
    version = clickhouse.Server(server.url).version()
    ddl = server.query(f"SHOW CREATE TABLE {table} FORMAT TSVRaw")
    assert ("TTL time + toIntervalDay(30)" in ddl) == \
        (version >= clickhouse.TTL_SINCE)
    if version < clickhouse.TTL_SINCE:
        with pytest.raises(clickhouse.ClickHouseError) as e:
            clickhouse.Server(server.url).request(
                clickhouse.create_table_sql("ttl_test"))
        assert e.value.code == 62


def test_table_on_the_current_engine(tmp_path):
    """chDB's engine (current ClickHouse) takes the table with its TTL,
    the records and the sink's query for keys already stored."""
    session = pytest.importorskip("chdb.session")
    s = session.Session(str(tmp_path / "chdb"))
    try:
        s.query(clickhouse.create_table_sql())
        ddl = str(s.query(f"SHOW CREATE TABLE {schema.TABLE}", "TSVRaw"))
        assert "TTL time + toIntervalDay(30)" in ddl
        batch = records(10)
        s.query(f"INSERT INTO {schema.TABLE} FORMAT JSONEachRow " +
                "\n".join(json.dumps(r) for r in batch[:6]))
        answer = s.query(clickhouse.stored_keys_sql(schema.TABLE, batch),
                         "JSONEachRow")
        stored = {clickhouse.record_key(json.loads(line))
                  for line in str(answer).splitlines()}
        assert stored == {clickhouse.record_key(r) for r in batch[:6]}
    finally:
        s.close()


def test_drop_partition_expires_a_day(server, table, sink):
    """What 18.16 has instead of a TTL (Documentation/fleet.rst)."""
    sink.write(records(10, time=DAY - 86400))
    sink.write(records(10, start=10))
    assert sink.drain()
    server.query(f"ALTER TABLE {table} DROP PARTITION '2026-11-26'")
    assert counts(server) == (10, 10)


def test_sink_inserts_every_record_once(server, sink):
    for start in range(0, 3000, 1000):
        sink.write(records(1000, start=start))
    assert len(sink.spooled()) == 3
    assert sink.drain()
    assert sink.spooled() == []
    assert counts(server) == (3000, 3000)
    assert sink.sent_rows == 3000


def test_batches_are_bounded(server, sink):
    sink.batch_rows = 1500
    for start in range(0, 3000, 1000):
        sink.write(records(1000, start=start))
    assert sink.send_once()
    assert len(sink.spooled()) == 2     # 1000 + 1000 > 1500: one file
    assert sink.drain()
    assert counts(server) == (3000, 3000)


def test_write_refuses_a_record_outside_the_schema(sink):
    bad = record(1)
    del bad["host"]
    with pytest.raises(schema.RecordError):
        sink.write([record(0), bad])
    assert sink.spooled() == []


def test_spool_limit(server, sink):
    """A write that would take the spool past its limit is refused as a
    full disk is (the collector holds the records and retries) and
    spools nothing; sending makes room."""
    sink.write(records(100))
    sink.max_spool_bytes = sink.spool_bytes + 1000
    with pytest.raises(OSError) as e:
        sink.write(records(100, start=100))
    assert e.value.errno == errno.ENOSPC and "spool" in str(e.value)
    assert len(sink.spooled()) == 1
    assert sink.drain()
    assert sink.spool_bytes == 0
    sink.write(records(1, start=100))
    assert sink.drain()
    assert counts(server) == (101, 101)


def test_refused_connection_spools(tmp_path, reports):
    """Nobody listens: a clear error, the records wait in the spool."""
    s = clickhouse.Sink(f"http://127.0.0.1:{free_port()}",
                        str(tmp_path / "spool"), report=reports.append)
    s.write(records(5))
    assert not s.send_once()
    assert len(s.spooled()) == 1
    assert "Connection refused" in reports[0]
    assert "1 file(s) spooled" in reports[0]


def test_server_down_then_back(server, sink, reports):
    server.kill()
    try:
        sink.write(records(100))
        assert not sink.send_once()
        sink.write(records(100, start=100))
    finally:
        server.start()
    assert sink.drain()
    assert counts(server) == (200, 200)
    assert re.search(r"sending again after \d+ failed attempt", reports[-1])


def test_kill_9_mid_batch(server, sink):
    """The server is killed (SIGKILL) halfway through a batch's body and
    started again: once the sink has sent again, every record is in the
    table exactly once."""
    sink.write(records(500))
    assert sink.drain()
    sink.write(records(20000, start=500))
    sink.write(records(500, start=20500))

    def send_then_kill(conn, body):
        conn.send(body[:len(body) // 2])
        server.restart()
        conn.send(body[len(body) // 2:])

    sink.send_body = send_then_kill
    assert not sink.send_once()
    del sink.send_body
    assert sink.drain()
    assert counts(server) == (21000, 21000)
    assert sink.sent_rows == 21000


def test_kill_9_after_stored_before_answer(server, sink):
    """The server stores the batch and is killed before its answer
    reaches the sink: the sink finds the records there and sends none of
    them again."""
    sink.write(records(500))
    assert sink.drain()
    sink.write(records(20000, start=500))
    sink.write(records(500, start=20500))

    def send_store_kill(conn, body):
        conn.send(body)
        deadline = time.monotonic() + 20
        while counts(server)[0] < 21000 and time.monotonic() < deadline:
            time.sleep(0.05)
        server.restart()
        raise ConnectionResetError("the answer was lost (test)")

    sink.send_body = send_store_kill
    assert not sink.send_once()
    del sink.send_body
    assert counts(server) == (21000, 21000)
    assert sink.drain()
    assert counts(server) == (21000, 21000)
    assert sink.sent_rows == 500
    assert sink.spooled() == []


def test_resend_waits_for_an_insert_still_running(server, sink):
    """Before it looks for stored keys, the sink waits until no query
    with its query_id prefix runs on the server (here a 1 s sleep)."""
    import threading
    sleeper = threading.Thread(target=clickhouse.Server(server.url).request,
                               args=("SELECT sleep(1)",),
                               kwargs={"query_id": sink.query_prefix + "x"})
    sleeper.start()
    time.sleep(0.2)
    start = time.monotonic()
    assert sink._not_yet_stored([(b"", record(0))]) == [(b"", record(0))]
    assert time.monotonic() - start >= 0.5
    sleeper.join()


def test_restart_after_stored_before_deleted(server, table, tmp_path,
                                             reports):
    """A run that stopped after the server stored a batch but before it
    deleted the spool file: the next run does not store it again."""
    spool = str(tmp_path / "spool")
    first = clickhouse.Sink(server.url, spool, report=reports.append)
    first.write(records(300))
    first.write(records(300, start=300))
    name = first.spooled()[0]
    with open(os.path.join(spool, name), "rb") as f:
        clickhouse.Server(server.url).request(
            f"INSERT INTO {table} FORMAT JSONEachRow", f.read())
    second = clickhouse.Sink(server.url, spool, report=reports.append)
    assert second.drain()
    assert counts(server) == (600, 600)
    assert second.sent_rows == 300


def test_refused_batch_set_aside(server, sink, reports):
    """A batch the server refuses for its content goes to rejected/ with
    the server's message; the batches around it are stored."""
    sink.write(records(100))
    bad = records(3, start=100)
    bad[1]["cookie"] = -1           # UInt64: code 72 on 18.16
    sink.write(bad)
    sink.write(records(100, start=200))
    assert sink.drain()
    assert counts(server) == (200, 200)
    rejected = os.path.join(sink.spool, "rejected")
    names = sorted(os.listdir(rejected))
    assert len(names) == 2 and names[1] == names[0] + ".error"
    with open(os.path.join(rejected, names[1])) as f:
        why = f.read()
    assert "refused" in why and "Code: 72" in why
    assert any("refused" in r and "rejected" in r for r in reports)


def test_corrupt_spool_file_set_aside(server, sink, reports):
    """A line that is not a record, and a file cut short."""
    sink.write(records(50))
    with open(os.path.join(sink.spool, "00000000000000000001-1.jsonl"),
              "wb") as f:
        f.write(b'{"time": 1, "host": "h1"\n')
    with open(os.path.join(sink.spool, "00000000000000000002-1.jsonl"),
              "wb") as f:
        f.write(json.dumps(record(100)).encode() + b"\n" +
                json.dumps(record(101)).encode())
    sink.write(records(50, start=50))
    assert sink.drain()
    assert counts(server) == (100, 100)
    corrupt = os.listdir(os.path.join(sink.spool, "corrupt"))
    assert sorted(corrupt) == ["00000000000000000001-1.jsonl",
                               "00000000000000000001-1.jsonl.error",
                               "00000000000000000002-1.jsonl",
                               "00000000000000000002-1.jsonl.error"]
    assert "corrupt spool file" in reports[0] and "line 1" in reports[0]
    assert "line 2: truncated" in reports[1]


def test_sender_thread(server, sink):
    sink.batch_s = 60           # stop() sends what is spooled at once
    sink.start()
    sink.write(records(100))
    sink.write(records(100, start=100))
    sink.stop(timeout=20)
    assert sink.spooled() == []
    assert counts(server) == (200, 200)


def test_backoff_grows_to_its_cap_with_jitter():
    delays = [clickhouse.backoff_delay(n, 1.0, 60.0) for n in range(1, 10)]
    assert 0.5 <= delays[0] <= 1.0
    assert 4.0 <= delays[3] <= 8.0
    assert all(30.0 <= d <= 60.0 for d in delays[7:])


def test_bad_url():
    with pytest.raises(ValueError, match="not an http"):
        clickhouse.Server("clickhouse:9000")


def test_every_query_runs_on_the_server(server, sink):
    """queries.py's text, written once for chDB and the server, on this
    server (18.16 on bookworm) over the table."""
    from copa_tools.fleet import queries
    sink.write(records(300))
    assert sink.drain()
    http = clickhouse.Server(server.url)
    failed = {}
    group = ("198.51.2.0/24", "copa", 500)      # record(2) and others
    for name, sql in queries.every_query(schema.TABLE, group).items():
        try:
            rows = queries.parse_rows(
                http.request(sql + " FORMAT JSONEachRow"))
        except clickhouse.ClickHouseError as e:
            failed[name] = str(e)
            continue
        assert rows, name
    assert not failed


def test_report_reads_the_server(server, sink):
    """copa-fleet report --clickhouse: report.build over the table."""
    from copa_tools.fleet import report
    sink.write(records(300))
    assert sink.drain()
    tables = report.build(clickhouse.Engine(server.url), schema.TABLE,
                          0, 2 ** 32 - 1, "cubic")
    by_cc = {r["cc"]: r for r in tables["by_cc"]}
    assert sorted(by_cc) == ["bbr", "copa", "cubic"]
    assert by_cc["copa"]["connections"] == 100


def test_engine_says_which_server_failed():
    from copa_tools.fleet import queries
    engine = clickhouse.Engine(f"http://127.0.0.1:{free_port()}")
    with pytest.raises(queries.QueryError, match="Connection refused"):
        engine.rows("SELECT 1")


def cpu_seconds(pid):
    """User and system CPU time of process ``pid`` so far."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def measure(rows, batch=10000):
    """The sink's insert rate into a private server: write() ``rows``
    records in spool files of ``batch``, then drain() them."""
    import tempfile
    with ClickHouseServer() as server, \
            tempfile.TemporaryDirectory() as spool:
        clickhouse.Server(server.url).create_table()
        sink = clickhouse.Sink(server.url, spool)
        start, cpu = time.monotonic(), time.process_time()
        for i in range(0, rows, batch):
            sink.write(records(min(batch, rows - i), start=i))
        spooled, spooled_cpu = time.monotonic(), time.process_time()
        size = sum(os.path.getsize(os.path.join(spool, n))
                   for n in sink.spooled())
        server_cpu = cpu_seconds(server.process.pid)
        assert sink.drain()
        end, end_cpu = time.monotonic(), time.process_time()
        server_cpu = cpu_seconds(server.process.pid) - server_cpu
        assert counts(server) == (rows, rows)
        version = server.query("SELECT version()").strip()
    print(f"{rows} rows, spool files of {batch}, server {version}:\n"
          f"write() {rows / (spooled - start):.0f} rows/s "
          f"({spooled_cpu - cpu:.1f} s CPU), "
          f"drain() {rows / (end - spooled):.0f} rows/s "
          f"({end_cpu - spooled_cpu:.1f} s CPU in the sink, "
          f"{server_cpu:.1f} s in the server), "
          f"{rows / (end - start):.0f} rows/s in all; "
          f"{size / rows:.0f} bytes a record in the spool")


if __name__ == "__main__":
    measure(int(sys.argv[1]) if len(sys.argv) > 1 else 500000)
