# SPDX-License-Identifier: GPL-2.0
"""The embedded store: records as JSON lines under a state directory.

The collector appends each sweep's records to one open file,
``HOST-START-PID.jsonl.part``, with one write() and an fsync(): what
write() returned for is on disk. A write that fails (ENOSPC, EIO) is cut
back with ftruncate() to the file's size before it, so a batch is on
disk whole or not at all and can be written again. At a size or an age
the file is renamed to ``.jsonl`` (rename() is atomic; the directory is
fsync'd). A collector that crashed leaves a ``.part`` whose last line may
be torn: recover() cuts that line (its batch was never acknowledged) and
renames the file, so a restart loses nothing already written.

Readers (queries.py) see the ``.jsonl`` files, and the complete lines of
the open ``.part`` through snapshot().
"""

import errno
import glob
import json
import os
import socket
import time

from ..files import fsync_dir
from . import schema
from .batch import Batch

PART = ".part"
DONE = ".jsonl"
# One encoder for every record: json.dumps() with separators builds a
# new one per call, a third of a record's cost.
_to_json = json.JSONEncoder(separators=(",", ":"),
                            check_circular=False).encode


class StoreError(OSError):
    """The state directory could not take a batch; nothing of it was
    kept, so the caller may write it again."""


def _complete_length(path):
    """The length of ``path`` up to and including its last newline."""
    with open(path, "rb") as f:
        size = f.seek(0, os.SEEK_END)
        pos = size
        while pos > 0:
            step = min(pos, 1 << 16)
            f.seek(pos - step)
            chunk = f.read(step)
            nl = chunk.rfind(b"\n")
            if nl >= 0:
                return pos - step + nl + 1
            pos -= step
    return 0


def recover(directory):
    """Finish the ``.part`` files a stopped collector left in
    ``directory``: cut a torn last line, rename to ``.jsonl`` (remove an
    empty one). Returns the number of bytes cut."""
    cut = 0
    for part in sorted(glob.glob(os.path.join(directory, "*" + DONE + PART))):
        keep = _complete_length(part)
        cut += os.path.getsize(part) - keep
        if keep == 0:
            os.unlink(part)
            continue
        with open(part, "r+b") as f:
            f.truncate(keep)
            os.fsync(f.fileno())
        os.rename(part, part[:-len(PART)])
    fsync_dir(directory)
    return cut


def encode(records):
    """``records`` as JSON lines, each checked against the schema; a
    Batch was checked whole when it was made."""
    if isinstance(records, Batch):
        return records.jsonl()
    lines = []
    for r in records:
        schema.check(r)
        lines.append(_to_json(r))
    return ("\n".join(lines) + "\n").encode() if lines else b""


class JsonlStore:
    """Appends batches of records to rotated JSON lines files."""

    def __init__(self, directory, host=None, rotate_bytes=64 << 20,
                 rotate_s=3600, keep_days=None):
        self.directory = directory
        self.host = host or socket.gethostname()
        self.rotate_bytes = rotate_bytes
        self.rotate_s = rotate_s
        self.keep_days = keep_days
        os.makedirs(directory, exist_ok=True)
        self.recovered_bytes = recover(directory)
        self.fd = None
        self.path = None
        self.size = 0
        self.opened = 0.0

    def _open(self):
        name = f"{self.host}-{time.time_ns()}-{os.getpid()}{DONE}{PART}"
        self.path = os.path.join(self.directory, name)
        self.fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND
                          | os.O_CLOEXEC, 0o644)
        fsync_dir(self.directory)
        self.size = 0
        self.opened = time.monotonic()

    def write(self, records):
        """Append ``records`` (dicts of schema columns) durably, whole or
        not at all: StoreError if the disk refused them."""
        data = encode(records)
        if not data:
            return
        try:
            if self.fd is None:
                self._open()
            self._append(data)
        except OSError as err:
            raise StoreError(err.errno, f"{self.directory}: cannot write "
                             f"{len(records)} records: "
                             f"{os.strerror(err.errno)}") from err
        if (self.size >= self.rotate_bytes
                or time.monotonic() - self.opened >= self.rotate_s):
            self.rotate()

    def _append(self, data):
        view = memoryview(data)
        try:
            while view:
                n = os.write(self.fd, view)
                if n == 0:
                    raise OSError(errno.EIO, "short write")
                view = view[n:]
            os.fsync(self.fd)
        except OSError:
            os.ftruncate(self.fd, self.size)
            raise
        self.size += len(data)

    def rotate(self):
        """Close the open file and make it a ``.jsonl`` readers see whole;
        then remove files older than keep_days."""
        if self.fd is None:
            return
        os.close(self.fd)
        self.fd = None
        if self.size:
            os.rename(self.path, self.path[:-len(PART)])
        else:
            os.unlink(self.path)
        fsync_dir(self.directory)
        if self.keep_days is not None:
            self.expire(time.time() - self.keep_days * 86400)

    def expire(self, before):
        """Remove the ``.jsonl`` files last written before ``before``."""
        for path in glob.glob(os.path.join(self.directory, "*" + DONE)):
            if os.path.getmtime(path) < before:
                os.unlink(path)

    def close(self):
        self.rotate()


def _listing(directory, suffix):
    return set(glob.glob(os.path.join(directory, "*" + suffix)))


def snapshot(directory, scratch):
    """The files a query reads now: every ``.jsonl`` of ``directory``, and
    the complete lines of each open ``.part`` copied into ``scratch`` (its
    last line may be being written). A ``.part`` the collector renames
    meanwhile is read as its ``.jsonl``, once."""
    done = _listing(directory, DONE)
    copies = {}
    for part in sorted(_listing(directory, DONE + PART)):
        try:
            keep = _complete_length(part)
            with open(part, "rb") as src:
                data = src.read(keep)
        except FileNotFoundError:       # renamed since the listing
            continue
        if data:
            copies[part[:-len(PART)]] = data
    done_now = _listing(directory, DONE)
    files = sorted(done | (done_now & set(copies)))
    for name, data in sorted(copies.items()):
        if name in done_now:
            continue
        copy = os.path.join(scratch, os.path.basename(name))
        with open(copy, "wb") as dst:
            dst.write(data)
        files.append(copy)
    for name in done_now - done:        # renamed between the listings
        if name not in files:
            files.append(name)
    return files
