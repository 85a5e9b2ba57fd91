# SPDX-License-Identifier: GPL-2.0
"""tests/run-vm --repeat: each test N times as NAME.1..NAME.N; a count
below 1 is refused before anything runs."""
import os
import subprocess
import sys
from importlib.machinery import SourceFileLoader
from importlib.util import module_from_spec, spec_from_loader

import pytest

RUN_VM = os.path.join(os.path.dirname(__file__), "..", "run-vm")
_LOADER = SourceFileLoader("run_vm", RUN_VM)
run_vm = module_from_spec(spec_from_loader("run_vm", _LOADER))
_LOADER.exec_module(run_vm)


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
