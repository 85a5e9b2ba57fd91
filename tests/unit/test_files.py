# SPDX-License-Identifier: GPL-2.0
"""Atomic writes and the corrupt-manifest error (copa_tools.files)."""
import json
import os

import pytest
from conftest import TOOLS

from copa_tools import files
from copa_tools.eval import cli, runner


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
    from copa_tools.eval import scenarios
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


def test_prepare_refuses_another_revisions_results(tmp_path, monkeypatch):
    """A results directory resumes only at the revision that measured it:
    a bench resumed after a commit reported the old code's runs under the
    new revision."""
    from copa_tools.eval import scenarios
    scenario = scenarios.load("demo", [])
    monkeypatch.setattr(runner, "git_revision", lambda: "aaaaaaa")
    runner.prepare(scenario, str(tmp_path), "test")
    manifest = (tmp_path / "manifest.json").read_text()
    monkeypatch.setattr(runner, "git_revision", lambda: "bbbbbbb")
    with pytest.raises(RuntimeError, match="measured at git aaaaaaa"):
        runner.prepare(scenario, str(tmp_path), "test")
    assert (tmp_path / "manifest.json").read_text() == manifest
    assert runner.default_outdir(scenario).endswith("-bbbbbbb")
    assert cli.bench_outdir([scenario]).endswith("-bbbbbbb")


def test_private_dir_is_the_users(tmp_path):
    path = files.private_dir("mpl", base=str(tmp_path))
    assert path == str(tmp_path / f"mpl-{os.getuid()}")
    assert os.stat(path).st_mode & 0o777 == 0o700
    assert files.private_dir("mpl", base=str(tmp_path)) == path


def test_private_dir_distrusts_open_or_linked_dirs(tmp_path):
    open_dir = tmp_path / f"open-{os.getuid()}"
    open_dir.mkdir()
    os.chmod(open_dir, 0o777)
    got = files.private_dir("open", base=str(tmp_path))
    assert got != str(open_dir) and os.stat(got).st_mode & 0o777 == 0o700
    os.rmdir(got)
    target = tmp_path / "elsewhere"
    target.mkdir(mode=0o700)
    (tmp_path / f"link-{os.getuid()}").symlink_to(target)
    got = files.private_dir("link", base=str(tmp_path))
    assert not os.path.islink(got)
    os.rmdir(got)


def test_copa_eval_sets_a_private_matplotlib_dir(tmp_path):
    import subprocess
    import sys
    env = {k: v for k, v in os.environ.items() if k != "MPLCONFIGDIR"}
    env["TMPDIR"] = str(tmp_path)
    env["PYTHONPATH"] = TOOLS
    subprocess.run([sys.executable, "-m", "copa_tools.eval", "--version"],
                   env=env, check=True, capture_output=True)
    made = tmp_path / f"copa-eval-matplotlib-{os.getuid()}"
    assert made.is_dir() and os.stat(made).st_mode & 0o777 == 0o700
