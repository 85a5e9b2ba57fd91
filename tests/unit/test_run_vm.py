# SPDX-License-Identifier: GPL-2.0
"""tests/run-vm --repeat: each test N times as NAME.1..NAME.N; a count
below 1 is refused before anything runs."""
import os
import signal
import subprocess
import sys
import time

import pytest

from conftest import load_script

RUN_VM = os.path.join(os.path.dirname(__file__), "..", "run-vm")
run_vm = load_script("run-vm", RUN_VM)


def test_repeat_names_each_run():
    runs = run_vm.subtests(["/t/test_a.py", "/t/test_b.py"], 2)
    assert runs == [("test_a.1", "/t/test_a.py"), ("test_a.2", "/t/test_a.py"),
                    ("test_b.1", "/t/test_b.py"), ("test_b.2", "/t/test_b.py")]


def test_single_run_keeps_the_name():
    assert run_vm.subtests(["/t/test_a.py"], 1) == [("test_a", "/t/test_a.py")]


@pytest.mark.parametrize("count", ["0", "-1", "two"])
def test_bad_repeat_is_refused(count):
    proc = subprocess.run([sys.executable, RUN_VM, "--repeat", count,
                           "test_params"], capture_output=True, text=True,
                          timeout=30)
    assert proc.returncode == 2
    assert "expected a count of 1 or more" in proc.stderr
    assert "KTAP" not in proc.stdout


def _run(tmp_path, body, timeout=30):
    test = tmp_path / "test_x.py"
    test.write_text("import os, subprocess, sys, time\n" + body)
    return run_vm.run_test(str(test), timeout)


def test_cases_are_counted_and_leftovers_killed(tmp_path, monkeypatch):
    monkeypatch.setattr(run_vm, "KILL_GRACE", 5)
    pidfile = tmp_path / "pid"
    status, ok, not_ok, skip, _ = _run(tmp_path, f"""
child = subprocess.Popen(["sleep", "60"], stdout=subprocess.DEVNULL)
open({str(pidfile)!r}, "w").write(str(child.pid))
print("ok 1 a")
print("not ok 2 b")
print("ok 3 c # SKIP no")
""")
    assert (status, ok, not_ok, skip) == (0, 1, 1, 1)
    time.sleep(0.5)
    with open(f"/proc/{pidfile.read_text()}/stat") as f:
        assert f.read().rpartition(")")[2].split()[0] in ("Z", "X")


def test_timeout_kills_the_test(tmp_path, monkeypatch):
    monkeypatch.setattr(run_vm, "KILL_GRACE", 5)
    start = time.monotonic()
    status = _run(tmp_path, "print('ok 1 a', flush=True)\ntime.sleep(60)\n",
                  timeout=1)[:2]
    assert status == (run_vm.TIMED_OUT, 1)
    assert time.monotonic() - start < 10


def test_output_held_open_is_stuck_not_a_hang(tmp_path, monkeypatch):
    """A process the group kill cannot reach keeps the output open, as a
    task blocked in the kernel would: run_test gives up after KILL_GRACE."""
    monkeypatch.setattr(run_vm, "KILL_GRACE", 1)
    pidfile = tmp_path / "pid"
    start = time.monotonic()
    try:
        status = _run(tmp_path, f"""
child = subprocess.Popen(["sleep", "60"], start_new_session=True)
open({str(pidfile)!r}, "w").write(str(child.pid))
""", timeout=30)[0]
        assert status == run_vm.STUCK
        assert time.monotonic() - start < 10
    finally:
        os.kill(int(pidfile.read_text()), signal.SIGKILL)
