# SPDX-License-Identifier: GPL-2.0
"""Without matplotlib the unit tests that draw skip what draws, and fail
nothing. Only the files that name plots or matplotlib run again: the
rest run the same code with it or without it (rerunning all of them,
fleet and VM boots aside, took 97 s)."""
import os
import re
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))


def drawing_test_files():
    files = []
    for name in sorted(os.listdir(HERE)):
        path = os.path.join(HERE, name)
        if (name.startswith("test_") and name.endswith(".py")
                and path != os.path.abspath(__file__)):
            with open(path) as f:
                if re.search(r"plot|matplotlib", f.read(), re.IGNORECASE):
                    files.append(path)
    return files


@pytest.mark.skipif(os.environ.get("COPA_TEST_NO_MATPLOTLIB") == "1",
                    reason="already running without matplotlib")
def test_unit_tests_skip_without_matplotlib():
    files = drawing_test_files()
    assert os.path.join(HERE, "test_report.py") in files
    env = dict(os.environ, COPA_TEST_NO_MATPLOTLIB="1")
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
         "-m", "not boots_vm", *files],
        env=env, capture_output=True, text=True, timeout=300)
    last = proc.stdout.strip().splitlines()[-1]
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert "skipped" in last and "failed" not in last, last
