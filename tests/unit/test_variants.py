# SPDX-License-Identifier: GPL-2.0
"""Variant strings: parsing into algorithm and per-netns sysctls. The
ranges are tcp_copa_params.h's; test_params.py checks that variants read
them from there."""
import pytest

from copa_tools.eval.variants import VariantError, parse_variant, parse_variants


def test_plain_algorithms():
    for name in ("cubic", "bbr", "vegas", "reno", "copa", "copa_policer"):
        v = parse_variant(name)
        assert (v.cc, v.sysctls) == (name, ())


def test_copa_parameters_become_sysctls():
    v = parse_variant("copa:delta=0.04:competitive=0")
    assert v.cc == "copa"
    assert v.sysctls == (("net.ipv4.tcp_copa.delta", "0.04"),
                         ("net.ipv4.tcp_copa.competitive", "0"))
    assert v.slug == "copa_delta-0.04_competitive-0"


def test_policer_parameters():
    v = parse_variant("copa_policer:detect=0:delta=0.2")
    assert v.sysctls == (("net.ipv4.tcp_copa_policer.detect", "0"),
                         ("net.ipv4.tcp_copa.delta", "0.2"))


@pytest.mark.parametrize("spec,needle", [
    ("foo", "unknown algorithm 'foo'"),
    ("cubic:delta=0.2", "unknown parameter 'delta=0.2' for cubic"),
    ("copa:delta=0", "delta must be"),
    ("copa:delta=1.5", "delta must be"),
    ("copa:delta=0.1234", "delta must be"),
    ("copa:competitive=2", "competitive must be 0 or 1"),
    ("copa:loss_reaction=101", "loss_reaction must be"),
    ("copa:detect=1", "unknown parameter 'detect=1' for copa"),
    ("copa:delta", "unknown parameter 'delta'"),
    ("copa:delta=0.2:delta=0.3", "delta given twice"),
])
def test_errors_name_the_culprit(spec, needle):
    with pytest.raises(VariantError, match=needle):
        parse_variant(spec)


def test_variant_lists():
    assert [v.spec for v in parse_variants("cubic, copa:delta=0.2")] == \
        ["cubic", "copa:delta=0.2"]
    with pytest.raises(VariantError, match="listed twice"):
        parse_variants(["cubic", "cubic"])
    with pytest.raises(VariantError, match="at least one"):
        parse_variants("")


@pytest.mark.parametrize("spec,needle", [
    ("copa:delta=²", "delta must be a decimal from 0.001 to 1"),
    ("copa:delta=0.0٣", "delta must be"),
    ("copa:loss_reaction=٣", "loss_reaction must be an integer from 0"),
    ("copa:delta=-0.1", "delta must be"),
    ("copa:delta= 0.1", "delta must be"),
    ("copa_policer:loss_thresh=0", "loss_thresh must be an integer from 1"),
    ("copa_policer:rate_tol=0", "rate_tol must be an integer from 1"),
    ("copa_policer:hold_rounds=256", "hold_rounds must be an integer from 1"
     " to 255"),
    ("copa_policer:hold_rounds=0", "hold_rounds must be"),
])
def test_kernel_ranges_and_ascii_digits(spec, needle):
    with pytest.raises(VariantError, match=needle):
        parse_variant(spec)


@pytest.mark.parametrize("spec", [
    "copa:delta=0.001", "copa:delta=1", "copa:delta=.5",
    "copa:loss_reaction=0", "copa:loss_reaction=100",
    "copa_policer:loss_thresh=1", "copa_policer:hold_rounds=255"])
def test_kernel_range_ends_pass(spec):
    parse_variant(spec)

