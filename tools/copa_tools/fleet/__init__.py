# SPDX-License-Identifier: GPL-2.0
"""copa-fleet: every TCP connection's tcp_info, sampled and recorded at
close, into JSON lines that chDB (one host) or a ClickHouse server (a
fleet) query with one set of queries. The record's columns are
schema.py's."""
