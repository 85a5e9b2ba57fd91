# SPDX-License-Identifier: GPL-2.0
"""scripts/vm-watch: how it names kernel addresses and reads qemu's
monitor output, and, booting the VM kernel, that a stall report or the
end of --timeout gets the vCPUs' stacks printed and the VM stopped."""
import os
import subprocess
import time

import pytest

from conftest import load_script

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
VM_RUN = os.path.join(ROOT, "scripts", "vm-run")
vm_watch = load_script("vm-watch", os.path.join(ROOT, "scripts", "vm-watch"))

KALLSYMS = """\
ffffffff81000000 T _stext
ffffffff81000100 t native_safe_halt
ffffffff81000200 T tcp_write_xmit
ffffffff81e00000 T _etext
ffffffffc0000000 t copa_cong_control\t[tcp_copa]
ffffffffc0000400 t copa_init\t[tcp_copa]
""".splitlines()


def test_names_kernel_and_module_text():
    syms = vm_watch.Symbols(KALLSYMS)
    assert syms.name(0xffffffff81000210) == "tcp_write_xmit+0x10"
    assert syms.name(0xffffffffc0000008) == "copa_cong_control+0x8 [tcp_copa]"
    assert syms.is_text(0xffffffffc0000400 + vm_watch.MODULE_FUNC_MAX - 1)


def test_data_is_not_text():
    syms = vm_watch.Symbols(KALLSYMS)
    for addr in (0xffffffff80ffffff, 0xffffffff81e00000,
                 0xffffffffc0000400 + vm_watch.MODULE_FUNC_MAX, 0x7ffd0000):
        assert not syms.is_text(addr)
        assert syms.name(addr) == f"{addr:#x}"


def test_reads_qemu_monitor_output():
    regs = vm_watch.registers(
        "RAX=0000000000000000 RBX=ffffffffaae1a940\n"
        "RSP=ffffffffaae03e98\n"
        "RIP=ffffffffaa1d3b5b RFL=00000246 [---Z-P-] CPL=0 II=0 A20=1\n")
    assert regs == {"RIP": 0xffffffffaa1d3b5b, "RSP": 0xffffffffaae03e98,
                    "RFL": 0x246, "CPL": 0}
    assert vm_watch.words(
        "ffffffffaae03e98: 0xffffffffaa1d3e2d 0x0000000000000000\n"
        "ffffffffaae03ea8: 0xffffffffaa1d4268 0x0000000000000001\n") == [
        0xffffffffaa1d3e2d, 0, 0xffffffffaa1d4268, 1]


def boot(command, timeout):
    start = time.monotonic()
    proc = subprocess.run([VM_RUN, "--no-modules", "--timeout", str(timeout),
                           "--", "sh", "-c", command],
                          capture_output=True, text=True, timeout=timeout + 60)
    return proc, time.monotonic() - start


@pytest.mark.boots_vm
def test_stall_report_stops_the_vm_with_its_stacks():
    """The guest logs a stall report's first line (the kernel prints it
    at warning level, as here): vm-run ends with 125 soon after, and the
    vCPUs' stacks, named, are in its output."""
    proc, took = boot("echo '<4>rcu: INFO: rcu_preempt self-detected stall "
                      "on CPU (vm-watch test)' >/dev/kmsg; sleep 600", 600)
    assert proc.returncode == 125, proc.stderr
    assert "its kernel stalled" in proc.stderr
    assert "vm-watch: vCPU 1: text addresses on the stack" in proc.stderr
    assert "do_idle+" in proc.stderr, proc.stderr
    assert took < 300


@pytest.mark.boots_vm
def test_timeout_prints_the_stacks_first():
    proc, took = boot("sleep 600", 45)
    assert proc.returncode == 124, proc.stderr
    assert "vm-watch: timeout, stopping the VM" in proc.stderr
    assert "vm-watch: vCPU 0: RIP " in proc.stderr
    assert took < 45
