# SPDX-License-Identifier: GPL-2.0
"""Atomic writes and the corrupt-manifest error (copa_eval.files)."""
import json
import os

import pytest

from copa_eval import cli, files, runner


def test_write_atomic_replaces_and_leaves_no_temporary(tmp_path):
    path = tmp_path / "manifest.json"
    path.write_text("old")
    os.chmod(path, 0o600)
    files.write_atomic(str(path), "new")
    assert path.read_text() == "new"
    assert os.stat(path).st_mode & 0o777 == 0o600
    assert os.listdir(tmp_path) == ["manifest.json"]


def test_write_atomic_keeps_the_old_file_when_writing_fails(tmp_path,
                                                             monkeypatch):
    path = tmp_path / "README.md"
    path.write_text("intact")

    def boom(*_args):
        raise OSError(28, "No space left on device")
    monkeypatch.setattr(os, "fsync", boom)
    with pytest.raises(OSError):
        files.write_atomic(str(path), "half")
    assert path.read_text() == "intact"
    assert os.listdir(tmp_path) == ["README.md"]


@pytest.mark.parametrize("text", ["{\"scenario\": \"demo\", ", "[]",
                                  "{\"other\": 1}", "\xff\xfe"])
def test_corrupt_manifest_names_the_file(tmp_path, text):
    path = tmp_path / "manifest.json"
    path.write_bytes(text.encode("latin-1"))
    with pytest.raises(files.CorruptFileError, match=str(path)):
        files.load_manifest(str(path))


def test_report_of_a_corrupt_manifest_is_a_clean_error(tmp_path, capsys):
    (tmp_path / "manifest.json").write_text("{truncated")
    assert cli.main(["report", str(tmp_path), "--no-plots"]) == 2
    err = capsys.readouterr().err
    assert "manifest.json: corrupt manifest" in err
    assert "Traceback" not in err


def test_prepare_writes_the_manifest_atomically(tmp_path, monkeypatch):
    from copa_eval import scenarios
    scenario = scenarios.load("demo", [])
    written = []
    real = files.write_atomic

    def spy(path, text):
        written.append(os.path.basename(path))
        real(path, text)
    monkeypatch.setattr(files, "write_atomic", spy)
    runner.prepare(scenario, str(tmp_path), "test")
    assert "manifest.json" in written
    assert json.load(open(tmp_path / "manifest.json"))["scenario"] == "demo"
    # and a second prepare reads it back
    runner.prepare(scenario, str(tmp_path), "test")
