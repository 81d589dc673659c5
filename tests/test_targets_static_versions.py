"""`sglang-patches patches --against-source DIR` lists the hooks of the compat file for the SGLang found in
DIR, not the installed one's: run on either installed version against both real sources (0.5.17 in the
test venv's site-packages, 0.5.23 in its --target folder). The adaptive_graphs feature is the case that
tells them apart: 0.5.17's file declares its hook, 0.5.23's declares none (it has nothing to fix)."""
from __future__ import annotations

import subprocess
import sys

import pytest

from test_targets_static import _site_0517_source, site_0523  # noqa: F401 - site_0523 is a fixture


def _patches(site, *extra):
    return subprocess.run([sys.executable, "-m", "sglang_patches", "patches", "--patches", "all,adaptive_graphs",
                           "--against-source", site, *extra], capture_output=True, text=True, timeout=180)


def test_against_0523_lists_0523s_hooks(site_0523):  # noqa: F811
    out = _patches(site_0523)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "hooks of v0_5_23 (static check, nothing imported)" in out.stdout
    assert "BAD" not in out.stdout and "resolve_num_tokens_per_req" not in out.stdout
    assert "adaptive_graphs: nothing to do on this SGLang" in out.stdout
    assert "11/11 targets resolve in sglang 0.5.23" in out.stdout


def test_against_0517_lists_0517s_hooks():
    out = _patches(_site_0517_source())
    assert out.returncode == 0, out.stdout + out.stderr
    assert "hooks of v0_5_17 (static check, nothing imported)" in out.stdout
    assert "ok  adaptive_graphs " in out.stdout and "sglang.srt.speculative.spec_utils:resolve_num_tokens_per_req" in out.stdout
    assert "adaptive_graphs: nothing to do" not in out.stdout
    assert "12/12 targets resolve in sglang 0.5.17" in out.stdout


def test_pinned_gives_the_installed_file_back_after_the_block():
    from sglang_patches import compat

    installed = compat.current()
    other = next(m for m in compat.files() if m is not installed)
    with compat.pinned(other):
        assert compat.current() is other
    assert compat.current() is installed
    with pytest.raises(RuntimeError), compat.pinned(other):
        raise RuntimeError("a failed check")
    assert compat.current() is installed


def test_the_package_folder_itself_is_refused_with_its_parent_named(tmp_path):
    pkg = tmp_path / "site" / "sglang"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    for extra in ([], ["--contacts"]):
        out = _patches(str(pkg), *extra)
        assert out.returncode == 2 and "Traceback" not in out.stderr
        assert out.stderr.strip().endswith(f"that is the sglang package itself; pass the folder that holds it, "
                                           f"{tmp_path / 'site'}")


def test_a_feature_refusal_reads_the_pinned_version_not_the_installed_one(monkeypatch):
    """A static check against another version's source refuses draft_tp where that version's compat file
    refuses it (the installed SGLang's version would let it through)."""
    from sglang_patches import compat
    from sglang_patches.errors import PatchTargetError
    from sglang_patches.server import draft_tp

    installed = compat.current()
    other = next(m for m in compat.files() if m is not installed)
    version = other.COVERS[0]
    monkeypatch.setattr(other, "FEATURE_REFUSED_FROM", {"draft_tp": (version, "refused from {v} in this test")},
                        raising=False)
    with compat.pinned(other, version):
        assert compat.current_version() == version
        with pytest.raises(PatchTargetError, match=f"cannot run on sglang {version}: refused from {version}"):
            draft_tp.specs()
    assert compat.current_version() != version
    assert draft_tp.refusal_for(compat.current_version()) is None
