"""One verdict, the same everywhere: `report`, `advise`, `advise --adaptive-config` and /spec_timing's
advice (summary_advice, what the endpoint serves, over the same records in the server's own rolling
stats) lead with the same lines for the same log: a healthy drafter, one that accepts little (accept
length about 1.4 at steps 5) and one that accepts nothing. Then report's baselines, the plain step
priced per batch size, the adaptive config never below SGLang's default, and the new flags' bad input."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import advisor_logs as al
from sglang_patches import cli
from sglang_patches.vocab.schema import make_record
from sglang_patches.vocab.stats import WindowStats
from sglang_patches.whatif.live_advice import summary_advice
from sglang_patches.whatif.baseline_price import ONE_FILE, price
from sglang_patches.whatif.verdict import MAX_LINES, MAX_WIDTH, low_acceptance

ROOT = Path(__file__).resolve().parents[1]


def logs(tmp_path) -> dict[str, Path]:
    healthy, low = tmp_path / "healthy.jsonl", tmp_path / "low.jsonl"
    al.chain_log(healthy, 5, [0.75], 400, seed=1)
    al.chain_log(low, 5, [0.28, 0.45], 400, seed=2)
    nothing = al.write_records(tmp_path / "nothing.jsonl", al.records_from_accepted(
        [1 if i % 50 == 0 else 0 for i in range(400)], bs=1, steps=5))
    return {"healthy": healthy, "low": low, "nothing": nothing}


def run(capsys, *args) -> tuple[int, str]:
    try:
        code = cli.main([*map(str, args)])
    except SystemExit as exc:
        code = exc.code
    return code, capsys.readouterr().out


def spec_timing_verdict(path: Path) -> list[str]:
    records = [json.loads(ln) for ln in path.read_text().splitlines()]
    summary = WindowStats(ring=4096).add_many(records).summary()
    r = records[0]
    return summary_advice(summary, (r["steps"], r["topk"], r["draft_tokens"]))["verdict_lines"]


def test_the_four_answers_lead_with_the_same_verdict(tmp_path, capsys):
    for name, log in logs(tmp_path).items():
        _, rep = run(capsys, "report", log, "--json")
        _, adv = run(capsys, "advise", log, "--json")
        out = tmp_path / f"{name}.adaptive.json"
        code, ac = run(capsys, "advise", log, "--adaptive-config", out, "--json")
        assert code == (1 if name == "nothing" else 0)
        verdicts = [json.loads(rep)["advice"]["verdict_lines"], json.loads(adv)["advice"]["verdict_lines"],
                    json.loads(ac)["verdict_lines"], spec_timing_verdict(log)]
        assert all(v == verdicts[0] for v in verdicts), (name, verdicts)
        head = verdicts[0]
        assert 1 <= len(head) <= MAX_LINES and all(len(ln) <= MAX_WIDTH for ln in head)
        # the text answers print those lines first
        _, rep_text = run(capsys, "report", log)
        _, adv_text = run(capsys, "advise", log)
        assert rep_text.splitlines()[:len(head)] == head and adv_text.splitlines()[:len(head)] == head, name
        _, ac_text = run(capsys, "advise", log, "--adaptive-config", tmp_path / f"{name}.text.json")
        assert ac_text.splitlines()[:len(head)] == head, name  # --adaptive-config's own answer follows it
        if name != "nothing":  # one chain in every logged bucket (batch 1 only): said right after the verdict
            assert ac_text.splitlines()[len(head)].startswith("no gain over a fixed server at steps ")
        if name == "nothing":
            assert head[0].startswith("the drafter accepts nothing: accept length 1.02 at steps 5")
        elif name == "low":
            assert head[0].startswith("the drafter accepts little: first draft kept ")
            assert "(EAGLE-3 heads: 60-80 %)" in head[0] and head[1].startswith("likely causes: traffic unlike")
            assert head[2].startswith("for steps:") and head[3].startswith("no plain decode baseline")
            lines = json.loads(adv)["advice"]["lines"]
            causes = [ln for ln in lines if ln.startswith("low acceptance, cause")]
            assert len(causes) == 4 and "1.4M" in causes[3] and "preflight" in causes[1] and "preflight" in causes[2]
        else:
            assert head[0].startswith("the drafter accepts well: accept length")
            assert not json.loads(adv)["advice"]["drafter_accepts_little"]


def test_low_acceptance_rule():
    assert low_acceptance(1.46, 5, [0.30, 0.1, 0.04, 0.01, 0.01])["first_draft_rate"] == 0.30
    assert low_acceptance(3.2, 5, [0.75, 0.6, 0.4, 0.3, 0.2]) is None
    # first draft above half but the chain far below a 0.5-per-draft chain (1.97 at steps 5)
    assert low_acceptance(1.8, 5, [0.55, 0.15, 0.05, 0.03, 0.02]) is not None
    assert low_acceptance(1.05, 5, [0.05, 0, 0, 0, 0]) is None  # accepts nothing: that verdict wins


def test_report_takes_advises_baselines_and_says_x_plain_decode(tmp_path, capsys):
    log = logs(tmp_path)["low"]
    _, rep = run(capsys, "report", log, "--json", "--baseline-step-ms", "4.5")
    _, adv = run(capsys, "advise", log, "--json", "--baseline-step-ms", "4.5")
    r, a = json.loads(rep)["advice"], json.loads(adv)["advice"]
    assert r["verdict_lines"] == a["verdict_lines"] and r["baseline"] and r["speculate"] == a["speculate"]
    assert "x plain decode" in r["verdict_lines"][-1]
    assert r["verdict_lines"][-1].startswith("speculate: " if r["speculate"] else "don't speculate: ")
    assert r["plain_steps_used"] == [{"bs": 1, "ms": 4.5, "how": "--baseline-step-ms, given for every batch size"}]
    png = tmp_path / "low.png"
    code, _ = run(capsys, "report", log, "--baseline-step-ms", "4.5", "--png", png)
    assert code == 0 and png.stat().st_size > 10_000


def plain_records(bs_ms: dict, start: int) -> list[dict]:
    return [make_record(cycle=start + i, t=1.8e9 + i, rank=0, kind="decode", bs=bs, steps=0, topk=0, draft_tokens=0,
                        accepted=[], draft_ms=None, verify_ms=None, extend_ms=None, cycle_ms=ms, host_gap_ms=0.1,
                        gpu_gap_ms=0.0) for i, (bs, ms) in enumerate((b, m) for b, m in bs_ms.items() for _ in range(20))]


def test_a_baseline_at_another_batch_size_is_interpolated_or_refused(tmp_path, capsys):
    assert price({1: 4.0, 4: 7.0}, [1, 2, 8]) == ({1: 4.0, 2: 5.0}, [
        {"bs": 1, "ms": 4.0, "how": "measured"},
        {"bs": 2, "ms": 5.0, "how": "interpolated between batch 1 and 4"},
        {"bs": 8, "ms": None, "measured_at": "1-4",
         "how": "refused: the baseline was measured at batch 1-4 only, give a plain step measured at batch 8 "
                f"({ONE_FILE})"}])
    chain = al.records_from_accepted([3, 2, 0, 1] * 100, bs=2, steps=3)
    # a plain server's steps at batch 8 only: not the batch-2 step, so no ratio at all
    far = al.write_records(tmp_path / "far.jsonl", chain + plain_records({8: 5.0}, len(chain)))
    _, out = run(capsys, "advise", far, "--json")
    d = json.loads(out)
    assert d["baseline"] is None and d["advice"]["verdict_lines"][-1].startswith("no plain decode baseline")
    # batch 1 and 4 around the logged 2: interpolated, and said with the step used
    near = al.write_records(tmp_path / "near.jsonl", chain + plain_records({1: 4.0, 4: 7.0}, len(chain)))
    _, out = run(capsys, "report", near)
    assert "plain decode step used: batch 2: 5.00 ms (interpolated between batch 1 and 4)" in out
    # logged at batch 2 and 8, the baseline around 2 only: the ratio covers batch 2, and the verdict says so
    both = chain + al.records_from_accepted([3, 2, 0, 1] * 100, bs=8, steps=3, start_cycle=len(chain))
    part = al.write_records(tmp_path / "part.jsonl", both + plain_records({1: 4.0, 4: 7.0}, len(both)))
    _, out = run(capsys, "advise", part, "--json")
    head = json.loads(out)["advice"]["verdict_lines"]
    assert head[1].endswith("x plain decode; no baseline at batch 8 (20 % of cycles)") and len(head[1]) <= MAX_WIDTH
    _, out = run(capsys, "advise", part)
    used = [ln for ln in out.splitlines() if ln.startswith("plain decode step used: ")]
    assert used == ["plain decode step used: batch 2: 5.00 ms (interpolated between batch 1 and 4), "
                    "batch 8: none (refused: the baseline was measured at batch 1-4 only, give a plain step "
                    f"measured at batch 8 ({ONE_FILE}))"]
    assert out.splitlines()[:len(head)] == head
    # --adaptive-config and report print the same verdict and the same steps
    for argv in (["advise", part, "--adaptive-config", tmp_path / "part.adaptive.json"], ["report", part]):
        _, out = run(capsys, *argv)
        assert out.splitlines()[:len(head)] == head
        assert [ln.removeprefix("advice: ") for ln in out.splitlines() if "plain decode step used: " in ln] == used


def test_adaptive_config_never_below_sglangs_default_and_says_a_fixed_server_does_as_well(tmp_path, capsys):
    log = logs(tmp_path)["healthy"]
    code, out = run(capsys, "advise", log, "--adaptive-config", tmp_path / "a.json")
    lines = out.splitlines()
    assert code == 0 and "no gain over a fixed server at steps 5" in lines[2]
    assert "--speculative-adaptive" not in lines[-1] and "a fixed server at steps 5 does as well" in lines[-1]
    assert len(lines[2]) <= MAX_WIDTH and ("--speculative-num-steps 5 --speculative-eagle-topk 1 "
                                           "--speculative-num-draft-tokens 6;") in lines[-1]
    # only steps 1 allowed: [1] prices below SGLang's default on these cycles, so the default is written
    code, out = run(capsys, "advise", log, "--adaptive-config", tmp_path / "b.json", "--steps", "1", "--json")
    d = json.loads(out)
    b1 = next(b for b in d["config"]["sglang_patches"]["buckets"] if b["bucket"] == 1)
    assert b1.get("default_written") and d["config"]["1"]["candidate_steps"] == b1["default_slot_replay"]["candidate_steps"]
    from sglang_patches import compat

    default = list(compat.current().ADAPTIVE_DEFAULTS["1"]["candidate_steps"])  # [1, 3, 7] in 0.5.17, [1, 3, 5, 7] in 0.5.23
    assert b1["why"].startswith(f"SGLang's default {default} written: the chosen [1] was predicted 0.")


def test_adaptive_config_serves_the_chain_the_verdict_names(tmp_path, capsys):
    """A low-acceptance steps-5 log with a batch-1 baseline: the verdict names a short chain (s3), while the
    file's one chain is the longest within 3 % of the best (s4); the fixed server said after the verdict and
    the closing flags are the verdict's chain, the file's priced against it. Without a baseline the output
    says "no plain decode baseline" once (the verdict's line)."""
    log = tmp_path / "low.jsonl"
    al.chain_log(log, 5, [0.2, 0.3], 400, seed=1)
    code, out = run(capsys, "advise", log, "--adaptive-config", tmp_path / "a.json", "--baseline-step-ms", "5.0")
    lines = out.splitlines()
    head = [ln for ln in lines[:4] if ln.startswith("speculate: ")]
    assert code == 0 and head and head[0].startswith("speculate: switch to s3_k1_n4, predicted at ")  # logged at steps 5, lines[:5]
    cfg = json.loads((tmp_path / "a.json").read_text())
    assert cfg["1"]["candidate_steps"] == [4]  # the case under test: the file's chain is another one
    fixed = lines[lines.index(head[0]) + 1]
    assert fixed.startswith("no gain over a fixed server at steps 3: each logged bucket runs s4 alone (-"), fixed
    assert fixed.endswith(" % predicted); serve s3 (flags: last line)") and len(fixed) <= MAX_WIDTH
    assert ("--speculative-num-steps 3 --speculative-eagle-topk 1 --speculative-num-draft-tokens 4;" in lines[-1]
            and "at steps 3 does as well" in lines[-1])
    code, out = run(capsys, "advise", log, "--adaptive-config", tmp_path / "b.json", "--json", "--baseline-step-ms", "5")
    assert json.loads(out)["fixed_steps"] == 3
    code, out = run(capsys, "advise", logs(tmp_path)["low"], "--adaptive-config", tmp_path / "c.json")
    assert code == 0 and out.count("no plain decode baseline") == 1, out


@pytest.mark.parametrize("flags, needle", [
    (["--baseline-step-ms", "-1"], "--baseline-step-ms must be a positive number"),
    (["--baseline-step-ms", "nan"], "--baseline-step-ms"),
    (["--baseline-log", "{d}/nope.log"], "--baseline-log"),
    (["--calibration", "{d}/nodir"], "--calibration"),
    (["--calibration-tolerance", "1"], "--calibration-tolerance must be > 1"),
    (["--baseline-step-ms", "4", "--baseline-log", "{d}/x.log"], "not allowed with argument"),
])
def test_reports_baseline_flags_refuse_bad_input_in_one_line(tmp_path, flags, needle):
    log = al.write_records(tmp_path / "l.jsonl", al.records_from_accepted([2] * 50, bs=1, steps=3))
    before = log.read_bytes()
    argv = [sys.executable, "-m", "sglang_patches", "report", str(log),
            *[f.replace("{d}", str(tmp_path)) for f in flags]]
    p = subprocess.run(argv, capture_output=True, text=True, cwd=ROOT, timeout=120)
    err = p.stderr.strip().splitlines()
    assert p.returncode != 0 and len(err) == 1 and needle in err[0], p.stderr
    assert "Traceback" not in p.stderr and log.read_bytes() == before


def test_report_says_when_the_baseline_given_prices_none_of_the_logged_batch_sizes(tmp_path, capsys):
    """A plain server's log at batch 8 only, for a batch-1 log: report refuses it as advise does, and says
    so in its advice (text, JSON), not only by leading with 'no plain decode baseline'."""
    log = logs(tmp_path)["healthy"]
    base = tmp_path / "plain8.log"
    base.write_text("[2026-12-05 05:31:00] Decode batch, #running-req: 8, #token: 90, token usage: 0.00, "
                    "cuda graph: True, gen throughput (token/s): 1600.00, #queue-req: 0,\n" * 5)
    _, out = run(capsys, "report", log, "--baseline-log", base, "--json")
    d = json.loads(out)["advice"]
    assert not d["baseline"]
    said = [ln for ln in d["lines"] if ln.startswith("note: baseline log ")]
    assert said == [f"note: baseline log {base} refused: it was measured at batch 8, none at or around the logged ones"]
    _, text = run(capsys, "report", log, "--baseline-log", base)
    assert f"advice: {said[0]}" in text.splitlines()
    # a baseline that prices the logged batch size: no such note
    _, out = run(capsys, "report", log, "--baseline-step-ms", "4.5", "--json")
    assert not [ln for ln in json.loads(out)["advice"]["lines"] if ln.startswith("note: ")]


def plain_server_log(path: Path, running: int) -> Path:
    """A plain server's SGLang log: steady 'Decode batch' lines at `running` requests."""
    path.write_text(f"[2026-12-05 05:31:00] Decode batch, #running-req: {running}, #token: 90, token usage: 0.00, "
                    "cuda graph: True, gen throughput (token/s): 1600.00, #queue-req: 0,\n" * 5)
    return path


def test_a_baseline_given_at_another_batch_size_is_named_in_the_verdict_and_the_step_used(tmp_path, capsys):
    """A batch-1 log with --baseline-log of a plain server at batch 8: every answer says the baseline given
    was measured at batch 8 (not "give --baseline-log", which the user just did), and prints the refusal
    as the plain decode step used at batch 1."""
    log, base = logs(tmp_path)["low"], plain_server_log(tmp_path / "plain8.log", 8)
    verdict = "no plain decode baseline at batch 1: the one given was measured at batch 8; cannot tell whether to speculate"
    step_used = ("plain decode step used: batch 1: none (refused: the baseline was measured at batch 8 only, "
                 "give a plain step measured at batch 1 "
                 f"({ONE_FILE}))")
    heads = []
    for argv in (["report", log, "--json"], ["advise", log, "--json"],
                 ["advise", log, "--adaptive-config", tmp_path / "a.json", "--json"]):
        code, out = run(capsys, *argv, "--baseline-log", base)
        d = json.loads(out)
        heads.append((d.get("advice") or d)["verdict_lines"])
        assert code == 0 and heads[-1][-1] == verdict, (argv, heads[-1])
        assert (d.get("advice") or d)["speculate"] is None, argv  # nothing says whether to speculate
    assert heads[0] == heads[1] == heads[2]
    for argv in (["report", log], ["advise", log], ["advise", log, "--adaptive-config", tmp_path / "b.json"]):
        _, out = run(capsys, *argv, "--baseline-log", base)
        lines = out.splitlines()
        assert lines[:len(heads[0])] == heads[0], argv
        assert [ln.removeprefix("advice: ") for ln in lines if "plain decode step used: " in ln] == [step_used], argv
        assert not any("give --baseline-log SERVER.log" in ln for ln in lines), argv


def test_the_pngs_x_plain_decode_names_the_chain_it_is_for(tmp_path, capsys):
    """The large 'N.NNx plain decode' of the figure is the advised chain's, which need not be the logged one:
    the figure says which; for an accept-nothing drafter, the least-losing one."""
    from matplotlib.figure import Figure

    from sglang_patches.offline.report_plot import _text_panel

    texts = {}
    for name, log in logs(tmp_path).items():
        _, out = run(capsys, "report", log, "--json", "--baseline-step-ms", "4.5")
        d = json.loads(out)
        ax = Figure().subplots()
        _text_panel(ax, {0: {"accept_length": 1.5}}, d["advice"])
        texts[name] = ([t.get_text() for t in ax.texts], d["advice"])
    for name, (shown, advice) in texts.items():
        ratio = f"{advice['best']['ratio_to_no_spec']:.2f}x plain decode"
        assert shown[1] == ratio, (name, shown)
        assert shown[2].startswith(f"predicted for {advice['best_chain']}"), (name, shown)
    assert texts["nothing"][0][2].endswith("the least-losing chain (none pays)")
    assert texts["nothing"][1]["best_chain"] != "s5_k1_n6"  # the case it tests: another chain than the logged one


def test_the_pngs_advice_text_leaves_the_baselines_block_whole(tmp_path, capsys):
    """Without a baseline the answer lists the baselines to give in three lines; the figure's small text left out
    the first and kept the other two, which then read as the verdict's continuation."""
    from matplotlib.figure import Figure

    from sglang_patches.offline.report_plot import _text_panel
    from sglang_patches.whatif.advisor import NO_BASELINE

    _, out = run(capsys, "report", next(iter(logs(tmp_path).values())), "--json")
    advice = json.loads(out)["advice"]
    assert set(NO_BASELINE.split("\n")) <= set(advice["lines"])  # the premise: the block is in the answer
    ax = Figure().subplots()
    _text_panel(ax, {0: {"accept_length": 1.5}}, advice)
    small = " ".join(ax.texts[-1].get_text().split())
    assert not any(" ".join(part.split()) in small for part in NO_BASELINE.split("\n")), small


def test_a_batch_size_the_baseline_prices_is_judged_by_its_own_cycles(tmp_path, capsys):
    """Batch 1 and batch 8 in one log, a baseline at batch 1 only: the ratio covers batch 1, and its acceptance is
    batch 1's, not the log's pooled over batch 8's (here higher): the verdict is the one of the same log filtered to
    batch 1, and the same in advise, --adaptive-config and report."""
    import random

    rng = random.Random(3)
    low = [rng.choice([0, 0, 1, 1, 2, 3]) for _ in range(400)]    # batch 1: first draft kept about 67 %
    high = [rng.choice([2, 3, 3, 3]) for _ in range(1600)]      # batch 8: nearly every chain kept whole
    one = al.records_from_accepted(low, bs=1, steps=3, verify_ms=5.0, draft_ms=0.8, extend_ms=0.4)
    eight = al.records_from_accepted(high, bs=8, steps=3, verify_ms=6.0, draft_ms=0.9, extend_ms=0.5,
                                     start_cycle=len(one))
    base = plain_records({1: 4.67}, len(one) + len(eight))
    mixed = al.write_records(tmp_path / "mixed.jsonl", one + eight + base)
    alone = al.write_records(tmp_path / "alone.jsonl", one + base)
    _, out = run(capsys, "advise", alone, "--json")
    want, why = json.loads(out)["advice"]["verdict_lines"][1:3]
    assert want.startswith("speculate: keep s3_k1_n4, predicted at "), want
    _, out = run(capsys, "advise", mixed, "--json")
    got = json.loads(out)["advice"]
    assert got["verdict_lines"][1] == want + "; no baseline at batch 8 (33 % of cycles)", (got["verdict_lines"][1], want)
    assert got["verdict_lines"][2] == why  # the cycle in plain steps: batch 1's alone, as the ratio
    assert [u["bs"] for u in got["plain_steps_used"] if u["ms"] is None] == [8]  # the case under test: batch 8 unpriced
    for argv in (["report", mixed], ["advise", mixed, "--adaptive-config", tmp_path / "a.json"]):
        _, out = run(capsys, *argv)
        assert got["verdict_lines"][1] in out.splitlines()[:MAX_LINES], argv
