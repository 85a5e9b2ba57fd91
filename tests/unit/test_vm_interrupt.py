# SPDX-License-Identifier: GPL-2.0
"""copa-eval --vm: interrupted (SIGTERM, SIGINT) it stops the VM with no
orphaned process left, vm-run removes its run directory, and vm-run is
given a timeout. A fake vm-run stands in for the VM: like the real one it
runs its "qemu" (sleep) under timeout(1), in a process group of its own."""
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from copa_tools.eval import cli

HERE = os.path.dirname(os.path.abspath(__file__))
FAKE_VM_RUN = textwrap.dedent("""\
    #!/bin/bash
    # fake vm-run (it knows --rwdir)
    printf '%s\\n' "$@" >"$STATE/args"
    echo $$ >"$STATE/sid"
    RUN=$STATE/run
    mkdir "$RUN"
    trap 'rm -rf "$RUN"' EXIT
    trap 'exit 143' TERM
    trap 'exit 130' INT
    touch "$STATE/ready"
    timeout -k 10 300 sleep 1000 | cat
    """)
DRIVER = textwrap.dedent("""\
    import sys
    sys.path.insert(0, sys.argv[1])
    from copa_tools.eval import cli
    cli.VM_RUN = sys.argv[2]
    cli.prime_font_cache = lambda: None
    sys.exit(cli.main(["--vm", "run", "demo", "--out", sys.argv[3],
                       "--set", "duration_s=5"]))
    """)


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_interrupted_vm_run_leaves_nothing(tmp_path, signum):
    fake = tmp_path / "vm-run"
    fake.write_text(FAKE_VM_RUN)
    fake.chmod(0o755)
    env = dict(os.environ, STATE=str(tmp_path))
    driver = subprocess.Popen(
        [sys.executable, "-c", DRIVER, os.path.join(HERE, "..", "..",
                                                    "tools"),
         str(fake), str(tmp_path / "out")], env=env,
        stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 30
    while not (tmp_path / "ready").exists():
        assert driver.poll() is None, driver.stderr.read()
        assert time.monotonic() < deadline, "the fake vm-run never started"
        time.sleep(0.05)
    sid = int((tmp_path / "sid").read_text())
    # "ready" comes before the pipeline starts: wait for bash, timeout,
    # sleep and cat (a loaded host takes a while to fork them)
    while len(cli.session_pids(sid)) < 3:
        assert time.monotonic() < deadline, cli.session_pids(sid)
        time.sleep(0.05)
    driver.send_signal(signum)
    assert driver.wait(timeout=60) == 128 + signum
    assert "stopping the VM" in driver.stderr.read()
    assert cli.session_pids(sid) == [], "processes outlived copa-eval"
    assert not (tmp_path / "run").exists(), "vm-run's run dir is left"
    args = (tmp_path / "args").read_text().split("\n")
    timeout = int(args[args.index("--timeout") + 1])
    assert 600 < timeout < 24 * 3600


def test_vm_timeout_follows_the_plan():
    from copa_tools.eval import scenarios
    demo = scenarios.load("demo", ["duration_s=10"])
    runs = len(cli.runner.plan(demo))
    assert cli.vm_timeout_s([demo]) == cli.VM_BOOT_S + runs * (
        10 + cli.VM_RUN_OVERHEAD_S)


def test_vm_options_are_not_passed_into_the_guest():
    assert cli.strip_vm_options(["--vm", "--vm-timeout", "60", "run", "x",
                                 "--vm-timeout=5"]) == ["run", "x"]
