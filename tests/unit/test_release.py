# SPDX-License-Identifier: GPL-2.0
"""The one version string (VERSION) and where it must reach: the modules
(Kbuild -D), dkms.conf, copa-eval --version, the tools' package, the
changelog; dkms.conf's kernel range and make uninstall."""
import os
import re
import subprocess
import sys
import tomllib

import pytest
from conftest import TOOLS

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


def read(*path):
    with open(os.path.join(ROOT, *path)) as f:
        return f.read()


VERSION = read("VERSION").strip()


def test_version_is_semver():
    assert re.fullmatch(r"\d+\.\d+\.\d+", VERSION), VERSION


def test_modules_take_it_from_kbuild():
    assert "$(src)/VERSION" in read("Kbuild")
    assert "-DCOPA_VERSION=" in read("Kbuild")
    for src in ("tcp_copa.c", "tcp_copa_policer.c"):
        assert re.findall(r"MODULE_VERSION\((.*)\);", read(src)) == \
            ["COPA_VERSION"], src


def dkms_conf(kernelver="6.1.0-56-amd64", conf=None):
    """Source dkms.conf the way dkms does (bash, from another directory);
    return its variables."""
    script = ('kernelver=$1; kernel_source_dir=/lib/modules/$1/build; '
              '. "$2" >/dev/null; printf "%s\\n" "$PACKAGE_NAME" '
              '"$PACKAGE_VERSION" "$BUILD_EXCLUSIVE_KERNEL" "${CLEAN-unset}"')
    out = subprocess.run(
        ["bash", "-c", script, "-", kernelver,
         conf or os.path.join(ROOT, "dkms.conf")],
        cwd="/", capture_output=True, text=True, check=True).stdout
    return dict(zip(("name", "version", "exclusive", "clean"),
                    out.splitlines()))


def test_dkms_conf_reads_version():
    conf = dkms_conf()
    assert conf["name"] == "tcp-copa"
    assert conf["version"] == VERSION
    assert conf["clean"] == "unset", "CLEAN is deprecated in dkms 3"


@pytest.mark.parametrize("kernel, ok", [
    ("4.19.0-27-amd64", False), ("5.4.0-1", False), ("5.9.16", False),
    ("5.10.0-46-amd64", True), ("5.15.0-100-generic", True),
    ("6.1.0-56-amd64", True), ("6.12.117+deb13-amd64", True),
    ("7.2.13+deb14-amd64", True), ("10.1.0", True)])
def test_dkms_kernel_range(kernel, ok):
    pattern = dkms_conf()["exclusive"]
    assert bool(re.search(pattern, kernel)) == ok, (pattern, kernel)


def test_copa_eval_version():
    out = subprocess.run([sys.executable, "-m", "copa_tools.eval",
                          "--version"], capture_output=True, text=True,
                         env=dict(os.environ, PYTHONPATH=TOOLS),
                         check=True).stdout
    assert out.strip() == f"copa-eval {VERSION}"


def test_tools_package_takes_the_version():
    """pyproject.toml's version (the wheel's, the Debian package's
    dist-info) is VERSION's, not a copy."""
    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
        project = tomllib.load(f)
    assert project["project"]["dynamic"] == ["version"]
    assert project["tool"]["setuptools"]["dynamic"]["version"] == \
        {"file": "VERSION"}


def test_changelog_has_the_version():
    text = read("CHANGELOG.md")
    assert "## [Unreleased]" in text
    assert re.search(rf"^## \[{re.escape(VERSION)}\] - \d{{4}}-\d\d-\d\d$",
                     text, re.M), f"CHANGELOG.md has no entry for {VERSION}"


def test_make_uninstall_removes_only_copa(tmp_path):
    moddir = tmp_path / "lib" / "modules" / "6.1.0-56-amd64"
    keep = moddir / "kernel" / "other.ko"
    gone = [moddir / "updates" / "tcp_copa.ko",
            moddir / "extra" / "tcp_copa_policer.ko.xz"]
    for path in gone + [keep]:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"")
    subprocess.run(["make", "-s", "-C", ROOT, "uninstall", "DEPMOD=true",
                    f"INSTALL_MOD_PATH={tmp_path}", "KVER=6.1.0-56-amd64"],
                   check=True, capture_output=True)
    assert not any(p.exists() for p in gone)
    assert keep.exists()


def test_exports_in_the_tcp_copa_namespace():
    """tcp_copa.ko exports only through EXPORT_SYMBOL_COPA (the TCP_COPA
    namespace); the policer imports it; the compat macro has both argument
    forms, split at 6.13."""
    src = read("tcp_copa.c")
    assert not re.search(r"\bEXPORT_SYMBOL(_GPL)?\(", src)
    assert len(re.findall(r"^EXPORT_SYMBOL_COPA\(\w+\);$", src, re.M)) >= 10
    assert "COPA_IMPORT_NS();" in read("tcp_copa_policer.c")
    compat = read("tcp_copa_compat.h")
    assert 'EXPORT_SYMBOL_NS_GPL(sym, "TCP_COPA")' in compat
    assert "EXPORT_SYMBOL_NS_GPL(sym, TCP_COPA)" in compat
    assert "KERNEL_VERSION(6, 13, 0)" in compat


def test_built_modules_use_the_namespace():
    symvers = os.path.join(ROOT, "Module.symvers")
    policer = os.path.join(ROOT, "tcp_copa_policer.ko")
    if not (os.path.exists(symvers) and os.path.exists(policer)):
        pytest.skip("modules not built")
    with open(symvers) as f:
        rows = [line.split("\t") for line in f if line.strip()]
    assert rows and all(r[4].strip() == "TCP_COPA" for r in rows), rows
    out = subprocess.run(["modinfo", "-F", "import_ns", policer],
                         capture_output=True, text=True, check=True).stdout
    assert out.split() == ["TCP_COPA"]
    out = subprocess.run(["modinfo", "-F", "version", policer],
                         capture_output=True, text=True, check=True).stdout
    assert out.strip() == VERSION
