# SPDX-License-Identifier: GPL-2.0
"""Household profiles: parsing, unit conversion, groups and sampling."""
import os

import pytest

from copa_tools.eval import households as hh

FIXTURE = os.path.join(os.path.dirname(__file__), "fixtures",
                       "households.csv")
SHIPPED = os.path.join(os.path.dirname(__file__), "..", "..", "data",
                       "digitaldivide", "household-internet-data.csv")


def test_unit_conversion():
    assert hh.bytes_per_s_to_mbit(1_250_000) == 10.0
    assert hh.us_to_ms(30422) == pytest.approx(30.422)


def test_price_group_boundaries():
    assert hh.price_group(14.99) == "$0-30"
    assert hh.price_group(30) == "$30-40"
    assert hh.price_group(39.99) == "$30-40"
    assert hh.price_group(40) == "$40-50"
    assert hh.price_group(50) == "$50+"
    assert hh.price_group(None) is None


def test_load_converts_units_and_keeps_last_row():
    table = hh.load(FIXTURE)
    h = table["735"]
    assert (h.down_mbit, h.up_mbit, h.rtt_ms) == (10.0, 1.0, 30.422)
    assert h.group == "$0-30"
    # unit 475 appears twice: the later row wins
    assert table["475"].down_mbit == 20.0
    assert table["475"].monthly_charge == 45
    # a missing rate drops the row; a missing charge only loses the group
    assert "901" not in table
    assert table["902"].group is None


def test_link_profile_directions_and_cap():
    h = hh.load(FIXTURE)["900"]          # 200 Mbit/s down, 100 up, 5 ms
    down = hh.link_profile(h, "down", 2, 50)
    assert down == {"rate_mbit": 50, "up_rate_mbit": 50, "rtt_ms": 5.0,
                    "buffer_bdp": 2}
    small = hh.load(FIXTURE)["735"]
    assert hh.link_profile(small, "up", 2, 50)["rate_mbit"] == 1.0
    assert hh.link_profile(small, "up", 2, 50)["up_rate_mbit"] == 10.0
    with pytest.raises(hh.HouseholdError, match="directions"):
        hh.link_profile(small, "sideways", 2, 50)


def test_select_units_names_the_missing_id():
    table = hh.load(FIXTURE)
    assert [h.unit_id for h in hh.select_units(table, [735, "475"])] == \
        ["735", "475"]
    with pytest.raises(hh.HouseholdError, match="12345"):
        hh.select_units(table, [12345])


def test_sampling_per_group_is_reproducible():
    table = hh.load(FIXTURE)
    first = hh.sample_per_group(table, 1, seed=3)
    assert [h.group for h in first] == [g for g, _, _ in hh.PRICE_GROUPS]
    assert first == hh.sample_per_group(table, 1, seed=3)
    with pytest.raises(hh.HouseholdError, match="only"):
        hh.sample_per_group(table, 5, seed=3)


def test_missing_column_is_reported(tmp_path):
    bad = tmp_path / "bad.csv"
    bad.write_text("unit_id,medianDown\n1,2\n")
    with pytest.raises(hh.HouseholdError, match="medianLatency"):
        hh.load(str(bad))


def test_shipped_dataset():
    table = hh.load(SHIPPED)
    assert 6000 < len(table) < 8119          # duplicates collapsed
    groups = {h.group for h in table.values()}
    assert {g for g, _, _ in hh.PRICE_GROUPS} <= groups
    assert all(h.rtt_ms > 0 and h.down_mbit > 0 for h in table.values())


def test_sampling_only_the_chosen_groups():
    table = hh.load(FIXTURE)
    cheap = hh.sample_per_group(table, 1, seed=3,
                                groups=["$30-40", "$0-30"])
    # in PRICE_GROUPS order, whatever the order asked for
    assert [h.unit_id for h in cheap] == ["735", "904"]
    assert [h.group for h in cheap] == ["$0-30", "$30-40"]


def test_a_groups_draw_does_not_depend_on_the_other_groups():
    table = hh.load(FIXTURE)
    every = hh.sample_per_group(table, 1, seed=11)
    alone = hh.sample_per_group(table, 1, seed=11, groups=["$50+"])
    assert alone == [h for h in every if h.group == "$50+"]


def test_sampling_rejects_an_unknown_group():
    with pytest.raises(hh.HouseholdError, match="unknown price group "
                       "'cheap'"):
        hh.sample_per_group(hh.load(FIXTURE), 1, seed=1, groups=["cheap"])


def test_cheap_groups_of_the_shipped_dataset_are_reproducible():
    table = hh.load(SHIPPED)
    a = hh.sample_per_group(table, 3, 1, ["$0-30", "$30-40"])
    assert a == hh.sample_per_group(table, 3, 1, ["$0-30", "$30-40"])
    assert [h.group for h in a] == ["$0-30"] * 3 + ["$30-40"] * 3
    assert len({h.unit_id for h in a}) == 6
