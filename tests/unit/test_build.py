# SPDX-License-Identifier: GPL-2.0
"""The top-level Makefile builds only for the kernel it is asked for (the
running one, or KDIR) and says what to install when that kernel has no
headers."""
import os
import subprocess

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


def make(*args):
    return subprocess.run(["make", "-s", "--no-print-directory", "-C", ROOT,
                           *args], capture_output=True, text=True)


def test_no_headers_stops_and_says_what_to_install():
    proc = make("modules", "KVER=0.0.0-none")
    assert proc.returncode != 0
    assert "No headers for kernel 0.0.0-none" in proc.stderr
    assert "apt install linux-headers-0.0.0-none" in proc.stderr
    assert "make KDIR=" in proc.stderr


def test_a_kdir_that_is_no_build_tree_stops(tmp_path):
    proc = make("modules", f"KDIR={tmp_path}")
    assert proc.returncode != 0
    assert f"KDIR={tmp_path} is not a kernel build tree" in proc.stderr
