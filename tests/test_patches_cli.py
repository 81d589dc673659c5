"""`--patches` lists (parse_patch_list) and `sglang-patches patches --contacts --patches LIST`."""
from __future__ import annotations

import pytest

from sglang_patches.errors import UserError
from sglang_patches.vocab.overlay_config import FEATURES, parse_patch_list


def test_parse_patch_list():
    assert parse_patch_list("all") == FEATURES == ("marker", "timing", "checks")
    assert parse_patch_list("none") == ()
    assert parse_patch_list("all,-checks") == ("marker", "timing")
    assert parse_patch_list(" timing , timing,marker ") == ("timing", "marker")
    assert parse_patch_list("all,none,checks") == ("checks",)
    with pytest.raises(UserError, match="unknown feature 'bogus'"):
        parse_patch_list("all,bogus")
    with pytest.raises(UserError, match="unknown feature '-bogus'"):
        parse_patch_list("all,-bogus")
    assert parse_patch_list("-timing") == ("marker", "checks")  # a leading drop is from all, as all,-timing
    assert parse_patch_list("-timing,-checks") == ("marker",)
    for empty in ("", " , "):  # an unset shell variable: said, not taken as none
        with pytest.raises(UserError, match="no feature named; give all"):
            parse_patch_list(empty)


def test_patches_contacts_follow_the_patches_flag(capsys):
    """`sglang-patches patches --contacts --patches checks`: that feature's contacts and the SGLang-wide
    (core) ones, checked against the installed SGLang's files; without --patches every feature's."""
    pytest.importorskip("sglang")
    from sglang_patches import compat
    from sglang_patches.server.patches.catalog import cli_main

    assert cli_main(["--contacts", "--patches", "checks"]) == 0
    rows = [ln.split() for ln in capsys.readouterr().out.splitlines() if ln.startswith("  OK ")]
    assert {r[1] for r in rows} == {"core", "checks"}
    assert len(rows) == sum(c.feature in ("core", "checks") for c in compat.current().contacts())
    assert cli_main(["--contacts"]) == 0
    every = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("  OK ")]
    assert len(every) == len(compat.current().contacts()) > len(rows)
