# SPDX-License-Identifier: GPL-2.0
"""copa-fleet's JSON lines store: batches on disk whole or not at all,
rotation, recovery of a crashed collector's torn line, a full disk, and
what a query reads while the collector writes."""
import errno
import json
import os

import pytest

from copa_tools.fleet import schema, store


def rec(cookie, t=1000, kind=schema.SAMPLE):
    return {"time": t, "host": "h", "kind": kind, "cookie": cookie,
            "local_addr": "10.0.0.1", "local_port": 1,
            "peer_addr": "10.0.0.2", "peer_port": 2,
            "peer_prefix": "10.0.0.0/24", "cc": "cubic", "ab_arm": "",
            "age_ms": 0, "srtt_us": 100 + cookie}


def cookies(paths):
    out = []
    for p in paths:
        with open(p) as f:
            out += [json.loads(line)["cookie"] for line in f]
    return out


def files(d, suffix):
    return sorted(os.path.join(d, n) for n in os.listdir(d)
                  if n.endswith(suffix))


def test_write_rotate_close(tmp_path):
    two = len(store.encode([rec(1), rec(2)]))
    s = store.JsonlStore(str(tmp_path), "h", rotate_bytes=two + 1)
    s.write([rec(1), rec(2)])
    assert files(tmp_path, store.DONE) == []    # still open: .part
    s.write([rec(3)])                           # past the size: rotated
    assert cookies(files(tmp_path, store.DONE)) == [1, 2, 3]
    s.write([rec(4)])
    s.close()
    assert cookies(files(tmp_path, store.DONE)) == [1, 2, 3, 4]
    assert files(tmp_path, store.PART) == []


def test_a_bad_record_writes_nothing(tmp_path):
    s = store.JsonlStore(str(tmp_path), "h")
    bad = rec(2)
    bad["srtt"] = 1
    with pytest.raises(schema.RecordError, match="unknown \\['srtt'\\]"):
        s.write([rec(1), bad])
    s.close()
    assert files(tmp_path, store.DONE) == []


def test_restart_recovers_a_torn_line(tmp_path):
    """A collector killed mid-write leaves a .part with a torn last line:
    the next start cuts that line (its batch was never acknowledged) and
    keeps every complete one."""
    s = store.JsonlStore(str(tmp_path), "h")
    s.write([rec(1), rec(2)])
    with open(s.path, "ab") as f:
        f.write(b'{"time": 1000, "host": "h", "ki')
    again = store.JsonlStore(str(tmp_path), "h")
    assert again.recovered_bytes == len(b'{"time": 1000, "host": "h", "ki')
    assert cookies(files(tmp_path, store.DONE)) == [1, 2]
    assert files(tmp_path, store.PART) == []


def test_full_disk_keeps_no_half_batch(tmp_path, monkeypatch):
    """ENOSPC after part of a batch: the file is cut back to where it
    was, the error names the directory, and the same batch written again
    lands once."""
    s = store.JsonlStore(str(tmp_path), "h")
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


def test_snapshot_reads_the_open_file_to_its_last_newline(tmp_path):
    state, scratch = tmp_path / "state", tmp_path / "scratch"
    scratch.mkdir()
    s = store.JsonlStore(str(state), "h", rotate_bytes=1)
    s.write([rec(1)])                           # rotated at once
    s.rotate_bytes = 1 << 20
    s.write([rec(2)])
    with open(s.path, "ab") as f:
        f.write(b'{"half')
    got = store.snapshot(str(state), str(scratch))
    assert len(got) == 2 and cookies(got) == [1, 2]
    assert got[1].startswith(str(scratch))


def test_expire_removes_old_files(tmp_path):
    s = store.JsonlStore(str(tmp_path), "h", rotate_bytes=1, keep_days=1)
    s.write([rec(1)])
    [old] = files(tmp_path, store.DONE)
    os.utime(old, (0, 0))
    s.write([rec(2)])
    assert cookies(files(tmp_path, store.DONE)) == [2]
