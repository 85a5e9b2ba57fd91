# SPDX-License-Identifier: GPL-2.0
"""copa-fleet ab without a kernel: the assignment hash (the sock_ops
program's, in Python: tests/native/test_fleet_ab.py checks that the two
agree), experiment definitions and their errors, and the report on
chDB's real engine over records written by the store, with a known
effect, per unit, under switchback, and with a wrong arm recorded."""
import json
import os
import subprocess
import sys

import pytest
from conftest import TOOLS, needs_matplotlib

from copa_tools.fleet import ab, ab_report, queries, schema, store

np = pytest.importorskip("numpy")
pytest.importorskip("scipy")

T0 = 1_795_000_000


def experiment(**kw):
    args = dict(name="t1", unit="client", control="cc=cubic",
                treatment="cc=bpf_copa delta=0.1", share=0.5, salt=42,
                scope=["0.0.0.0/0"], prefix_v4=24, prefix_v6=56,
                switchback_s=None, washout_s=None, started=T0,
                start_boot_ns=0, stopped=None)
    args.update(kw)
    return ab.Experiment(**args)


def test_hash_shares():
    """The treatment's share of many units is its configured share; the
    arms of one unit do not depend on anything else."""
    for share in (0.5, 0.1):
        exp = experiment(share=share)
        arms = [exp.arm(0, f"10.{i >> 8}.{i & 255}.1") for i in range(20000)]
        assert abs(np.mean(arms) - share) < 0.015
    exp = experiment()
    assert exp.arm(1, "192.0.2.7") == exp.arm(2, "192.0.2.7", T0 + 999)
    assert exp.arm(0, "192.0.2.7") == exp.arm(0, "::ffff:192.0.2.7")


def test_prefix_unit_and_switchback():
    """--unit prefix: one arm per /24; with switchback, a prefix's arm
    changes between periods, about half the time."""
    exp = experiment(unit="prefix")
    assert len({exp.arm(0, f"192.0.2.{i}") for i in range(256)}) == 1
    exp = experiment(unit="prefix", switchback_s=600, washout_s=60)
    assert exp.period(T0 + 599) == 0 and exp.period(T0 + 600) == 1
    assert exp.in_washout(T0 + 610) and not exp.in_washout(T0 + 660)
    changes = [exp.arm(0, "192.0.2.1", T0 + 600 * p)
               != exp.arm(0, "192.0.2.1", T0 + 600 * (p + 1))
               for p in range(400)]
    assert 0.4 < np.mean(changes) < 0.6


def test_address_words_are_host_endian_u64():
    w0, w1 = ab.address_words("192.0.2.1")
    raw = bytes(10) + b"\xff\xff" + bytes([192, 0, 2, 1])
    assert (w0, w1) == (int.from_bytes(raw[:8], sys.byteorder),
                        int.from_bytes(raw[8:], sys.byteorder))
    assert ab.address_words("192.0.2.77", 24) == \
        ab.address_words("192.0.2.0")
    assert ab.address_words("2001:db8:1:2ff::9", 56) == \
        ab.address_words("2001:db8:1:200::")


@pytest.mark.parametrize("kw,message", [
    ({"name": "a/b"}, "name"),
    ({"name": "x" * 30}, "name"),
    ({"unit": "user"}, "unit"),
    ({"share": 1.0}, "share"),
    ({"switchback_s": 600, "washout_s": 60}, "needs --unit prefix"),
    ({"unit": "prefix", "switchback_s": 60, "washout_s": 60}, "washout"),
    ({"treatment": "cc=bpf_copa delta=7"}, "delta"),
    ({"treatment": "delta"}, "NAME=VALUE"),
    ({"control": "cc=" + "x" * 20}, "characters"),
    ({"scope": ["10.0.0.0/33"]}, "scope"),
])
def test_bad_definitions(kw, message):
    with pytest.raises(ab.AbError, match=message):
        experiment(**kw)


def test_config_value_layout():
    """struct copa_ab_config: the head, two copa_prefix_policy and two
    labels, padded to the map's value size; any other size is a build
    mismatch, said as such."""
    exp = experiment()
    size = 40 + 2 * (16 + ab.bpf_cli.SK_PARAMS_LEN) + 2 * ab.LABEL_LEN
    size += -size % 8
    v = exp.config_value(size)
    assert len(v) == size and v[:4] == (2).to_bytes(4, sys.byteorder)
    labels = v[size - ab._pad(size) - 2 * ab.LABEL_LEN:]
    assert labels.startswith(b"t1/control\0")
    assert labels[ab.LABEL_LEN:].startswith(b"t1/treatment\0")
    with pytest.raises(ab.AbError, match="rebuild"):
        exp.config_value(size + 8)


def test_start_refuses_bad_input_before_touching_anything(tmp_path):
    r = subprocess.run(
        [sys.executable, "-m", "copa_tools.fleet.cli", "ab", "start", "x",
         "--state-dir", str(tmp_path), "--control", "cc=cubic",
         "--treatment", "cc=bpf_copa delta=5"], cwd=TOOLS,
        capture_output=True, text=True)
    assert r.returncode and "delta" in r.stderr
    assert not (tmp_path / "ab").exists()


# --- the report, on chDB -----------------------------------------------

chdb = pytest.importorskip("chdb", reason="chDB is missing (scripts/deps)")
SHIFT_MS = 20


def records(exp, clients=120, conns=3, samples=6, mislabel=0):
    """Connections of ``clients`` clients in 12 /24s; srtt around a
    client's own level (ms), SHIFT_MS lower in the treatment; every
    record labelled with the arm the hash gives."""
    rng = np.random.default_rng(9)
    out, cookie = [], 0
    for c in range(clients):
        peer = f"198.18.{c % 12}.{c // 12 + 1}"
        level = rng.lognormal(np.log(60), 0.4)
        for k in range(conns):
            cookie += 1
            t0 = T0 + int(rng.integers(0, 3000))
            a = exp.arm(cookie, peer, t0)
            label = exp.label(a if cookie > mislabel else 1 - a)
            for i in range(samples):
                srtt = 25 + rng.lognormal(np.log(level), 0.2) - SHIFT_MS * a
                out.append({
                    "time": t0 + 10 * i, "host": "h", "cookie": cookie,
                    "kind": schema.FINAL if i == samples - 1
                    else schema.SAMPLE,
                    "local_addr": "10.0.0.1", "local_port": 443,
                    "peer_addr": peer, "peer_port": 40000 + k,
                    "peer_prefix": f"198.18.{c % 12}.0/24",
                    "cc": ("cubic", "bpf_copa")[a], "ab_arm": label,
                    "age_ms": 10_000 * i, "srtt_us": int(srtt * 1000),
                    "delivery_rate_bps": int(rng.uniform(4e6, 6e6)),
                    "app_limited": 0, "bytes_acked": 10**6 * (i + 1),
                    "bytes_retrans": 10**4 * (i + 1) * (2 - a)})
    return out


def report(tmp_path, exp, recs, groups=None, **kw):
    st = store.Store(str(tmp_path / "records"), "h")
    st.write(recs)
    st.close()
    files = store.snapshot(str(tmp_path / "records"), str(tmp_path))
    source = queries.file_source(files)
    r, c, counts = ab_report.collect(queries.Chdb(), source, exp, T0,
                                     T0 + 10**6, groups)
    return ab_report.analyse(exp, r, c, counts, alpha=0.01, resamples=500,
                             **kw)


def row(tables, metric, group="all"):
    return next(d for d in tables["differences"]
                if d["metric"] == metric and d["group"] == group)


def check(tables, name):
    return next(c["value"] for c in tables["checks"] if c["check"] == name)


@pytest.mark.parametrize("unit", ["connection", "client", "prefix"])
def test_report_recovers_the_effect(tmp_path, unit):
    exp = experiment(unit=unit)
    t = report(tmp_path, exp, records(exp))
    d = row(t, "srtt_p50_ms")
    assert d["low"] <= -SHIFT_MS <= d["high"] and d["significant"]
    assert row(t, "retrans_overhead")["difference"] < 0
    assert not row(t, "rate_p50_mbps")["significant"]
    assert check(t, "records whose arm is not the hash's") == 0
    assert check(t, "sample ratio mismatch: chi-square p") > 0.001
    arms = {a["arm"]: a for a in t["arms"] if a["group"] == "all"}
    assert arms["control"]["retrans_overhead"] == pytest.approx(0.02)
    clusters = sum(a["clusters"] for a in arms.values())
    assert clusters == {"connection": 360, "client": 120, "prefix": 12}[unit]


def test_report_by_prefix_applies_benjamini_hochberg(tmp_path):
    exp = experiment(unit="connection")
    t = report(tmp_path, exp, records(exp), ab_report.Groups(exp=exp))
    groups = {d["group"] for d in t["differences"]}
    assert groups == {"all"} | {f"198.18.{i}.0/24" for i in range(12)}
    ps = [d for d in t["differences"] if d["p"] is not None]
    assert all(d["p_bh"] >= d["p"] for d in ps)


def test_report_counts_a_wrong_arm(tmp_path):
    exp = experiment(unit="connection")
    t = report(tmp_path, exp, records(exp, mislabel=5))
    assert check(t, "records whose arm is not the hash's") == 5 * 6


def test_switchback_leaves_out_washout_and_carryover(tmp_path):
    exp = experiment(unit="prefix", switchback_s=600, washout_s=60)
    recs = records(exp, samples=12)     # 110 s: some outlast a washout
    t = report(tmp_path, exp, recs)
    washout = sum(exp.in_washout(r["time"]) for r in recs)
    carry = sum(not exp.in_washout(r["time"])
                and exp.label(exp.arm(r["cookie"], r["peer_addr"],
                                      r["time"])) != r["ab_arm"]
                for r in recs)
    assert washout and carry
    assert check(t, "records left out: washout") == washout
    assert check(t, "records left out: carryover") == carry
    d = row(t, "srtt_p50_ms")
    assert d["low"] <= -SHIFT_MS <= d["high"]


@needs_matplotlib
def test_report_cli(tmp_path):
    exp = experiment(unit="client")
    (tmp_path / "ab").mkdir()
    exp.save(str(tmp_path / "ab" / "t1.json"))
    st = store.Store(str(tmp_path / "records"), "h")
    st.write(records(exp))
    st.close()
    groups = tmp_path / "regions"
    groups.write_text("198.18.0.0/20 north  # most\n198.18.8.0/22 south\n")
    r = subprocess.run(
        [sys.executable, "-m", "copa_tools.fleet.cli", "ab", "report", "t1",
         "--state-dir", str(tmp_path), "--groups", str(groups),
         "--resamples", "200", "--csv", str(tmp_path / "out"),
         "--plots", str(tmp_path / "out")], cwd=TOOLS, capture_output=True,
        text=True)
    assert r.returncode == 0, r.stderr
    assert "## Treatment minus control" in r.stdout and "south" in r.stdout
    for name in ("ab_arms.csv", "ab_differences.csv", "ab_checks.csv",
                 "ab_differences.png"):
        assert os.path.getsize(tmp_path / "out" / name) > 100
    json.loads((tmp_path / "ab" / "t1.json").read_text())


def test_report_cli_errors(tmp_path):
    r = subprocess.run(
        [sys.executable, "-m", "copa_tools.fleet.cli", "ab", "report",
         "nosuch", "--state-dir", str(tmp_path)], cwd=TOOLS,
        capture_output=True, text=True)
    assert r.returncode and "nosuch.json" in r.stderr
