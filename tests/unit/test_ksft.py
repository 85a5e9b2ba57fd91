# SPDX-License-Identifier: GPL-2.0
"""tests/ksft.py's kernel names (bkg, defer), its copa_update trace parser
and the kselftest layout of tests/ (Makefile TEST_PROGS, config,
settings)."""
import glob
import os
import subprocess
import sys
import textwrap

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
TESTS = os.path.join(ROOT, "tests")


def test_defer_runs_at_case_end_newest_first_and_failures_count(tmp_path):
    script = tmp_path / "t.py"
    script.write_text(textwrap.dedent(f"""\
        import sys
        sys.path.insert(0, {TESTS!r})
        from ksft import bkg, defer, ksft_eq, ksft_exit, ksft_run
        log = []
        def a():
            defer(log.append, 1)
            defer(log.append, 2)
        def b():
            ksft_eq(log, [2, 1])
            defer(log.append, 3).cancel()
            with bkg(["true"]):
                pass
        def c():
            ksft_eq(log, [2, 1])
            defer(lambda: 1 / 0)
        ksft_run([a, b, c])
        ksft_exit()
        """))
    proc = subprocess.run([sys.executable, str(script)], capture_output=True,
                          text=True)
    lines = proc.stdout.splitlines()
    assert "ok 1 a" in lines and "ok 2 b" in lines
    assert "not ok 3 c" in lines
    assert proc.returncode == 1


def test_failed_check_is_recorded_and_the_case_goes_on(tmp_path):
    """As upstream's lib/py: a check records its failure and the case
    continues; ksft_exit() gives the status."""
    script = tmp_path / "t.py"
    script.write_text(textwrap.dedent(f"""\
        import sys
        sys.path.insert(0, {TESTS!r})
        from ksft import KsftSkipEx, ksft_exit, ksft_ge, ksft_pr, ksft_run
        def a(arg):
            ksft_ge(1, 2, "one below two")
            ksft_pr("after the check", arg)
        def b(arg):
            raise KsftSkipEx("not here")
        def c(arg):
            ksft_ge(2, 1)
        ksft_run([a, b, c], args=("x",))
        print("before exit")
        ksft_exit()
        """))
    proc = subprocess.run([sys.executable, str(script)], capture_output=True,
                          text=True)
    lines = proc.stdout.splitlines()
    assert "# after the check x" in lines
    assert "not ok 1 a" in lines
    assert "ok 2 b # SKIP not here" in lines
    assert "ok 3 c" in lines
    assert "before exit" in lines
    assert "# Totals: pass:1 fail:1 skip:1" in lines
    assert proc.returncode == 1


def test_margins_are_printed_per_case_and_read_by_scripts_gates(tmp_path):
    """Each case ends with its numeric checks' closest calls (a / b),
    counts left out; scripts/gates takes the worst over logs and exits
    1 when a check failed in one of them."""
    script = tmp_path / "t.py"
    script.write_text(textwrap.dedent(f"""\
        import sys
        sys.path.insert(0, {TESTS!r})
        from ksft import ksft_exit, ksft_ge, ksft_run
        def a(x):
            for v in (3.0, x, 4.5):
                ksft_ge(v, 1.25, f"rate {{v}} >= 1.25")
            ksft_ge(3, 1, "a count")
        ksft_run([a], args=(float(sys.argv[1]),))
        ksft_exit()
        """))
    logs = []
    for x in ("2.5", "1.0"):
        proc = subprocess.run([sys.executable, str(script), x],
                              capture_output=True, text=True)
        logs.append(tmp_path / f"{x}.log")
        logs[-1].write_text("# Subtest: t\n" + proc.stdout)
    assert "# margin 2.000: rate # >= # (2.5 >= 1.25)" in \
        logs[0].read_text().splitlines()
    assert "count" not in logs[0].read_text()
    gates = subprocess.run([os.path.join(ROOT, "scripts", "gates")] +
                           [str(p) for p in logs], capture_output=True,
                           text=True)
    assert gates.returncode == 1
    assert gates.stdout.split() == ["0.800", "2", "t", "a:", "rate", "#",
                                    ">=", "#", "[0.80,", "2.00]"]


def test_margin_near_an_ideal_is_its_deviation(tmp_path):
    """ksft_ge(..., ideal=I): checked as ksft_ge(), its margin line the
    deviation from I the bound allows over the deviation seen, for a lower
    bound and an upper one; a value at I counts a thousandth; a failed
    check is reported at the test's line, not ksft's."""
    script = tmp_path / "t.py"
    script.write_text(textwrap.dedent(f"""\
        import sys
        sys.path.insert(0, {TESTS!r})
        from ksft import ksft_exit, ksft_ge, ksft_run
        def a():
            ksft_ge(0.95, 0.75, "utilisation", ideal=1)
            ksft_ge(1.25, 1.1, "rate after idle", ideal=1)
            ksft_ge(1.25, 0.9, "rate below", ideal=1)
        def b():
            ksft_ge(0.7, 0.75, "utilisation", ideal=1)
        ksft_run([a, b])
        ksft_exit()
        """))
    proc = subprocess.run([sys.executable, str(script)], capture_output=True,
                          text=True)
    lines = proc.stdout.splitlines()
    assert "# margin 5.000: utilisation (0.25 >= 0.05)" in lines
    assert "# margin 2.500: rate after idle (0.25 >= 0.1)" in lines
    assert "# margin 1000.000: rate below (0.35 >= 0.00035)" in lines
    assert f"# At {script} line 9:" in lines
    assert "ok 1 a" in lines and "not ok 2 b" in lines


def make_var(name):
    return subprocess.run(["make", "-s", "-C", TESTS, f"print-{name}"],
                          capture_output=True, text=True,
                          check=True).stdout.split()


def test_test_progs_are_the_vm_tests():
    vm_tests = sorted(os.path.relpath(p, TESTS)
                      for p in glob.glob(os.path.join(TESTS, "vm",
                                                      "test_*.py")))
    assert sorted(make_var("TEST_PROGS")) == vm_tests
    assert make_var("TEST_GEN_FILES") == ["setcc"]
    assert "ksft.py" in make_var("TEST_FILES")


def test_config_fragment_and_settings():
    with open(os.path.join(TESTS, "config")) as f:
        config = dict(line.strip().split("=", 1) for line in f
                      if line.startswith("CONFIG_"))
    for option in ("NET_SCH_NETEM", "NET_SCH_TBF", "NET_ACT_POLICE",
                   "NET_CLS_MATCHALL", "VETH", "TCP_CONG_BBR",
                   "NET_SCH_FQ_CODEL"):
        assert config.get(f"CONFIG_{option}") in ("y", "m"), option
    with open(os.path.join(TESTS, "settings")) as f:
        settings = dict(line.strip().split("=", 1) for line in f
                        if "=" in line and not line.startswith("#"))
    assert int(settings["timeout"]) >= 300


# Two copa_update lines as the kernel prints them (%pISpc for the
# addresses, the cookie in hex), around a line of another event.
TRACE = """\
# tracer: nop
          setcc-812     [001] ..s1.   103.250117: copa_update: \
src=10.0.0.1:20001 dest=10.0.0.2:5201 sock_cookie=1003 cwnd=46 target=86 \
dq_us=955 rtt_min_us=40350 rtt_standing_us=41305 delta_milli=500 mode=2 \
velocity=2 noise_us=3
          setcc-812     [001] ..s1.   103.250200: tcp_probe: src=10.0.0.1:1
          <idle>-0      [000] ..s1.   103.290001: copa_update: \
src=[fd00::1]:41234 dest=[fd00::2]:5602 sock_cookie=ffff00000000002a \
cwnd=10 target=4294967295 dq_us=0 rtt_min_us=120 rtt_standing_us=130 \
delta_milli=250 mode=1 velocity=1 noise_us=0
"""


def _ksft():
    sys.path.insert(0, TESTS)
    import ksft
    return ksft


def test_trace_records_parse_addresses_and_cookie():
    v4, v6 = _ksft().copa_trace_records(TRACE)
    assert v4["src"] == "10.0.0.1:20001" and v4["dest"] == "10.0.0.2:5201"
    assert (v4["saddr"], v4["sport"]) == ("10.0.0.1", 20001)
    assert (v4["daddr"], v4["dport"]) == ("10.0.0.2", 5201)
    assert v4["sock_cookie"] == 0x1003
    assert v4["cwnd"] == 46 and v4["velocity"] == 2 and v4["noise_us"] == 3
    assert v4["t"] == 103.250117
    assert v6["src"] == "[fd00::1]:41234"
    assert (v6["saddr"], v6["sport"]) == ("fd00::1", 41234)
    assert (v6["daddr"], v6["dport"]) == ("fd00::2", 5602)
    assert v6["sock_cookie"] == 0xffff00000000002a
    assert v6["target"] == 4294967295


def test_trace_events_are_port_delta_mode():
    assert _ksft().copa_trace_events(TRACE) == [(5201, 500, 2), (5602, 250, 1)]


def test_trace_address_without_port_is_an_error():
    bad = TRACE.replace("dest=10.0.0.2:5201", "dest=10.0.0.2")
    with pytest.raises(ValueError, match="10.0.0.2"):
        _ksft().copa_trace_records(bad)
