# SPDX-License-Identifier: GPL-2.0
"""The BPF build of Copa (bpf_copa, bpf_copa_pol) on the running kernel.

``ensure_registered()`` builds ``bpf/tcp_copa.bpf.o`` against the running
kernel's BTF in a scratch directory (the repository may be read-only, as
it is in the VM, and its ``bpf/`` may hold an object for another kernel;
``build()`` is also ``copa-bpf build``'s), registers both names with
copa-bpf (``bpf_cli``: bpftool struct_ops) and, if it registered them,
unregisters them when the process exits. The lab calls it for flows of
either name; ``tests/vm/test_bpf_copa.py`` too.

``python3 -m copa_tools.bpf --image VMLINUZ DEST`` builds the objects in
DEST/bpf for a kernel that is not running, from the BTF of the vmlinux
inside its image: ``scripts/vm-run --bpf`` builds the guest's on the
host, where clang runs some 40 times faster than under TCG, and the
guest's ``ensure_registered()`` takes them from ``$COPA_BPF_PREBUILT``.
"""

import argparse
import atexit
import os
import shutil
import subprocess
import sys
import tempfile

from . import paths

NAMES = ("bpf_copa", "bpf_copa_pol")
OLDEST = (6, 0)         # a struct_ops congestion control may pace from 6.0
VMLINUX_BTF = "/sys/kernel/btf/vmlinux"
# What bpf/ includes from the top level of the tree.
TOP_HEADERS = ("tcp_copa_algo.h", "tcp_copa_limit.h", "tcp_copa_params.h")

_state = {}


class BpfError(RuntimeError):
    """The BPF build cannot run here, or building or registering failed."""


def kernel_version():
    """(major, minor) of the running kernel, e.g. 6.12.117+deb13-amd64."""
    rel = os.uname().release.split("-")[0].split("+")[0]
    return tuple(int(x) for x in rel.split(".")[:2])


def unsupported_reason():
    """Why the BPF build cannot run on this kernel or host, or None."""
    if kernel_version() < OLDEST:
        return (f"kernel {os.uname().release} is older than "
                f"{OLDEST[0]}.{OLDEST[1]}: a BPF congestion control cannot "
                f"pace there")
    if not os.path.exists(VMLINUX_BTF):
        return f"no {VMLINUX_BTF}"
    for tool in ("clang", "bpftool", "make"):
        if not shutil.which(tool):
            return (f"no {tool} (apt install clang bpftool make; in a "
                    f"source tree, scripts/deps bpf)")
    return None


def available():
    """The congestion controls the stack offers now."""
    with open("/proc/sys/net/ipv4/tcp_available_congestion_control") as f:
        return f.read().split()


def copa_bpf(*args, obj=None, check=True):
    """Run copa-bpf, this package's (the directory holding it leads
    PYTHONPATH); BpfError with its message if it fails."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, (
        os.path.dirname(paths.PACKAGE), os.environ.get("PYTHONPATH")))))
    if obj:
        env["COPA_BPF_OBJ"] = obj
    r = subprocess.run([sys.executable, "-m", "copa_tools.bpf_cli", *args],
                       env=env, capture_output=True, text=True, check=False)
    if check and r.returncode:
        raise BpfError(f"copa-bpf {' '.join(args)}: {r.stderr.strip()}")
    return r


def build(dest=None, targets=("tcp_copa.bpf.o",), btf=None):
    """Build @targets (bpf/Makefile's) for the running kernel, or for the
    kernel whose BTF (a blob or an ELF vmlinux) is @btf, in @dest/bpf and
    return that directory. Unless @dest is paths.data_dir() itself,
    bpf/'s sources and the headers it reads from the top level
    (TOP_HEADERS: ../tcp_copa_algo.h, the tcp_copa_limit.h it includes, and
    ../tcp_copa_params.h) are copied there first; None is a scratch
    directory, removed at exit."""
    why = None if btf else unsupported_reason()
    if why:
        raise BpfError(why)
    if dest is None:
        dest = tempfile.mkdtemp(prefix="copa-bpf-")
        atexit.register(shutil.rmtree, dest, True)
    work = os.path.join(dest, "bpf")
    if os.path.realpath(dest) != os.path.realpath(paths.data_dir()):
        shutil.copytree(paths.data("bpf"), work, dirs_exist_ok=True,
                        ignore=shutil.ignore_patterns("*.o", "vmlinux.h",
                                                      "features.h"))
        for header in TOP_HEADERS:
            shutil.copy(paths.data(header), dest)
    # One clang per object: each parses the whole vmlinux.h.
    r = subprocess.run(["make", "-s", f"-j{os.cpu_count() or 1}", "-C",
                        work, *targets,
                        f"VMLINUX_BTF={btf or VMLINUX_BTF}"],
                       capture_output=True, text=True, check=False)
    if r.returncode:
        raise BpfError(f"make bpf failed:\n{r.stdout}{r.stderr}")
    return work


def ensure_registered():
    """Make bpf_copa and bpf_copa_pol available; return the object
    registered, or None if they already were (then they stay)."""
    if all(name in available() for name in NAMES):
        return _state.get("obj")
    obj = os.path.join(os.environ.get("COPA_BPF_PREBUILT") or build(),
                       "tcp_copa.bpf.o")
    copa_bpf("unregister", check=False)
    copa_bpf("register", obj=obj)
    _state["obj"] = obj
    atexit.register(copa_bpf, "unregister", check=False)
    return obj


# The compressors a bzImage's payload may use: their magic, and the command
# that decompresses from it (Debian's kernels: xz up to 6.1, zstd since).
IMAGE_PAYLOADS = ((b"\xfd7zXZ\x00", ("xz", "-dc")),
                  (b"\x28\xb5\x2f\xfd", ("zstd", "-dcq")),
                  (b"\x1f\x8b\x08", ("gzip", "-dc")))


def extract_vmlinux(image, out):
    """Write the ELF vmlinux inside the bzImage @image to @out, as the
    kernel's scripts/extract-vmlinux does: decompress from each offset of
    a compressor's magic until the result is an ELF file. The data after
    the payload makes the decompressor complain; its output is whole."""
    with open(image, "rb") as f:
        data = f.read()
    open(out, "wb").close()
    for magic, cmd in IMAGE_PAYLOADS:
        pos = data.find(magic)
        while pos >= 0:
            with open(out, "wb") as f:
                subprocess.run(cmd, input=data[pos:], stdout=f,
                               stderr=subprocess.DEVNULL, check=False)
            with open(out, "rb") as f:
                if f.read(4) == b"\x7fELF":
                    return
            pos = data.find(magic, pos + 1)
    os.unlink(out)
    raise BpfError(f"{image}: no vmlinux inside (xz, zstd or gzip)")


def build_for_image(image, dest):
    """Build bpf/'s objects in @dest/bpf for the kernel in @image."""
    os.makedirs(dest, exist_ok=True)
    vmlinux = os.path.join(dest, "vmlinux")
    extract_vmlinux(image, vmlinux)
    try:
        return build(dest, targets=("all",), btf=vmlinux)
    finally:
        os.unlink(vmlinux)


def main():
    ap = argparse.ArgumentParser(
        prog="python3 -m copa_tools.bpf",
        description="Build bpf/'s objects in DEST/bpf for the kernel in "
                    "VMLINUZ, from its BTF, without booting it.")
    ap.add_argument("--image", required=True, metavar="VMLINUZ")
    ap.add_argument("dest", metavar="DEST")
    args = ap.parse_args()
    try:
        print(build_for_image(args.image, args.dest))
    except (BpfError, OSError) as e:
        sys.exit(f"copa_tools.bpf: {e}")


if __name__ == "__main__":
    main()
