# SPDX-License-Identifier: GPL-2.0
"""scripts/vm-run quotes the guest command with printf %q: a repository
path containing a quote and a space reaches the guest intact; and a guest
that panics is reported with the end of its kernel console."""
import os
import shutil
import subprocess

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


def test_guest_command_survives_quotes_and_spaces(tmp_path):
    repo = tmp_path / "it's a repo"
    (repo / "scripts").mkdir(parents=True)
    for name in ("vm-run", "deps", "vm-kernel", "kernels"):
        shutil.copy(os.path.join(ROOT, "scripts", name), repo / "scripts")
    env = dict(os.environ, COPA_ACCEL="tcg")   # no KVM probe boot
    proc = subprocess.run(
        [str(repo / "scripts" / "vm-run"), "--no-modules", "--print", "--",
         "echo", "hi"], env=env, capture_output=True, timeout=120)
    assert proc.returncode == 0, proc.stderr.decode()
    words = proc.stdout.decode().split("\0")[:-1]
    assert "--cwd" not in words
    exec_line = words[words.index("--exec") + 1]
    # the guest runs it with a shell: what words does that shell see?
    seen = subprocess.run(["bash", "-c", f"printf '%s\\0' {exec_line}"],
                          capture_output=True, check=True).stdout
    seen = seen.decode().split("\0")[:-1]
    assert seen[0] == str(repo / "scripts" / "vm-run")
    assert seen[1:2] == ["--in-guest"]
    assert seen[3:5] == ["1", "0"]   # load, install (--no-modules)
    assert seen[5].endswith("/root")  # the kernel root, its boot/ on /boot


@pytest.mark.boots_vm
def test_guest_panic_is_reported_with_its_console():
    """A guest kernel that panics ends the VM with no output of its own
    (panic=-1 reboots, qemu exits 255): vm-run prints the end of the
    guest's kernel console, which names the cause, and removes its run
    directory. This boots the VM kernel (about 15 s under TCG). Another
    vm-run may run beside it (make check's deb stage): its run directory
    is told from this one's by the guest command in its args file."""
    cache = os.environ.get("COPA_CACHE",
                           os.path.expanduser("~/.cache/copa"))
    runs = os.path.join(cache, "runs")
    marker = f"panic-test-{os.getpid()}"
    proc = subprocess.run(
        [os.path.join(ROOT, "scripts", "vm-run"), "--no-modules",
         "--timeout", "300", "--", "sh", "-c",
         f"echo c >/proc/sysrq-trigger; sleep 30; : {marker}"],
        capture_output=True, text=True, timeout=400)
    assert proc.returncode == 255, proc.stderr
    assert "the end of the guest kernel's console" in proc.stderr
    assert "sysrq_handle_crash" in proc.stderr, proc.stderr
    left = [d for d in os.listdir(runs) if marker in read_or_empty(
        os.path.join(runs, d, "args"))]
    assert left == [], "vm-run left its run directory"


def read_or_empty(path):
    try:
        with open(path, errors="replace") as f:
            return f.read()
    except OSError:
        return ""
