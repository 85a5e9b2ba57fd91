# SPDX-License-Identifier: GPL-2.0
"""copa-fleet's columnar path: a Batch's JSON lines are the lines
batch.jsonl() writes for the same records as dicts; its Native block is
what chDB reads back as those records; the columnar sock_diag decoder
agrees with decode_inet_diag(), message by message; sampling a column of
cookies agrees with sampled()."""
import json
import socket

import numpy as np
import pytest

from copa_tools import netlink
from copa_tools.fleet import batch, collector, native, queries, schema, \
    store

from test_fleet_records import diag, nlmsg, tcp_info


def columns(n):
    present = np.array([i % 3 != 0 for i in range(n)])
    return {"time": 1000, "host": 'h"%d', "kind": schema.SAMPLE,
            "cookie": list(range(n)), "local_addr": ["10.0.0.1"] * n,
            "local_port": [5201] * n,
            "peer_addr": [f"10.0.{i}.2" for i in range(n)],
            "peer_port": list(range(40000, 40000 + n)),
            "peer_prefix": [f"10.0.{i}.0/24" for i in range(n)],
            "cc": ["copa" if p else "cúbic" for p in present],
            "ab_arm": "", "age_ms": [i * 1000 for i in range(n)],
            "copa_delta": ([0.5 if p else None for p in present], present),
            "bytes_acked": (np.arange(n, dtype=np.uint64) + 2 ** 63,
                            np.arange(n) % 2 == 0),
            "app_limited": [i % 2 for i in range(n)]}


def test_batch_lines_are_the_dicts_lines():
    b = batch.Batch(7, columns(7))
    records = list(b)
    assert "copa_delta" not in records[0] and records[1]["copa_delta"] == 0.5
    assert "bytes_acked" not in records[1] \
        and records[2]["bytes_acked"] == 2 ** 63 + 2
    assert b.jsonl() == batch.jsonl(records)
    assert list(b[2:]) == records[2:] and len(b[2:]) == 5
    assert [json.loads(x) for x in b.jsonl().splitlines()] == records


def test_native_block_reads_back_as_the_records(tmp_path):
    """chDB reads a Batch's Native block, and the same records given as
    dicts, as those records: absent columns NULL, 64-bit values whole."""
    b = batch.Batch(7, columns(7))
    records = list(b)
    block = store.encode(b)
    assert native.whole_length(block + block[:-1]) == len(block)
    path = tmp_path / f"r{store.DONE}"
    path.write_bytes(block + store.encode(records))
    got = queries.Chdb().rows(f"SELECT *, toUInt32(time) AS t FROM "
                              f"{queries.file_source([str(path)])} "
                              f"ORDER BY cookie")
    for want, row in zip([r for r in records for _ in (0, 1)], got,
                         strict=True):
        row["time"] = row.pop("t")
        row = {k: int(v) if k in ("cookie", "bytes_acked") else v
               for k, v in row.items() if v is not None}
        assert row == want


def test_batch_is_checked_whole():
    cols = columns(2)
    del cols["host"]
    with pytest.raises(schema.RecordError, match="missing \\['host'\\]"):
        batch.Batch(2, cols)
    with pytest.raises(schema.RecordError, match="kind"):
        batch.Batch(2, dict(columns(2), kind="nope"))


def test_columns_agree_with_decode_inet_diag():
    msgs = [diag(7, b"copa", vegas=(1, 2, 3, 4)),
            diag(8, b"cubic", family=socket.AF_INET6, dst="2001:db8::9"),
            diag(9, None), diag(10)[:40],
            diag(11, info=tcp_info(rtt_us=5)[:100]),
            diag(12, b"bbr", dport=0)]
    buf = b"".join(nlmsg(m) for m in msgs)
    spans = [(a, b) for _, _, a, b in netlink.message_spans(buf)]
    cols = netlink.inet_diag_columns(buf, *zip(*spans),
                                     netlink.TCP_INFO_NAMES)
    assert cols["bad"] == [(3, "inet_diag message of 40 bytes, expected "
                               "at least 72")]
    code, names = cols["cc"]
    for j, i in enumerate(cols["index"]):
        d = netlink.decode_inet_diag(msgs[i])
        assert names[code[j]] == d["cc"]
        assert (int(cols["cookie"][j]), cols["sport"][j],
                cols["dport"][j]) == (d["cookie"], d["sport"], d["dport"])
        for side in ("src", "dst"):
            assert netlink._address(d["family"], cols[side][j].tobytes()) \
                == d[side]
        info = {k: int(v[j]) for k, (v, p) in cols["info"].items() if p[j]}
        assert info == d.get("info", {})
        assert cols["vegas_enabled"][j] == \
            d.get("vegas", {}).get("tcpv_enabled", -1)


def test_sampled_mask_is_sampled():
    cookies = np.arange(1, 20001, dtype=np.uint64) * np.uint64(7919)
    for fraction in (0.25, 0.5, 1 - 2 ** -53):
        mask = collector.sampled_mask(cookies, fraction)
        assert mask.tolist() == [collector.sampled(int(c), fraction)
                                 for c in cookies]
    assert collector.sampled_mask(cookies, 1.0) is None


def test_rates_saturate_rather_than_wrap():
    """tcp_info's rates are bytes/s; a rate near 2^64 / 8 (a socket's
    owner can set SO_MAX_PACING_RATE so) saturates in bits/s, in a sweep's
    columns and in a close's record alike."""
    top = 2 ** 64 - 1
    rates = np.array([5, top // 8, top // 8 + 1, top - 1], np.uint64)
    assert collector._scaled(rates, 8).tolist() == [40, top // 8 * 8,
                                                    top, top]
    d = netlink.decode_inet_diag(diag(7, info=tcp_info(
        delivery_rate=top // 8 + 1, pacing_rate=top - 1)))
    r = collector.record(d, schema.FINAL, 1000, "h", "10.0.0.0/24", "cubic",
                         None, None, 1000)
    assert r["delivery_rate_bps"] == top and r["pacing_rate_bps"] == top

