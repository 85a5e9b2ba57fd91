# SPDX-License-Identifier: GPL-2.0
"""Without matplotlib the unit tests skip what draws, and fail nothing.
The tests that boot a VM draw nothing and take minutes: left out."""
import os
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))


@pytest.mark.skipif(os.environ.get("COPA_TEST_NO_MATPLOTLIB") == "1",
                    reason="already running without matplotlib")
def test_unit_tests_skip_without_matplotlib():
    env = dict(os.environ, COPA_TEST_NO_MATPLOTLIB="1")
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
         "-k", "not test_copa_diag_runs", "-m", "not boots_vm", HERE],
        env=env, capture_output=True, text=True, timeout=300)
    last = proc.stdout.strip().splitlines()[-1]
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert "skipped" in last and "failed" not in last, last
