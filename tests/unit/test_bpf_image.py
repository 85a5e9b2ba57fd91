# SPDX-License-Identifier: GPL-2.0
"""copa_tools.bpf finds the vmlinux in a kernel image, whichever of
Debian's compressors packed it, past the setup code and a false magic,
and with data after the payload, as in a bzImage."""

import gzip
import lzma
import shutil
import subprocess

import pytest

from copa_tools import bpf

ELF = b"\x7fELF" + bytes(range(256)) * 64


def zstd(data):
    return subprocess.run(["zstd", "-q", "-c"], input=data,
                          capture_output=True, check=True).stdout


PACKERS = {
    "xz": lambda d: lzma.compress(d, format=lzma.FORMAT_XZ),
    "gzip": gzip.compress,
    "zstd": zstd,
}


@pytest.mark.parametrize("packer", sorted(PACKERS))
def test_extracts_the_elf_payload(tmp_path, packer):
    if not shutil.which(packer):
        pytest.skip(f"no {packer}")
    payload = PACKERS[packer](ELF)
    image = tmp_path / "vmlinuz"
    # A setup header holding every magic once, not followed by a payload.
    setup = b"MZ" + b"\xfd7zXZ\x00" + b"\x28\xb5\x2f\xfd" + b"\x1f\x8b\x08"
    image.write_bytes(setup + bytes(512) + payload + b"trailer" * 100)
    out = tmp_path / "vmlinux"
    bpf.extract_vmlinux(str(image), str(out))
    assert out.read_bytes() == ELF


@pytest.mark.parametrize("payload", [lzma.compress(b"not an ELF file"),
                                     b"no compressor's magic at all"])
def test_image_without_vmlinux_is_an_error_and_leaves_nothing(tmp_path,
                                                              payload):
    image = tmp_path / "vmlinuz"
    image.write_bytes(b"MZ" + payload)
    out = tmp_path / "vmlinux"
    with pytest.raises(bpf.BpfError, match="no vmlinux inside"):
        bpf.extract_vmlinux(str(image), str(out))
    assert not out.exists()
