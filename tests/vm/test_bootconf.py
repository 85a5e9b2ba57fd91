#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""The boot-time configuration examples in contrib/ do what
Documentation/install.rst says, applied as a systemd boot applies them.

The VM boots without systemd (virtme-ng's init), so the test puts the files
in /etc (an overlay in the guest), unloads the modules and then runs
systemd's own early-boot programs in boot order: systemd-modules-load
(modules-load.d; modprobe reads modprobe.d) and then systemd-sysctl
(sysctl.d). Where those programs are missing it falls back to modprobe
and sysctl --load. Leaves the files removed, the sysctls restored and
both modules loaded with their default parameters, as scripts/vm-run
does."""

import contextlib
import os
import shutil

from ksft import (KsftSkipEx, cmd, ksft_eq, ksft_in, ksft_pr, ksft_exit, ksft_run,
                  load_copa, module_loaded, read_text, sysctl_get,
                  sysctl_set, unload_copa)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
CONTRIB = os.path.join(ROOT, "contrib")
FILES = {"modules-load.d/tcp-copa.conf": "/etc/modules-load.d/tcp-copa.conf",
         "modprobe.d/tcp-copa.conf": "/etc/modprobe.d/tcp-copa.conf",
         "sysctl.d/90-tcp-copa.conf": "/etc/sysctl.d/90-tcp-copa.conf"}
MODULES_LOAD = "/lib/systemd/systemd-modules-load"
SYSCTL = "/lib/systemd/systemd-sysctl"
CORE = ("net.ipv4.tcp_congestion_control",
        "net.ipv4.tcp_allowed_congestion_control")


def conf_values(rel):
    """{key: value} of a contrib sysctl.d file, or the options of a
    modprobe.d file as {module.param: value}."""
    out = {}
    with open(os.path.join(CONTRIB, rel)) as f:
        for line in f:
            line = line.split("#")[0].strip()
            if line.startswith("options "):
                _, module, *opts = line.split()
                out.update((f"{module}.{o.split('=')[0]}", o.split("=")[1])
                           for o in opts)
            elif "=" in line:
                key, value = (p.strip() for p in line.split("=", 1))
                out[key] = value
    return out


@contextlib.contextmanager
def installed_config():
    saved = {name: sysctl_get(name) for name in CORE}
    try:
        for rel, dest in FILES.items():
            os.makedirs(os.path.dirname(dest), exist_ok=True)
            if os.path.exists(dest):
                raise KsftSkipEx(f"{dest} exists already")
            shutil.copy(os.path.join(CONTRIB, rel), dest)
        yield
    finally:
        for dest in FILES.values():
            with contextlib.suppress(FileNotFoundError):
                os.unlink(dest)
        for name in CORE:
            sysctl_set(name, "cubic" if name == CORE[0] else saved[name])
        # back to the default parameters: reload without modprobe.d
        unload_copa()
        load_copa()
        for name in CORE:
            sysctl_set(name, saved[name])


def boot():
    """What systemd does early at boot, in its order."""
    if os.access(MODULES_LOAD, os.X_OK):
        cmd([MODULES_LOAD])
    else:
        cmd(["modprobe", "tcp_copa"])
    if os.access(SYSCTL, os.X_OK):
        cmd([SYSCTL, "90-tcp-copa.conf"])
    else:
        cmd(["sysctl", "--load", FILES["sysctl.d/90-tcp-copa.conf"]])


def boot_with_contrib_files():
    options = conf_values("modprobe.d/tcp-copa.conf")
    sysctls = conf_values("sysctl.d/90-tcp-copa.conf")
    ksft_in("tcp_copa.delta", options)
    with installed_config():
        sysctl_set(CORE[0], "cubic")
        unload_copa()
        boot()
        ksft_eq(module_loaded("tcp_copa"), True, "modules-load.d loads it")
        for key, value in options.items():
            module, param = key.split(".")
            if not module_loaded(module):
                continue
            ksft_eq(read_text(f"/sys/module/{module}/parameters/{param}"),
                    value, f"modprobe.d sets {key}")
            ksft_eq(sysctl_get(f"net.ipv4.{module}.{param}"), value,
                    f"the initial namespace starts from {key}")
        for key, value in sysctls.items():
            ksft_eq(sorted(sysctl_get(key).split()), sorted(value.split()),
                    f"sysctl.d sets {key}")
        ksft_pr(f"after boot: {CORE[0]}={sysctl_get(CORE[0])}, delta="
                f"{sysctl_get('net.ipv4.tcp_copa.delta')}")
    ksft_eq(sysctl_get("net.ipv4.tcp_copa.delta"), "0.5",
            "the default delta is back")


ksft_run([boot_with_contrib_files])
ksft_exit()
