# SPDX-License-Identifier: GPL-2.0
"""The top-level Makefile builds only for the kernel it is asked for (the
running one, or KDIR) and says what to install when that kernel has no
headers; the files DKMS needs are listed once, in the Makefile, for make
dkms-install and debian/rules alike."""
import os
import stat
import subprocess

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
VERSION = open(os.path.join(ROOT, "VERSION")).read().strip()


def make(*args):
    return subprocess.run(["make", "-s", "--no-print-directory", "-C", ROOT,
                           *args], capture_output=True, text=True)


def dkms_files():
    proc = make("print-DKMS_FILES")
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.split()


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


def test_dkms_files_are_the_module_sources():
    tracked = subprocess.run(
        ["git", "-C", ROOT, "ls-files", "tcp_copa*.c", "tcp_copa*.h"],
        capture_output=True, text=True, check=True).stdout.split()
    files = dkms_files()
    assert sorted(files) == sorted(["Kbuild", "Makefile", "VERSION",
                                    *tracked])
    assert not [f for f in files if f.endswith(".mod.c")]


def test_debian_rules_takes_the_makefiles_list():
    proc = subprocess.run(
        ["make", "-s", "--no-print-directory", "-C", ROOT, "-f",
         "debian/rules", "--eval", "copa-dkms-files: ; @echo $(DKMS_FILES)",
         "copa-dkms-files"], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == dkms_files()


def fake_dkms(tmp_path, src):
    """A dkms that logs its arguments and knows tcp-copa while @src exists."""
    log = tmp_path / "dkms.log"
    fake = tmp_path / "dkms"
    fake.write_text(f"""#!/bin/sh
echo "$*" >>{log}
if [ "$1" = status ] && [ -e {src} ]; then echo "tcp-copa/{VERSION}: added"; fi
""")
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    kdir = tmp_path / "kdir"
    kdir.mkdir()
    (kdir / "Makefile").write_text("")
    return fake, log, [f"DKMS={fake}", f"DKMS_SRC={src}", f"KDIR={kdir}",
                       "KVER=6.1.0-56-amd64"]


def test_dkms_install_copies_the_list_then_adds_builds_installs(tmp_path):
    src = tmp_path / "src"
    fake, log, args = fake_dkms(tmp_path, src)
    proc = make("dkms-install", *args)
    assert proc.returncode == 0, proc.stderr
    assert sorted(os.listdir(src)) == sorted(["dkms.conf", *dkms_files()])
    mv = f"-m tcp-copa -v {VERSION}"
    assert log.read_text().splitlines() == [
        f"status {mv}", f"add {mv}", f"build {mv} -k 6.1.0-56-amd64",
        f"install {mv} -k 6.1.0-56-amd64"]

    log.unlink()
    proc = make("dkms-install", *args)
    assert proc.returncode != 0
    assert "make dkms-uninstall first" in proc.stderr
    assert log.read_text().splitlines() == [f"status {mv}"]

    log.unlink()
    proc = make("dkms-uninstall", *args)
    assert proc.returncode == 0, proc.stderr
    assert log.read_text().splitlines() == [f"status {mv}",
                                            f"remove {mv} --all"]
    assert not src.exists()
