# SPDX-License-Identifier: GPL-2.0
"""copa_tools.mechanisms: the COPA_MECH_* defines, read from the header."""

import pytest
from copa_tools import mechanisms


def test_shipped_header_lists_the_mechanisms():
    found = mechanisms.load()
    assert [m.name for m in found][:2] == ["loss class", "rate limit"]
    assert all(m.what for m in found)


@pytest.mark.parametrize("defines", [
    "",
    "#define COPA_MECH_A 0x01 /* a */\n#define COPA_MECH_B 0x01 /* b */\n",
    "#define COPA_MECH_A 0x03 /* a and b */\n",
])
def test_bad_header_is_refused(tmp_path, defines):
    path = tmp_path / "h.h"
    path.write_text(defines)
    with pytest.raises(ValueError):
        mechanisms.load(str(path))
