# SPDX-License-Identifier: GPL-2.0
"""Where the files the tools read at run time are: the headers
(tcp_copa_params.h, tcp_copa_algo.h, tcp_copa_limit.h), bpf/'s sources,
data/ and VERSION; and the venv that scripts/deps makes.

One rule: in a source tree (this package in its tools/ directory, the
tree holding tcp_copa_params.h) they are the tree's own files;
installed (the package in PREFIX/lib/pythonX/site-packages, or Debian's
/usr/lib/python3/dist-packages) they are under PREFIX/share/copa-tools,
where the Debian package copa-tools puts them.
"""

import os

PACKAGE = os.path.dirname(os.path.abspath(__file__))


def source_tree():
    """The source tree this package is part of, or None if installed."""
    top = os.path.dirname(os.path.dirname(PACKAGE))
    if os.path.isfile(os.path.join(top, "tcp_copa_params.h")):
        return top
    return None


def data_dir():
    """The directory holding the headers, bpf/, data/ and VERSION."""
    return source_tree() or os.path.join(
        os.path.dirname(os.path.dirname(os.path.dirname(
            os.path.dirname(PACKAGE)))), "share", "copa-tools")


def data(*parts):
    """The path of @parts under data_dir()."""
    return os.path.join(data_dir(), *parts)


def venv(*parts):
    """The path of @parts in the venv scripts/deps makes (the tests' and
    benchmarks' programs): $COPA_CACHE/venv, the cache ~/.cache/copa
    unless COPA_CACHE names another."""
    cache = os.environ.get("COPA_CACHE") or os.path.expanduser(
        "~/.cache/copa")
    return os.path.join(cache, "venv", *parts)
