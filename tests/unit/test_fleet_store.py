# SPDX-License-Identifier: GPL-2.0
"""copa-fleet's store: batches on disk whole or not at all, rotation,
recovery of a crashed collector's torn block, a full disk, what a query
reads while the collector writes, and the JSON lines files of the
store's earlier format, all read back by chDB."""
import errno
import os

import pytest

from copa_tools.fleet import batch, queries, schema, store


def rec(cookie, t=1000, kind=schema.SAMPLE):
    return {"time": t, "host": "h", "kind": kind, "cookie": cookie,
            "local_addr": "10.0.0.1", "local_port": 1,
            "peer_addr": "10.0.0.2", "peer_port": 2,
            "peer_prefix": "10.0.0.0/24", "cc": "cubic", "ab_arm": "",
            "age_ms": 0, "srtt_us": 100 + cookie}


def cookies(paths):
    """The cookies of the records in ``paths``, as chDB reads them."""
    rows = queries.Chdb().rows(f"SELECT cookie FROM "
                               f"{queries.file_source(paths)} ORDER BY cookie")
    return [int(r["cookie"]) for r in rows]


def files(d, suffix):
    return sorted(os.path.join(d, n) for n in os.listdir(d)
                  if n.endswith(suffix))


def test_write_rotate_close(tmp_path):
    two = len(store.encode([rec(1), rec(2)]))
    s = store.Store(str(tmp_path), "h", rotate_bytes=two + 1)
    s.write([rec(1), rec(2)])
    assert files(tmp_path, store.DONE) == []    # still open: .part
    s.write([rec(3)])                           # past the size: rotated
    assert cookies(files(tmp_path, store.DONE)) == [1, 2, 3]
    s.write([rec(4)])
    s.close()
    assert cookies(files(tmp_path, store.DONE)) == [1, 2, 3, 4]
    assert files(tmp_path, store.PART) == []


def test_a_bad_record_writes_nothing(tmp_path):
    s = store.Store(str(tmp_path), "h")
    bad = rec(2)
    bad["srtt"] = 1
    with pytest.raises(schema.RecordError, match="unknown \\['srtt'\\]"):
        s.write([rec(1), bad])
    s.close()
    assert files(tmp_path, store.DONE) == []


@pytest.mark.parametrize("cut", [1, 5, 100, -1])
def test_restart_recovers_a_torn_block(tmp_path, cut):
    """A collector killed mid-write leaves a .part with a torn last block:
    the next start cuts that block (its batch was never acknowledged) and
    keeps every whole one."""
    s = store.Store(str(tmp_path), "h")
    s.write([rec(1), rec(2)])
    torn = store.encode([rec(3), rec(4)])[:cut]
    with open(s.path, "ab") as f:
        f.write(torn)
    again = store.Store(str(tmp_path), "h")
    assert again.recovered_bytes == len(torn)
    assert cookies(files(tmp_path, store.DONE)) == [1, 2]
    assert files(tmp_path, store.PART) == []


def test_json_lines_of_the_earlier_format_are_kept(tmp_path):
    """An upgrade finds the earlier store's files: a finished .jsonl and a
    crashed collector's .jsonl.part with a torn line. The torn line is
    cut, the rest read beside the new files, and both expire alike."""
    old = tmp_path / "h-1-1.jsonl"
    old.write_bytes(batch.jsonl([rec(1)]))
    part = tmp_path / "h-2-1.jsonl.part"
    part.write_bytes(batch.jsonl([rec(2)]) + b'{"time": 1000, "ho')
    s = store.Store(str(tmp_path), "h", keep_days=1)
    assert s.recovered_bytes == len(b'{"time": 1000, "ho')
    s.write([rec(3)])
    got = store.snapshot(str(tmp_path), str(tmp_path))
    assert cookies(got) == [1, 2, 3]
    os.utime(old, (0, 0))
    s.rotate()
    assert cookies(store.snapshot(str(tmp_path), str(tmp_path))) == [2, 3]


def test_full_disk_keeps_no_half_batch(tmp_path, monkeypatch):
    """ENOSPC after part of a batch: the file is cut back to where it
    was, the error names the directory, and the same batch written again
    lands once."""
    s = store.Store(str(tmp_path), "h")
    s.write([rec(1)])
    real_write = os.write
    calls = []

    def full(fd, data):
        calls.append(len(data))
        if len(calls) == 1:
            return real_write(fd, bytes(data)[:10])
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(store.os, "write", full)
    with pytest.raises(store.StoreError, match="No space left") as err:
        s.write([rec(2), rec(3)])
    assert err.value.errno == errno.ENOSPC and str(tmp_path) in str(err.value)
    monkeypatch.setattr(store.os, "write", real_write)
    assert os.path.getsize(s.path) == s.size
    s.write([rec(2), rec(3)])
    s.close()
    assert cookies(files(tmp_path, store.DONE)) == [1, 2, 3]


def test_snapshot_reads_the_open_file_to_its_last_whole_block(tmp_path):
    state, scratch = tmp_path / "state", tmp_path / "scratch"
    scratch.mkdir()
    s = store.Store(str(state), "h", rotate_bytes=1)
    s.write([rec(1)])                           # rotated at once
    s.rotate_bytes = 1 << 20
    s.write([rec(2)])
    with open(s.path, "ab") as f:
        f.write(store.encode([rec(3)])[:-1])
    got = store.snapshot(str(state), str(scratch))
    assert len(got) == 2 and cookies(got) == [1, 2]
    assert got[1].startswith(str(scratch))


def test_expire_removes_old_files(tmp_path):
    s = store.Store(str(tmp_path), "h", rotate_bytes=1, keep_days=1)
    s.write([rec(1)])
    [old] = files(tmp_path, store.DONE)
    os.utime(old, (0, 0))
    s.write([rec(2)])
    assert cookies(files(tmp_path, store.DONE)) == [2]
