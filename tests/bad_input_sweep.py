"""Bad-input cases for `sglang-patches sweep`: output/input clashes, --replay, --merge, --resume and
--report-only on bad sweep directories and rows, bad flag values and prompt files, and bad
--simulate-acceptance rates. Builders and the Case type: bad_input_corpus.py; run by
tests/test_bad_input_corpus.py."""
from __future__ import annotations

import json

from bad_input_corpus import DEEP, GOOD_ROWS, MANIFEST, Cases, _w, models_only, regular_file, row, sweep_dir

CASES = Cases()
cli = CASES.cli

# --- sweep -------------------------------------------------------------------------------------
SW = ["sweep", "--model-path", "{d}/target", "--speculative-draft-model-path", "{d}/draft"]
cli("sweep-no-out", ["sweep"], "--out DIR is required")
cli("sweep-unknown-flag", ["sweep", "--bogus"], "unrecognized arguments")
cli("sweep-replay-out-same-force", ["sweep", "--search", "--replay", "{d}/g", "--out", "{d}/g", "--force"],
    "is also the input --replay", lambda d: sweep_dir(d, "g", GOOD_ROWS, plan={"configs": []}))
cli("sweep-replay-out-same-slash", ["sweep", "--search", "--replay", "{d}/g", "--out", "{d}/g/", "--force"],
    "is also the input --replay", lambda d: sweep_dir(d, "g", GOOD_ROWS))
cli("sweep-merge-out-same", ["sweep", "--merge", "{d}/a", "{d}/b", "--out", "{d}/b", "--force"],
    "is also the input --merge", lambda d: (sweep_dir(d, "a", GOOD_ROWS), sweep_dir(d, "b", GOOD_ROWS)) and None)
cli("sweep-prompts-is-out", SW + ["--prompts", "{d}/p.txt", "--out", "{d}/p.txt"], "is also the input --prompts",
    lambda d: (models_only(d), _w(d / "p.txt", "hello\n")) and None)
cli("sweep-out-is-model", SW + ["--out", "{d}/target"], "is also the input --model-path", models_only)
cli("sweep-replay-needs-search", ["sweep", "--replay", "{d}/g", "--out", "{d}/o"], "needs --search",
    lambda d: sweep_dir(d, "g", GOOD_ROWS))
cli("sweep-replay-missing", ["sweep", "--search", "--replay", "{d}/g", "--out", "{d}/o"], "no such directory")
cli("sweep-replay-no-manifest", ["sweep", "--search", "--replay", "{d}/g", "--out", "{d}/o"], "sweep.json missing",
    lambda d: sweep_dir(d, "g", GOOD_ROWS, manifest=None))
cli("sweep-replay-null-manifest", ["sweep", "--search", "--replay", "{d}/g", "--out", "{d}/o"],
    "not a sweep manifest", lambda d: sweep_dir(d, "g", GOOD_ROWS, manifest="null"))
cli("sweep-replay-results-dir", ["sweep", "--search", "--replay", "{d}/g", "--out", "{d}/o"], "is not a file",
    lambda d: (sweep_dir(d, "g", None), (d / "g" / "results.jsonl").mkdir()) and None)
cli("sweep-no-gpu", SW + ["--out", "{d}/o", "--steps", "1", "--topk", "1", "--batch-sizes", "1"], "no CUDA GPU",
    models_only)  # said once, before --out exists, instead of every row failing
cli("sweep-fixture-no-gpu", ["sweep", "--fixture", "tiny", "--out", "{d}/o", "--steps", "1", "--topk", "1",
                            "--batch-sizes", "1"], "no CUDA GPU")  # before the fixture cache is built
cli("sweep-merge-same-shard-twice", ["sweep", "--merge", "{d}/a", "{d}/a", "--out", "{d}/m"], "given twice",
    lambda d: sweep_dir(d, "a", GOOD_ROWS))
cli("sweep-merge-dry-run", ["sweep", "--merge", "{d}/a", "{d}/b", "--out", "{d}/m", "--dry-run"], "drop one of them",
    lambda d: (sweep_dir(d, "a", GOOD_ROWS), sweep_dir(d, "b", GOOD_ROWS)) and None)
cli("sweep-replay-grid-lacks-configs", ["sweep", "--search", "--replay", "{d}/g", "--out", "{d}/o"], "has no row for",
    lambda d: sweep_dir(d, "g", GOOD_ROWS))  # refused before --out exists, so a retry is not blocked
cli("sweep-replay-no-rows", ["sweep", "--search", "--replay", "{d}/g", "--out", "{d}/o"], "no rows",
    lambda d: sweep_dir(d, "g", []))
BAD_ROWS = {
    "batch-size-string": row(bs="8"), "batch-size-zero": row(bs=0), "batch-size-bool": row(bs=True),
    "ok-without-tok-s": {k: v for k, v in row().items() if k != "tok_s"}, "tok-s-nan": row(tok_s="NaN"),
    "tok-s-negative": row(tok_s=-5.0), "tok-s-string": row(tok_s="fast"), "status-bogus": row(status="done"),
    "config-missing": {k: v for k, v in row().items() if k != "config"}, "config-number": row(config=5),
    "spec-list": row("s1_k1_n2", spec=[1, 1, 2]), "spec-zero-steps": row("s1_k1_n2", spec={"steps": 0, "topk": 1, "draft_tokens": 2}),
    "spec-missing-on-config": row("s1_k1_n2", spec=None), "baseline-with-spec": row(spec={"steps": 1, "topk": 1, "draft_tokens": 2}),
    "phases-string": row("s1_k1_n2", phases_p50_ms={"draft": "1"}), "pos-rates-dict": row("s1_k1_n2", pos_rates={"a": 1}),
    "repeats-nan": row(tok_s_repeats=["NaN"]), "accept-length-string": row("s1_k1_n2", accept_length="1.5"),
    "reason-number": row(status="failed", reason=3), "row-is-list": [1, 2], "row-is-null": None,
}


def _row_text(r) -> str:
    t = json.dumps(r)
    return t.replace('"NaN"', "NaN")


for bad_name, bad_row in BAD_ROWS.items():
    rows = [json.dumps(row()), _row_text(bad_row)]
    cli(f"sweep-replay-row-{bad_name}", ["sweep", "--search", "--replay", "{d}/g", "--out", "{d}/o"], "results.jsonl:2",
        lambda d, rows=rows: sweep_dir(d, "g", rows))
for bad_name in ("batch-size-string", "ok-without-tok-s", "row-is-null", "tok-s-nan", "spec-list"):
    rows = [json.dumps(row()), _row_text(BAD_ROWS[bad_name])]
    cli(f"sweep-report-only-row-{bad_name}", ["sweep", "--report-only", "--out", "{d}/g"], "results.jsonl:2",
        lambda d, rows=rows: sweep_dir(d, "g", rows))
    cli(f"sweep-merge-row-{bad_name}", ["sweep", "--merge", "{d}/a", "{d}/b", "--out", "{d}/o"], "results.jsonl:2",
        lambda d, rows=rows: (sweep_dir(d, "a", GOOD_ROWS), sweep_dir(d, "b", rows)) and None)
    cli(f"sweep-resume-row-{bad_name}", SW + ["--resume", "--out", "{d}/g"], "results.jsonl:2",
        lambda d, rows=rows: (models_only(d), sweep_dir(d, "g", rows, manifest={"batch_sizes": [1]})) and None)
cli("sweep-report-only-missing", ["sweep", "--report-only", "--out", "{d}/g"], "missing or holds no rows")
cli("sweep-report-only-results-dir", ["sweep", "--report-only", "--out", "{d}/g"], "is not a file",
    lambda d: (sweep_dir(d, "g", None), (d / "g" / "results.jsonl").mkdir()) and None)
cli("sweep-report-only-plan-list", ["sweep", "--report-only", "--out", "{d}/g"], "plan.json is not a sweep plan",
    lambda d: sweep_dir(d, "g", GOOD_ROWS, plan=[1]))
cli("sweep-report-only-search-garbage", ["sweep", "--report-only", "--out", "{d}/g"], "unexpected content",
    lambda d: sweep_dir(d, "g", GOOD_ROWS, search={"compare": [{"config": "x"}]}))
cli("sweep-report-only-plan-skipped-bad", ["sweep", "--report-only", "--out", "{d}/g"], "unexpected content",
    lambda d: sweep_dir(d, "g", GOOD_ROWS, plan={"skipped": [5]}))
cli("sweep-merge-one-dir", ["sweep", "--merge", "{d}/a", "--out", "{d}/o"], "at least two",
    lambda d: sweep_dir(d, "a", GOOD_ROWS))
cli("sweep-merge-missing-dir", ["sweep", "--merge", "{d}/a", "{d}/nope", "--out", "{d}/o"], "no such directory",
    lambda d: sweep_dir(d, "a", GOOD_ROWS))
cli("sweep-merge-null-manifest", ["sweep", "--merge", "{d}/a", "{d}/b", "--out", "{d}/o"], "not a sweep manifest",
    lambda d: (sweep_dir(d, "a", GOOD_ROWS), sweep_dir(d, "b", GOOD_ROWS, manifest="null")) and None)
cli("sweep-merge-manifest-batch-sizes", ["sweep", "--merge", "{d}/a", "{d}/b", "--out", "{d}/o"], "batch_sizes",
    lambda d: (sweep_dir(d, "a", GOOD_ROWS), sweep_dir(d, "b", GOOD_ROWS, manifest={**MANIFEST, "batch_sizes": "1"})) and None)
cli("sweep-merge-other-settings", ["sweep", "--merge", "{d}/a", "{d}/b", "--out", "{d}/o"], "other settings",
    lambda d: (sweep_dir(d, "a", GOOD_ROWS), sweep_dir(d, "b", GOOD_ROWS, manifest={**MANIFEST, "target": "u"})) and None)
cli("sweep-merge-plan-list", ["sweep", "--merge", "{d}/a", "{d}/b", "--out", "{d}/o"], "not a sweep plan",
    lambda d: (sweep_dir(d, "a", GOOD_ROWS, plan=[]), sweep_dir(d, "b", GOOD_ROWS)) and None)
cli("sweep-resume-null-manifest", SW + ["--resume", "--out", "{d}/g"], "not a sweep manifest",
    lambda d: (models_only(d), sweep_dir(d, "g", GOOD_ROWS, manifest="null")) and None)
cli("sweep-resume-other-settings", SW + ["--resume", "--out", "{d}/g"], "other settings",
    lambda d: (models_only(d), sweep_dir(d, "g", GOOD_ROWS, manifest={"max_new_tokens": 1})) and None)
cli("sweep-exists-without-resume", SW + ["--out", "{d}/g"], "already holds a sweep",
    lambda d: (models_only(d), sweep_dir(d, "g", GOOD_ROWS)) and None)
cli("sweep-resume-and-force", SW + ["--out", "{d}/g", "--resume", "--force"], "contradict",
    lambda d: (models_only(d), sweep_dir(d, "g", GOOD_ROWS)) and None)
cli("sweep-out-is-file", SW + ["--out", "{d}/file"], "is not a directory",
    lambda d: (models_only(d), regular_file(d)) and None)
cli("sweep-results-is-dir", SW + ["--out", "{d}/g"], "is not a file",
    lambda d: (models_only(d), (d / "g" / "results.jsonl").mkdir(parents=True)) and None)
for flag, value, why in (("--shard", "1/0", "expected I/N"), ("--shard", "a/b", "expected I/N"),
                         ("--shard", "3/2", "expected I/N"), ("--steps", "a", "is not an integer"),
                         ("--steps", "0", "below 1"), ("--topk", "-1", "below 1"), ("--batch-sizes", ",", "is empty"),
                         ("--draft-tokens", "1e3", "is not an integer"), ("--max-new-tokens", "0", "at least 1"),
                         ("--repeats", "0", "at least 1"), ("--requests-per-batch", "-2", "at least 1"),
                         ("--search-top", "0", "at least 1"), ("--search-budget", "0", "at least 1"),
                         ("--timeout-per-config", "nan", "not a finite number"),
                         ("--timeout-per-config", "inf", "not a finite number"),
                         ("--timeout-per-config", "0", "must be > 0"),
                         ("--simulate-acc-len", "nan", "not a finite number"), ("--simulate-acc-len", "-1", "must be > 0"),
                         ("--steps", "1,,2", "an empty item"),
                         ("--profile-seconds", "-1", "must be >= 0"), ("--profile-seconds", "NaN", "not a finite number"),
                         ("--env", "NOEQUALS", "expected KEY=VALUE"), ("--env", "=v", "expected KEY=VALUE"),
                         ("--extra-server-args", "--port 1", "must not contain --port"),
                         ("--extra-server-args", "'unterminated", "quote it"),
                         ("--prompts", "{d}/nope.txt", "no such file"),
                         ("--prompts", "{d}", "not a regular file")):
    cli(f"sweep-flag{flag}-{value}"[:60], SW + [flag, value, "--out", "{d}/o"], why, models_only)
cli("sweep-fixture-unknown", ["sweep", "--fixture", "nope", "--out", "{d}/o"], "unknown fixture")
cli("sweep-fixture-and-model", SW + ["--fixture", "tiny", "--out", "{d}/o"], "not both", models_only)
cli("sweep-model-missing", SW + ["--out", "{d}/o"], "no such directory")
cli("sweep-model-no-config", SW + ["--out", "{d}/o"], "has no config.json",
    lambda d: ((d / "target").mkdir(), (d / "draft").mkdir()) and None)
for pname, pdata, why in (("binary", b"a\x00b\n", "looks binary"), ("not-utf8", b"\xff\xfe prompt\n", "not UTF-8"),
                          ("bad-json-line", '{"prompt": "a"}\n{nope\n', "line 2 is not valid JSON"),
                          ("deep-json-line", '{"prompt": "a"}\n' + DEEP + "\n", "nested too deeply"),
                          ("no-prompt-field", '{"x": 1}\n', "no string"), ("empty", "\n\n", "holds no prompts")):
    cli(f"sweep-prompts-{pname}", SW + ["--prompts", "{d}/p.jsonl", "--out", "{d}/o"], why,
        lambda d, pdata=pdata: (models_only(d), _w(d / "p.jsonl", pdata)) and None)
# --simulate-acceptance rates (the launcher's are in bad_input_launch.py)
cli("sweep-simulate-acceptance-nan", SW + ["--simulate-acceptance", "nan", "--out", "{d}/o"], "finite", models_only)
cli("sweep-simulate-acceptance-big", SW + ["--simulate-acceptance", "2", "--out", "{d}/o"], "outside [0, 1]", models_only)
