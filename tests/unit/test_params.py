# SPDX-License-Identifier: GPL-2.0
"""tcp_copa_params.h, the one table of tunables and modes: the C
compiler and copa_tools.params read the same facts from it, the tools take
theirs from copa_tools.params (a range changed in the table changes what
they accept), the parser refuses what it does not know, and the packages
ship the header wherever something includes it."""
import errno
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys

import pytest

from conftest import load_script
from copa_tools import bpf as copa_bpf
from copa_tools import kernel_log, params
from copa_tools.eval import variants

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
GROUPS = ("tcp_copa", "tcp_copa_policer", "bpf")

# Prints what the C preprocessor makes of the tables, as JSON.
DUMP_C = r"""
#include "kernel_shim.h"
#include "tcp_copa_algo.h"
#include "tcp_copa_params.h"

#define T(id, name, min, max, milli, def, desc)				\
	printf("%s[\"%s\", \"%s\", %u, %u, %d, %u, \"%s\"]", sep, group,	\
	       #name, (unsigned int)(min), (unsigned int)(max), (int)(milli),	\
	       (unsigned int)(def), desc), sep = ",";
#define M(id, number, name)						\
	printf("%s[%d, \"%s\", %d]", sep, number, #name, COPA_MODE_##id),	\
	sep = ",";

int main(void)
{
	const char *sep = "", *group;

	printf("{\"tunables\": [");
	group = "tcp_copa";
	COPA_TUNABLES(T)
	group = "tcp_copa_policer";
	COPA_POLICER_TUNABLES(T)
	group = "bpf";
	COPA_BPF_TUNABLES(T)
	printf("], \"nr\": [%d, %d], \"modes\": [", COPA_T_NR, POLICER_T_NR);
	sep = "";
	COPA_MODES(M)
	printf("]}\n");
	return 0;
}
"""


def test_python_reads_what_c_compiles(tmp_path):
    """The parser's tables are the compiler's: every tunable with its
    range, milli flag, default (constants of tcp_copa_algo.h and
    tcp_copa_limit.h resolved) and description, the enums' sizes, and the
    modes with their numbers (enum copa_mode is built from the table)."""
    cc = shutil.which("gcc") or shutil.which("cc")
    if not cc:
        pytest.skip("no C compiler")
    src = tmp_path / "dump.c"
    src.write_text(DUMP_C)
    subprocess.run([cc, "-std=gnu11", "-Wall", "-Werror", "-I", ROOT, "-I",
                    os.path.join(ROOT, "tests", "model"), "-o",
                    str(tmp_path / "dump"), str(src)], check=True)
    c = json.loads(subprocess.run([str(tmp_path / "dump")], check=True,
                                  capture_output=True, text=True).stdout)
    p = params.load()
    assert c["tunables"] == [
        [g, t.name, t.min, t.max, int(t.milli), t.default, t.description]
        for g in GROUPS for t in p.tunables[g].values()]
    assert c["nr"] == [len(p.tunables["tcp_copa"]),
                       len(p.tunables["tcp_copa_policer"])]
    assert c["modes"] == [[n, name, n] for n, name in p.modes.items()]


def test_table_content():
    """What the rest of the project assumes of the table."""
    p = params.load()
    assert list(p.tunables) == list(GROUPS)
    assert p.tunables["tcp_copa"]["delta"].milli
    assert p.modes == {1: "slow_start", 2: "default", 3: "competitive",
                       4: "policed"}
    assert p.mode("policed") == 4


def load_fresh(name):
    """A fresh copy of the module @name: it reads the table anew."""
    spec = importlib.util.find_spec(name)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def copy_constant_headers(dest):
    """The headers whose constants the table names, beside a copy of it."""
    for name in params.CONSTANT_HEADERS:
        shutil.copy(os.path.join(ROOT, name), dest)


@pytest.fixture
def changed_table(tmp_path, monkeypatch):
    """A copy of the table with delta's maximum at 0.5, loss_thresh's
    default a number, and mode 4 renamed, which params.load() then
    reads."""
    text = open(os.path.join(ROOT, "tcp_copa_params.h")).read()
    text, n = re.subn(r"X\(DELTA, delta, 1, 1000, true, 500,",
                      "X(DELTA, delta, 1, 500, true, 500,", text)
    assert n == 1
    text, n = re.subn(r"X\(LOSS_THRESH, loss_thresh, 1, 100, false, \w+,",
                      "X(LOSS_THRESH, loss_thresh, 1, 100, false, 7,", text)
    assert n == 1
    text, n = re.subn(r"X\(POLICED, 4, policed\)", "X(POLICED, 4, held)",
                      text)
    assert n == 1
    header = tmp_path / "tcp_copa_params.h"
    header.write_text(text)
    copy_constant_headers(tmp_path)
    monkeypatch.setattr(params, "HEADER", str(header))
    return header


def test_variants_read_the_table(changed_table, monkeypatch):
    variants.parse_variant("copa:delta=0.5")
    with pytest.raises(variants.VariantError,
                       match="delta must be a decimal from 0.001 to 0.5"):
        variants.parse_variant("copa:delta=0.6")
    monkeypatch.undo()
    assert variants.parse_variant("copa:delta=0.6").params == \
        (("delta", "0.6"),)


def test_copa_bpf_reads_the_table(changed_table, monkeypatch):
    tool = load_fresh("copa_tools.bpf_cli")
    assert tool.parse_value("delta", "0.5") == 500
    with pytest.raises(tool.Error) as e:
        tool.parse_value("delta", "0.6")
    assert e.value.code == errno.EINVAL
    assert tool.MODE_NAMES[4] == "held"
    assert tool.DEFAULTS["loss_thresh"].default == 7
    assert "delta          0.001 to 0.5 (decimal), default 0.5" in \
        tool.usage()
    # struct copa_bpf_defaults and copa_sk_params, in the table's order
    assert list(tool.DEFAULTS) == [name for g in GROUPS for name in
                                   params.load().tunables[g]]
    assert tool.SET_BITS == {"delta": 1, "competitive": 2,
                             "loss_reaction": 4}
    monkeypatch.undo()
    assert load_fresh("copa_tools.bpf_cli").parse_value("delta", "0.6") \
        == 600


def test_copa_diag_reads_the_table(changed_table):
    assert load_fresh("copa_tools.diag_cli").MODES[4] == "held"


def strict(tmp_path, old, new, count=1):
    """load() of the table with @old replaced by @new: the error."""
    text = open(os.path.join(ROOT, "tcp_copa_params.h")).read()
    assert text.count(old) >= count, old
    (tmp_path / "tcp_copa_params.h").write_text(text.replace(old, new,
                                                             count))
    copy_constant_headers(tmp_path)
    with pytest.raises(params.ParamsError) as e:
        params.load(str(tmp_path / "tcp_copa_params.h"))
    return str(e.value)


@pytest.mark.parametrize("old,new,needle", [
    ("X(DELTA, delta, 1, 1000, true,", "X(DELTA, delta, 1, 1e3, true,",
     "COPA_TUNABLES: not a tunable entry"),
    ("X(DELTA, delta, 1, 1000, true,", "X(DELTA, delta, 1, 1000, 1,",
     "not a tunable entry"),
    ("X(DELTA, delta, 1, 1000, true,", "/* d */ X(DELTA, delta, 1, 1000, true,",
     "not a tunable entry"),
    ("X(DETECT, detect,", "Y(DETECT, detect,", "COPA_POLICER_TUNABLES"),
    ("X(COMPETITIVE, competitive,", "X(COMPETITIVE, delta,",
     "listed twice"),
    ("X(FLOW_STATS, flow_stats, 0, 1, false, 1,",
     "X(FLOW_STATS, flow_stats, 0, 1, false, 2,", "min <= default <= max"),
    ("COPA_RATE_TOL_PCT", "COPA_NO_SUCH_CONSTANT",
     "default COPA_NO_SUCH_CONSTANT is not one number"),
    ("X(POLICED, 4, policed)", "X(POLICED, 3, policed)", "listed twice"),
    ("#define COPA_MODES(X)", "#define COPA_MODES(Y)", "no COPA_MODES"),
    ("#endif /* _TCP_COPA_PARAMS_H */",
     '#define COPA_BPF_TUNABLES(X) X(A, a, 0, 1, false, 0, "")\n#endif',
     "COPA_BPF_TUNABLES is defined twice"),
])
def test_parser_is_strict(tmp_path, old, new, needle):
    assert needle in strict(tmp_path, old, new)


def test_parser_names_the_line(tmp_path):
    msg = strict(tmp_path, "X(RATE_TOL, rate_tol, 1, 100,",
                 "X(RATE_TOL, rate_tol, 1, -100,")
    line = next(i for i, text in enumerate(
        open(os.path.join(ROOT, "tcp_copa_params.h")), 1)
        if text.startswith("#define COPA_POLICER_TUNABLES"))
    assert f"tcp_copa_params.h:{line}: COPA_POLICER_TUNABLES" in msg


def top_level_includes():
    """Top-level headers that bpf/ includes, directly or through another
    top-level header."""
    found, todo = set(), []
    for name in os.listdir(os.path.join(ROOT, "bpf")):
        if name.endswith((".c", ".h")) and name not in ("vmlinux.h",
                                                        "features.h"):
            todo += re.findall(r'#include "\.\./([\w.]+)"',
                               open(os.path.join(ROOT, "bpf", name)).read())
    while todo:
        header = todo.pop()
        if header not in found:
            found.add(header)
            todo += re.findall(r'#include "([\w.]+)"',
                               open(os.path.join(ROOT, header)).read())
    return found


def test_table_is_shipped():
    """Wherever something includes the table, it goes too: the DKMS
    package (tcp_copa*.h), copa-tools (the BPF build's top-level headers,
    and the tools read it), copa-bpf build's copies."""
    needed = top_level_includes()
    assert {"tcp_copa_algo.h", "tcp_copa_limit.h",
            "tcp_copa_params.h"} <= needed
    rules = open(os.path.join(ROOT, "debian", "rules")).read()
    dkms = subprocess.run(["make", "-s", "--no-print-directory", "-C", ROOT,
                           "print-DKMS_FILES"], capture_output=True,
                          text=True, check=True).stdout.split()
    assert needed <= set(dkms)
    tools = {f for line in re.findall(r"install -m 644 (.*) \$\(TOOLS\)/\n",
                                      rules) for f in line.split()}
    assert needed <= tools
    assert needed <= set(copa_bpf.TOP_HEADERS)
    makefile = open(os.path.join(ROOT, "bpf", "Makefile")).read()
    assert all(f"../{h}" in makefile for h in needed)


def test_kernel_log_is_one_pattern():
    """tests/run-vm and the native tests read copa_tools.kernel_log; it
    catches the policy's words and an oops without them."""
    run_vm = load_script("run-vm", os.path.join(ROOT, "tests", "run-vm"))
    assert run_vm.kernel_log is kernel_log
    assert "BAD_LOG" not in vars(run_vm)
    sys.path.insert(0, os.path.join(ROOT, "tests", "native"))
    try:
        import netns
    finally:
        sys.path.pop(0)
    assert netns.kernel_log is kernel_log
    lines = ["WARNING: CPU: 1 PID: 2 at net/ipv4/tcp_cong.c:1",
             "BUG: KASAN: slab-use-after-free", "Oops: 0000 [#1] SMP",
             "refcount_t: underflow; use-after-free.",
             "divide error: 0000 [#1] PREEMPT SMP NOPTI", "Call Trace:",
             "Kernel panic - not syncing: Fatal exception",
             "general protection fault, probably for non-canonical address",
             "tcp_copa: loaded", "TCP: bpf_copa registered"]
    assert kernel_log.bad_lines(lines) == lines[:8]


def shown(value, tunable):
    return f"{value / 1000:g}" if tunable.milli else str(value)


def test_docs_show_the_tables_defaults():
    """README's and install.rst's tables of sysctls give each the table's
    default (their ranges are prose: "(0, 1], three decimals")."""
    readme = open(os.path.join(ROOT, "README.md")).read()
    rst = open(os.path.join(ROOT, "Documentation", "install.rst")).read()
    for group in ("tcp_copa", "tcp_copa_policer"):
        for name, t in params.load().tunables[group].items():
            sysctl = f"net.ipv4.{group}.{name}"
            row = re.search(rf"^\| `{re.escape(sysctl)}` \|(.*)$", readme,
                            re.M).group(1).split("|")
            assert row[1].strip() == shown(t.default, t), sysctl
            row = re.search(rf"^``{re.escape(sysctl)}``(.*)$", rst,
                            re.M).group(1).split()
            assert row[-1] == shown(t.default, t), sysctl
