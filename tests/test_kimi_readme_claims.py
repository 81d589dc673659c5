"""The Kimi-family results README quotes `advise` on its recorded GPU logs: the quoted figures must be what advise
prints on those logs today (one paragraph drifted once: it still said 1.32x after advise had moved to 1.62x)."""
from __future__ import annotations

import lzma
import re
from pathlib import Path

from sglang_patches import cli

FOLDER = Path(__file__).resolve().parent.parent / "benchmarks" / "results" / "2026-12-06-kimi-family"
VERIFY_COST = f"{FOLDER / 'llama_head' / 'verify_cost.json'}:kimi-k2-mla"


def _x_plain(capsys, tmp_path, log: str, *flags) -> dict:
    plain = tmp_path / "cycles.jsonl"
    plain.write_bytes(lzma.decompress((FOLDER / log).read_bytes()))
    assert cli.main(["advise", str(plain), *flags]) == 0
    rows = [ln.split() for ln in capsys.readouterr().out.splitlines() if re.match(r"s\d_k1_n\d ", ln)]
    return {r[0].split("_")[0]: float(r[-3]) for r in rows}  # ... x plain, break-even acc, note


def test_the_bs16_table_is_what_advise_prints(tmp_path, capsys):
    readme = (FOLDER / "README.md").read_text()
    for label, extra in (("verify held flat", []), ("verify by the measured ratios", ["--verify-cost", VERIFY_COST])):
        row = next(ln for ln in readme.splitlines() if ln.startswith(f"| {label} |"))
        quoted = [float(x) for x in row.strip("|").split("|")[1:]]
        got = _x_plain(capsys, tmp_path, "llama_head/advise-bs16/cycles.jsonl.xz",
                       "--baseline-step-ms", "1:4.09045,4:5.75085,16:6.2631", *extra)
        assert [got[f"s{i}"] for i in range(1, 6)] == quoted, (label, got)


def test_the_bs1_8_line_is_what_advise_prints(tmp_path, capsys):
    text = " ".join((FOLDER / "README.md").read_text().split())
    assert "keeps steps 3 at 1.62x plain" in text and "steps 1 moves from 1.32x to 1.40x and steps 2 from 1.56x to 1.60x" in text
    flat = _x_plain(capsys, tmp_path, "llama_head/cycles.jsonl.xz", "--baseline-step-ms", "4.09")
    priced = _x_plain(capsys, tmp_path, "llama_head/cycles.jsonl.xz", "--baseline-step-ms", "4.09", "--verify-cost", VERIFY_COST)
    assert (flat["s3"], priced["s3"]) == (1.62, 1.62)
    assert (flat["s1"], priced["s1"], flat["s2"], priced["s2"]) == (1.32, 1.40, 1.56, 1.60)
