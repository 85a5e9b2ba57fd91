# SPDX-License-Identifier: GPL-2.0
"""Test this tree's tools (tools/copa_tools), whatever work tree the
venv's editable install came from."""
import os
import sys

TOOLS = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..",
                                     "tools"))
sys.path.insert(0, TOOLS)

import importlib.machinery  # noqa: E402
import importlib.util  # noqa: E402

import pytest  # noqa: E402

# Plots need matplotlib (scripts/deps puts it in the venv); without it the
# tests that draw are skipped, not failed. COPA_TEST_NO_MATPLOTLIB=1
# pretends it is missing (test_no_matplotlib.py uses it).
if os.environ.get("COPA_TEST_NO_MATPLOTLIB") == "1":
    sys.modules["matplotlib"] = None
HAVE_MATPLOTLIB = sys.modules.get("matplotlib", 0) is not None and \
    importlib.util.find_spec("matplotlib") is not None
def pytest_configure(config):
    config.addinivalue_line(
        "markers", "boots_vm: the test boots the VM (scripts/vm-run)")


needs_matplotlib = pytest.mark.skipif(
    not HAVE_MATPLOTLIB, reason="matplotlib is missing (run scripts/deps)")


def load_script(name, path):
    """Import the script at @path (no .py) as a fresh module."""
    loader = importlib.machinery.SourceFileLoader(
        name.replace("-", "_") + "_under_test", path)
    spec = importlib.util.spec_from_loader(loader.name, loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module
