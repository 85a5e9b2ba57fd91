# SPDX-License-Identifier: GPL-2.0
"""Records as columns: a sweep of 100k sockets without a dict per record.

A Batch holds, per schema column, either one value for every record, a
list or numpy array of values, or (values, present) where ``present`` (a
numpy bool array) says which records have the column: a Nullable column
a record lacks is absent from it, as schema.py says. Iterating gives the
records as dicts, their keys in the order the columns were given;
native.encode() gives them as the store's block; jsonl() as the JSON
lines the ClickHouse sink sends, one printf-style template per set of
columns present instead of a dict and an encoder call per record.
"""

import json

from . import schema

# One encoder for every record: json.dumps() with separators builds a
# new one per call, a third of a record's cost.
_to_json = json.JSONEncoder(separators=(",", ":"),
                            check_circular=False).encode


def _per_record(col):
    """Whether ``col`` holds a value per record (a list or an array)."""
    return isinstance(col, list) or getattr(col, "ndim", 0) == 1


def _plain(values):
    """``values`` as Python objects: a numpy array's as a list."""
    return values.tolist() if hasattr(values, "tolist") else values


class Batch:
    def __init__(self, n, columns):
        keys = columns.keys()
        if not (keys <= set(schema.NAMES) and keys >= set(schema.REQUIRED)):
            raise schema.RecordError(
                f"batch: missing {sorted(set(schema.REQUIRED) - keys)}, "
                f"unknown {sorted(keys - set(schema.NAMES))}")
        kinds = set(columns["kind"]) if _per_record(columns["kind"]) \
            else {columns["kind"]}
        if not kinds <= set(schema.KINDS):
            raise schema.RecordError(f"batch: kinds {sorted(kinds)!r}, not "
                                     f"all in {schema.KINDS}")
        self.n = n
        self.columns = columns

    def __len__(self):
        return self.n

    @classmethod
    def of_records(cls, records):
        """The dicts ``records``, each checked against the schema, as a
        Batch."""
        for r in records:
            schema.check(r)
        columns = {}
        for name in schema.NAMES:
            values = [r.get(name) for r in records]
            present = [v is not None for v in values]
            if all(present):
                columns[name] = values
            elif any(present):
                import numpy as np
                columns[name] = values, np.array(present)
        return cls(len(records), columns)

    def __iter__(self):
        cols = [(k, (_plain(c[0]), c[1]) if isinstance(c, tuple)
                 else _plain(c)) for k, c in self.columns.items()]
        for i in range(self.n):
            r = {}
            for name, col in cols:
                if isinstance(col, tuple):
                    if col[1][i]:
                        r[name] = col[0][i]
                elif isinstance(col, list):
                    r[name] = col[i]
                else:
                    r[name] = col
            yield r

    def __getitem__(self, rows):
        """The records ``rows`` (a slice) as a Batch."""
        def part(col):
            if isinstance(col, tuple):
                return col[0][rows], col[1][rows]
            return col[rows] if _per_record(col) else col
        return Batch(len(range(self.n)[rows]),
                     {k: part(c) for k, c in self.columns.items()})

    def _shapes(self):
        """[(rows or None for all, names of the columns present)]."""
        optional = [k for k, c in self.columns.items()
                    if isinstance(c, tuple) and not c[1].all()]
        if not optional:
            return [(None, list(self.columns))]
        import numpy as np
        code = np.zeros(self.n, np.int64)
        for bit, k in enumerate(optional):
            code |= self.columns[k][1].astype(np.int64) << bit
        shapes = []
        for value in np.unique(code):
            names = [k for k in self.columns
                     if k not in optional
                     or value >> optional.index(k) & 1]
            shapes.append((np.nonzero(code == value)[0].tolist(), names))
        return shapes

    def _template(self, names):
        """The %-template of a record with ``names``, and the columns
        (lists, each value ready for %d or %s) that fill it."""
        parts, fill = [], []
        for name in names:
            col = self.columns[name]
            values = _plain(col[0] if isinstance(col, tuple) else col)
            key = _to_json(name) + ":"
            if not isinstance(values, list):
                parts.append(key + _to_json(values).replace("%", "%%"))
            elif values and type(values[0]) is int:
                parts.append(key + "%d")
                fill.append(values)
            else:
                text = {v: _to_json(v) for v in set(values)}
                if len(text) == 1:      # one value: in the template
                    parts.append(key + text.popitem()[1].replace("%", "%%"))
                    continue
                parts.append(key + "%s")
                fill.append([text[v] for v in values])
        return "{" + ",".join(parts) + "}", fill

    def jsonl(self):
        """The records as JSON lines (bytes), as jsonl() writes them."""
        if not self.n:
            return b""
        lines = [None] * self.n
        for rows, names in self._shapes():
            template, fill = self._template(names)
            if rows is None:
                lines = [template % t for t in zip(*fill)]
                break
            fill = [[col[i] for i in rows] for col in fill]
            for i, t in zip(rows, zip(*fill)):
                lines[i] = template % t
        return ("\n".join(lines) + "\n").encode()


def jsonl(records):
    """``records`` (a Batch, or dicts each checked against the schema) as
    JSON lines (ClickHouse's JSONEachRow)."""
    if isinstance(records, Batch):
        return records.jsonl()
    lines = []
    for r in records:
        schema.check(r)
        lines.append(_to_json(r))
    return ("\n".join(lines) + "\n").encode() if lines else b""
