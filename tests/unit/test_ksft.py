# SPDX-License-Identifier: GPL-2.0
"""tests/ksft.py's kernel names (bkg, defer) and the kselftest layout of
tests/ (Makefile TEST_PROGS, config, settings)."""
import glob
import os
import subprocess
import sys
import textwrap

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
TESTS = os.path.join(ROOT, "tests")


def test_defer_runs_at_case_end_newest_first_and_failures_count(tmp_path):
    script = tmp_path / "t.py"
    script.write_text(textwrap.dedent(f"""\
        import sys
        sys.path.insert(0, {TESTS!r})
        from ksft import bkg, defer, ksft_eq, ksft_run
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
        """))
    proc = subprocess.run([sys.executable, str(script)], capture_output=True,
                          text=True)
    lines = proc.stdout.splitlines()
    assert "ok 1 a" in lines and "ok 2 b" in lines
    assert "not ok 3 c" in lines
    assert proc.returncode == 1


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
