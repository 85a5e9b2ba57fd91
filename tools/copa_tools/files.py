# SPDX-License-Identifier: GPL-2.0
"""Files the harness writes and reads back: written atomically (a reader
or an interrupted run never sees half a file), and read with errors that
name the file."""

import json
import os
import stat
import tempfile


def fsync_dir(directory):
    """fsync ``directory``, so a rename or a new file in it survives a crash."""
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_atomic(path, text):
    """Replace ``path`` with ``text``: a temporary file in the same
    directory, flushed to disk, renamed over it, then the directory
    flushed, so a crash leaves the old file or the new one. The file
    keeps its mode if it existed (0644 otherwise)."""
    directory = os.path.dirname(os.path.abspath(path))
    try:
        mode = os.stat(path).st_mode & 0o7777
    except FileNotFoundError:
        mode = 0o644
    fd, tmp = tempfile.mkstemp(dir=directory,
                               prefix=f".{os.path.basename(path)}.")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise
    fsync_dir(directory)


def write_json(path, data):
    write_atomic(path, json.dumps(data, indent=1, default=str) + "\n")


class CorruptFileError(RuntimeError):
    """A results file exists but cannot be used; the message names it."""


def load_manifest(path):
    """The manifest.json at ``path`` as a dict; CorruptFileError naming
    the file if it is not a JSON object naming its scenario."""
    try:
        with open(path) as f:
            data = json.load(f)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise CorruptFileError(
            f"{path}: corrupt manifest ({exc}); delete the results "
            f"directory or choose another --out") from None
    if not isinstance(data, dict) or "scenario" not in data:
        raise CorruptFileError(
            f"{path}: corrupt manifest (expected a JSON object with a "
            f"'scenario'); delete the results directory or choose another "
            f"--out")
    return data


def private_dir(name, base=None):
    """A directory only this user can use, for caches such as matplotlib's:
    ``base``/``name``-UID (base: the temporary directory, which the VM
    shares with the host, so the host's cache serves the guest too).
    Created with mode 0700; an existing one must be a real directory (not
    a link) owned by this user and closed to others, else a fresh
    ``mkdtemp`` directory is used instead of trusting it."""
    base = base or tempfile.gettempdir()
    path = os.path.join(base, f"{name}-{os.getuid()}")
    try:
        os.mkdir(path, 0o700)
    except FileExistsError:
        pass
    except OSError:
        return tempfile.mkdtemp(prefix=f"{name}-")
    st = os.lstat(path)
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid() or \
            st.st_mode & 0o077:
        return tempfile.mkdtemp(prefix=f"{name}-")
    return path
