# SPDX-License-Identifier: GPL-2.0
"""The embedded store: records in ClickHouse's Native format under a
state directory.

The collector appends each batch of records (a sweep, a second's closes)
as one Native block (native.py) to one open file,
``HOST-START-PID.native.part``, with one write() and an fsync(): what
write() returned for is on disk. A write that fails (ENOSPC, EIO) is cut
back with ftruncate() to the file's size before it, so a batch is on
disk whole or not at all and can be written again. At a size or an age
the file is renamed to ``.native`` (rename() is atomic; the directory is
fsync'd). A collector that crashed leaves a ``.part`` whose last block
may be torn: recover() cuts that block (its batch was never
acknowledged) and renames the file, so a restart loses nothing already
written.

Native rather than JSON lines: a sweep formats no number as text, which
was most of its cost (Documentation/fleet.rst, "Scale"). Files of JSON
lines (``.jsonl``, the store's format before) are still recovered, read
and expired the same way, so an upgrade loses nothing.

Readers (queries.py) see the finished files, and the whole blocks (or
lines) of each open ``.part`` through snapshot().
"""

import errno
import glob
import os
import socket
import time

from ..files import fsync_dir
from . import native
from .batch import Batch

PART = ".part"
DONE = ".native"
JSONL = ".jsonl"        # finished files of JSON lines, read as they are
FORMATS = {DONE: "Native", JSONL: "JSONEachRow"}


class StoreError(OSError):
    """The state directory could not take a batch; nothing of it was
    kept, so the caller may write it again."""


def _whole(path):
    """The bytes of ``path`` (a ``.part``) without a torn last block or
    line."""
    with open(path, "rb") as f:
        data = f.read()
    if path.endswith(JSONL + PART):
        return data[:data.rfind(b"\n") + 1]
    return data[:native.whole_length(data)]


def _parts(directory):
    return [p for suffix in FORMATS
            for p in glob.glob(os.path.join(directory, "*" + suffix + PART))]


def _finished(directory):
    return {p for suffix in FORMATS
            for p in glob.glob(os.path.join(directory, "*" + suffix))}


def recover(directory):
    """Finish the ``.part`` files a stopped collector left in
    ``directory``: cut a torn last block (or line), rename without
    ``.part`` (remove an empty one). Returns the number of bytes cut."""
    cut = 0
    for part in sorted(_parts(directory)):
        keep = len(_whole(part))
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
    """``records`` (a Batch, or dicts each checked against the schema) as
    one Native block."""
    if not isinstance(records, Batch):
        records = Batch.of_records(records)
    return native.encode(records)


class Store:
    """Appends batches of records to rotated Native files."""

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
        """Close the open file and make it one readers see whole;
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
        """Remove the finished files last written before ``before``."""
        for path in _finished(self.directory):
            if os.path.getmtime(path) < before:
                os.unlink(path)

    def close(self):
        self.rotate()


def file_format(path):
    """The ClickHouse format of the store's file ``path``."""
    return FORMATS[os.path.splitext(path)[1]]


def snapshot(directory, scratch):
    """The files a query reads now: every finished file of ``directory``,
    and the whole blocks (or lines) of each open ``.part`` copied into
    ``scratch`` (its last block may be being written). A ``.part`` the
    collector renames meanwhile is read as the finished file, once."""
    done = _finished(directory)
    copies = {}
    for part in sorted(_parts(directory)):
        try:
            data = _whole(part)
        except FileNotFoundError:       # renamed since the listing
            continue
        if data:
            copies[part[:-len(PART)]] = data
    done_now = _finished(directory)
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
