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
                 ["--ab-secs", "0"], ["--switchback", "x"],
                 ["--households", "-1"], ["--shared-links", "0"],
                 ["--shared-clients", "1"], ["--shared-mbit", "0"],
                 ["--report", "/nonexistent"]):
        r = subprocess.run([sys.executable, PATH, *args],
                           capture_output=True, text=True)
        assert r.returncode == 2, args
        assert "ab-bench: error:" in r.stderr


def test_links_and_their_clients():
    class Links:
        households, shared_links, shared_clients = 2, 2, 3

    got = BENCH.clients(Links)
    assert got[:2] == [("198.18.1.1", 10), ("198.18.1.2", 11)]
    assert got[2:] == [(f"198.18.{2 + i}.{h + 1}", 1000 + i)
                       for i in range(2) for h in range(3)]
    assert BENCH.shared_nets(Links) == ["198.18.2.0/24", "198.18.3.0/24"]
