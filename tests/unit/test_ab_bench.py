# SPDX-License-Identifier: GPL-2.0
"""scripts/ab-bench: when an A/B estimate agrees with the reference, and
bad arguments refused before anything is set up."""
import os
import subprocess
import sys

from conftest import load_script

PATH = os.path.join(os.path.dirname(__file__), "..", "..", "scripts",
                    "ab-bench")
BENCH = load_script("ab-bench", PATH)


def test_agreement_is_sign_and_size():
    assert BENCH.agrees(-0.80, -0.87)           # switchback's srtt p50
    assert not BENCH.agrees(-0.37, -0.87)       # per connection, biased
    assert not BENCH.agrees(0.5, -0.5)          # the wrong sign
    assert BENCH.agrees(0.001, -0.002)          # both about nothing
    assert not BENCH.agrees(None, -0.5)


def test_bad_arguments_change_nothing():
    for args in (["--washout", "30"], ["--periods", "1"],
                 ["--ab-secs", "0"], ["--switchback", "x"]):
        r = subprocess.run([sys.executable, PATH, *args],
                           capture_output=True, text=True)
        assert r.returncode == 2, args
        assert "ab-bench: error:" in r.stderr
