# SPDX-License-Identifier: GPL-2.0
"""Records in ClickHouse's Native format: the embedded store's files.

Native is ClickHouse's columnar block format; chDB's file() and every
server read it (``FORMAT Native``). A stream is a sequence of blocks,
each: the column count and row count (LEB128 varints), then per column
its name and type (strings: varint length and bytes) and its values,
column after column. Fixed-width values are little-endian; a String is a
varint length and bytes; a Nullable(T) column is one byte per row (1 for
NULL) followed by T's values for every row (any value under a NULL).
That is the layout of the format without a client revision (files, HTTP
without client_protocol_version), which ClickHouse 18.16 and chDB's 26.9
engine both read.

A Batch (batch.py) becomes one block with every schema column in
schema.py's order: its numbers are numpy arrays' bytes, its strings are
encoded once per distinct value. No number is formatted as text, which
was most of a sweep's cost with JSON lines.

block_end() walks a block without decoding it, so the store can tell a
whole block from one a crash cut short.
"""

import numpy as np

from . import schema

# Little-endian numpy types of the fixed-width ClickHouse types.
FIXED = {"UInt8": "<u1", "UInt16": "<u2", "UInt32": "<u4", "UInt64": "<u8",
         "Int8": "<i1", "Int16": "<i2", "Int32": "<i4", "Int64": "<i8",
         "Float32": "<f4", "Float64": "<f8", "DateTime": "<u4"}
NULLABLE = "Nullable("


class FormatError(ValueError):
    """Bytes that are not a whole Native block of the schema's types."""


def varint(n):
    """``n`` (>= 0) as an unsigned LEB128 varint."""
    out = bytearray()
    while n >= 0x80:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


# The one-byte varints, 0 to 127: most strings' lengths.
_SHORT = [bytes((i,)) for i in range(0x80)]


def _string(text):
    data = text.encode()
    size = len(data)
    return (_SHORT[size] if size < 0x80 else varint(size)) + data


def _inner(ch_type):
    """The type inside Nullable(...), or None for a plain type."""
    if ch_type.startswith(NULLABLE):
        return ch_type[len(NULLABLE):-1]
    return None


def _strings(values, n):
    """``values`` (one str for every row, or a list of str) as a String
    column's bytes: each distinct value is encoded once."""
    if isinstance(values, str):
        return _string(values) * n
    encoded = {v: _string(v) for v in set(values)}
    return b"".join(map(encoded.__getitem__, values))


def _fixed(values, n, dtype):
    """``values`` (a number for every row, a list or an array) as a
    fixed-width column's bytes."""
    if isinstance(values, np.ndarray):
        return values.astype(dtype, copy=False).tobytes()
    if isinstance(values, (int, float)):
        return np.full(n, values, dtype).tobytes()
    return np.array(values, dtype).tobytes()


def _column_bytes(ch_type, col, n):
    """One Batch column (value, list/array, or (values, present)) as
    ``ch_type``'s bytes; None (absent) is NULL in every row."""
    inner = _inner(ch_type)
    if inner is not None:
        zero = "" if inner == "String" else 0   # the value under a NULL
        if col is None:
            nulls, values = np.ones(n, np.uint8), zero
        elif isinstance(col, tuple):
            values, present = col
            nulls = (~np.asarray(present, bool)).view(np.uint8)
            if isinstance(values, list):
                values = [zero if v is None else v for v in values]
        else:
            nulls, values = np.zeros(n, np.uint8), col
        return nulls.tobytes() + _column_bytes(inner, values, n)
    if ch_type == "String":
        return _strings(col, n)
    return _fixed(col, n, FIXED[ch_type])


def encode(batch):
    """A Batch as one Native block of every schema column."""
    n = len(batch)
    if not n:
        return b""
    parts = [varint(len(schema.COLUMNS)), varint(n)]
    for c in schema.COLUMNS:
        try:
            values = _column_bytes(c.type, batch.columns.get(c.name), n)
        except (OverflowError, TypeError, ValueError) as err:
            raise schema.RecordError(f"column {c.name} ({c.type}): "
                                     f"{err}") from err
        parts += [_string(c.name), _string(c.type), values]
    return b"".join(parts)


def _read_varint(buf, pos):
    n = shift = 0
    while True:
        if pos >= len(buf) or shift > 63:
            raise FormatError("truncated or overlong varint")
        b = buf[pos]
        pos += 1
        n |= (b & 0x7F) << shift
        if b < 0x80:
            return n, pos
        shift += 7


def _read_string(buf, pos):
    size, pos = _read_varint(buf, pos)
    if pos + size > len(buf):
        raise FormatError("truncated string")
    return bytes(buf[pos:pos + size]), pos + size


def _skip(buf, pos, ch_type, rows):
    """The end of ``rows`` values of ``ch_type`` starting at ``pos``."""
    inner = _inner(ch_type)
    if inner is not None:
        return _skip(buf, pos + rows, inner, rows)
    if ch_type == "String":
        for _ in range(rows):
            size, pos = _read_varint(buf, pos)
            pos += size
        return pos
    if ch_type not in FIXED:
        raise FormatError(f"type {ch_type!r} is not one the schema uses")
    return pos + rows * np.dtype(FIXED[ch_type]).itemsize


def block_end(buf, pos=0):
    """The end of the Native block at ``pos`` of ``buf`` and its rows;
    FormatError unless the whole block is there."""
    columns, pos = _read_varint(buf, pos)
    rows, pos = _read_varint(buf, pos)
    for _ in range(columns):
        _, pos = _read_string(buf, pos)
        ch_type, pos = _read_string(buf, pos)
        pos = _skip(buf, pos, ch_type.decode(), rows)
        if pos > len(buf):
            raise FormatError("truncated column")
    return pos, rows


def whole_length(buf):
    """The length of the whole blocks at the start of ``buf``: what is
    left once a torn last block is cut."""
    pos = 0
    while pos < len(buf):
        try:
            pos = block_end(buf, pos)[0]
        except FormatError:
            break
    return pos
