"""SGLang's `--config FILE.yaml` (prepare_server_args expands its keys into flags) is read by the
drop-in launcher as SGLang reads it: the pipeline-parallel size it yields is the one SGLang's real
parser and config merger of the version under test yield (0.5.17: srt/server_args_config_parser.py,
0.5.23: srt/utils/server_args_config_parser.py), so the refusal of --pp-size > 1 with timing on
0.5.23 sees a pp size given in the file; a file SGLang cannot read either is refused in one line,
exit 2, on both versions; an abbreviation SGLang's parser accepts is refused after it parsed."""
from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
from types import SimpleNamespace

import pytest
from conftest import needs_sglang, sglang_under_test

from sglang_patches import compat
from sglang_patches.errors import UserError
from sglang_patches.launch_args import flag_value, refuse_server_args, refuse_sglang_settings, with_sglang_config

TIMING = ("marker", "timing", "checks")
MODEL = ["--model-path", "/nonexistent/model"]


@pytest.fixture(scope="module")
def sglang_parser():
    """SGLang's own server parser and ConfigArgumentMerger of the version under test."""
    from sglang.srt.server_args import ServerArgs

    if sglang_under_test() == "0.5.23":
        from sglang.srt.utils.server_args_config_parser import ConfigArgumentMerger
    else:
        from sglang.srt.server_args_config_parser import ConfigArgumentMerger
    parser = argparse.ArgumentParser(prog="sglang serve")
    ServerArgs.add_cli_args(parser)
    return parser, ConfigArgumentMerger


def _yaml(tmp_path, text, name="cfg.yaml"):
    path = tmp_path / name
    path.write_text(text)
    return str(path)


@pytest.mark.parametrize("text,before,after,pp", [
    ("pp-size: 2\n", [], [], 2),
    ("pipeline-parallel-size: 3\n", [], [], 3),
    ("pp-size: 2\n", [], ["--pp-size", "1"], 1),                     # the command line wins ...
    ("pp-size: 2\n", ["--pp-size=1"], [], 1),                        # ... before or after --config
    ("pp-size: 4\ntp-size: 2\ntrust-remote-code: true\n"
     "json-model-override-args: {\"a\": 1}\n", [], [], 4),           # store_true and a mapping around it
    ("tp-size: 2\n", ["--pp-size", "2"], [], 2),
    ("tp-size: 2\n", [], [], 1),
    ("", [], [], 1),                                                 # an empty file: no flags
])
def test_pp_size_from_a_config_file_is_sglangs(tmp_path, sglang_parser, text, before, after, pp):
    parser, merger = sglang_parser
    argv = MODEL + before + ["--config", _yaml(tmp_path, text)] + after
    theirs = parser.parse_args(merger(parser).merge_config_with_args(list(argv))).pp_size
    ours = flag_value(with_sglang_config(argv), *compat.PP_FLAGS)
    assert theirs == pp and int(ours or 1) == pp


@pytest.mark.parametrize("text", [
    "trust-remote-code: false\nskip-server-warmup: true\n",        # store_true flags: absent / present
    "enable-hicache: true\n",                                      # a store_true flag's other spelling (0.5.23)
    "enable-metrics: false\nkv-cache-dtype: auto\n",
    "speculative-algorithm: EAGLE3\nmodel-path: /nonexistent/other\n",
    "pp-size: 2\ntp-size: true\n",                                  # not store_true: --tp-size true, as SGLang does
])
def test_a_config_file_expands_to_sglangs_own_flags(tmp_path, sglang_parser, text):
    parser, merger = sglang_parser
    argv = MODEL + ["--config", _yaml(tmp_path, text), "--port", "30001"]
    assert with_sglang_config(argv) == merger(parser).merge_config_with_args(list(argv))


def test_a_yaml_false_of_a_store_true_flag_leaves_it_off_as_sglang_does(tmp_path, sglang_parser):
    parser, merger = sglang_parser
    argv = MODEL + ["--config", _yaml(tmp_path, "trust-remote-code: false\nenable-metrics: true\n")]
    ours = with_sglang_config(argv)
    parsed = parser.parse_args(merger(parser).merge_config_with_args(list(argv)))
    assert parsed.trust_remote_code is False and parsed.enable_metrics is True
    assert "--trust-remote-code" not in ours and "--enable-metrics" in ours


def test_an_abbreviated_key_is_refused_on_what_sglang_parsed(tmp_path, sglang_parser):
    """`pp-s: 2` becomes `--pp-s 2`, which SGLang's parser reads as --pp-size 2 (an abbreviation): the
    argv check names only full spellings, the check on SGLang's parsed ServerArgs refuses it."""
    parser, merger = sglang_parser
    argv = MODEL + ["--config", _yaml(tmp_path, "pp-s: 2\n")]
    ours = with_sglang_config(argv)
    assert ours == merger(parser).merge_config_with_args(list(argv)) and ours[:2] == ["--pp-s", "2"]
    parsed = parser.parse_args(ours)
    assert parsed.pp_size == 2 and flag_value(ours, *compat.PP_FLAGS) is None
    refuse_sglang_settings(TIMING, argv, environ={})  # not seen in the argv ...
    if sglang_under_test() == "0.5.23":  # ... but in what SGLang parsed (the launcher's serve(), the plugin's hook)
        with pytest.raises(UserError, match=r"^--pp-size 2 with the timing feature is refused on sglang 0\.5\.23"):
            refuse_server_args(TIMING, parsed, environ={})
    else:
        refuse_server_args(TIMING, parsed, environ={})


def test_flag_value_is_the_last_given_as_argparse_keeps_it(sglang_parser):
    parser, _ = sglang_parser
    argv = MODEL + ["--speculative-algorithm", "EAGLE", "--speculative-algorithm=NGRAM", "--model-path", "/m2"]
    parsed = parser.parse_args(argv)
    assert flag_value(argv, "--speculative-algorithm") == parsed.speculative_algorithm == "NGRAM"
    assert flag_value(argv, "--model-path", "--model") == parsed.model_path == "/m2"
    assert flag_value(argv, "--revision") is None


def test_config_with_equals_sign_is_ignored_as_sglang_ignores_it(tmp_path, sglang_parser):
    parser, merger = sglang_parser
    argv = MODEL + ["--config=" + _yaml(tmp_path, "pp-size: 2\n")]
    assert parser.parse_args(merger(parser).merge_config_with_args(list(argv))).pp_size == 1
    assert with_sglang_config(argv) == argv


@pytest.mark.parametrize("name,text,extra,expect", [
    ("missing.yaml", None, [], "cannot read it (No such file or directory)"),
    ("cfg.json", "{}", [], "SGLang reads a YAML file (.yaml or .yml)"),
    ("bad.yaml", "pp-size: [2\n", [], "not valid YAML at line"),
    ("list.yaml", "- pp-size\n- 2\n", [], "holds a list, not a mapping"),
    ("cfg.yaml", "pp-size: 2\n", ["--config", "other.yaml"], "--config is given more than once"),
])
def test_a_config_file_sglang_cannot_read_is_refused_in_one_line(tmp_path, sglang_parser, name, text, extra, expect):
    parser, merger = sglang_parser
    path = str(tmp_path / name) if text is None else _yaml(tmp_path, text, name)
    argv = MODEL + ["--config", path] + extra
    with pytest.raises(Exception):  # SGLang refuses the same file (ValueError, a YAML error), with a traceback
        merger(parser).merge_config_with_args(list(argv))
    with pytest.raises(UserError) as info:
        with_sglang_config(argv)
    assert expect in str(info.value) and "\n" not in str(info.value)
    with pytest.raises(UserError, match="needs a file name"):
        with_sglang_config(MODEL + ["--config"])


def test_refusal_reads_the_config_file(tmp_path):
    argv = MODEL + ["--config", _yaml(tmp_path, "pp-size: 2\n")]
    if sglang_under_test() == "0.5.23":
        with pytest.raises(UserError, match=r"^--pp-size 2 with the timing feature is refused on sglang 0\.5\.23"):
            refuse_sglang_settings(TIMING, argv, environ={})
        refuse_sglang_settings(TIMING, argv + ["--pp-size", "1"], environ={})  # the command line wins
    else:  # 0.5.17 has no such path: not refused
        refuse_sglang_settings(TIMING, argv, environ={})
    refuse_sglang_settings(("marker", "checks"), argv, environ={})


def _launch(*args):
    env = {k: v for k, v in os.environ.items() if not k.startswith("SGLANG_PATCHES_")}
    r = subprocess.run([sys.executable, "-m", "sglang_patches.launch", *MODEL, *args],
                       capture_output=True, text=True, env=env, timeout=300)
    errors = [ln for ln in r.stderr.splitlines() if "error:" in ln]
    assert r.returncode == 2 and len(errors) == 1 and "Traceback" not in r.stderr, r.stderr[-3000:]
    return errors[0]


def test_launcher_refuses_pp_from_a_config_file(tmp_path):
    line = _launch("--config", _yaml(tmp_path, "pp-size: 2\n"))
    if sglang_under_test() == "0.5.23":
        assert line.startswith("sglang-patches: error: --pp-size 2 with the timing feature is refused on sglang 0.5.23")
    else:  # 0.5.17: not refused; the launcher goes on to its GPU check (none here)
        assert "no CUDA GPU is visible" in line


def test_launcher_refuses_an_unreadable_config_file(tmp_path):
    missing = str(tmp_path / "missing.yaml")
    assert _launch("--config", missing) == (f"sglang-patches: error: --config {missing}: cannot read it "
                                            "(No such file or directory); give a readable YAML file")


@needs_sglang("0.5.23", why="the pp refusal is 0.5.23's; 0.5.17's prepare_server_args needs an accelerator")
def test_serve_refuses_what_sglangs_parser_made_of_an_abbreviation(monkeypatch, capsys):
    """`--pp-s 2` is --pp-size 2 to SGLang's parser (argparse abbreviations) but no flag the argv check
    reads: serve() refuses it on SGLang's real parsed ServerArgs, before launch_server."""
    from sglang_patches import launch
    from sglang_patches.server import deliberate_stop
    from sglang_patches.server.timing import endpoint

    real = compat.current()
    launched = []

    def stub(fn):
        return SimpleNamespace(resolve=lambda: fn)

    # mocks for what cannot run here: starting the server (no GPU), loading plugins, killing children
    fake = SimpleNamespace(PREPARE_SERVER_ARGS=real.PREPARE_SERVER_ARGS, HTTP_APP=real.HTTP_APP,
                           LOAD_PLUGINS=stub(lambda: None), KILL_PROCESS_TREE=stub(lambda pid, include_parent=True: None),
                           LAUNCH_SERVER=stub(lambda server_args, run_scheduler_process_func: launched.append(server_args)))
    monkeypatch.setattr(launch, "check_gpu", lambda argv: None)
    monkeypatch.setattr(compat, "current", lambda: fake)
    monkeypatch.setattr(endpoint, "install_routes", lambda app: None)
    monkeypatch.delenv("SGLANG_ENABLE_DP_SPEC_PREFILL_COORDINATION", raising=False)
    before = signal.getsignal(deliberate_stop.STOP_SIGNAL)
    try:
        with pytest.raises(SystemExit) as info:
            launch.serve(MODEL + ["--pp-s", "2"], features=TIMING)
        assert info.value.code == 2 and launched == []
        err = capsys.readouterr().err.strip()
        assert err.startswith("sglang-patches: error: --pp-size 2 with the timing feature is refused") and "\n" not in err
        assert launch.serve(MODEL + ["--pp-s", "2"], features=("marker", "checks")) == 0
        assert [a.pp_size for a in launched] == [2]
    finally:
        signal.signal(deliberate_stop.STOP_SIGNAL, before)


@pytest.mark.parametrize("text,expect", [
    ("5: true\n", "key 5 is not a flag name"),
    ("~: 2\n", "key None is not a flag name"),
    ("draft-tp-size: 1\ntimings: 2\n", "draft-tp-size is a launcher flag (SGLang reads this file, not the overlay)"),
])
def test_keys_that_are_no_sglang_flag_are_refused_in_one_line(tmp_path, text, expect):
    with pytest.raises(UserError) as info:
        with_sglang_config(MODEL + ["--config", _yaml(tmp_path, text)])
    assert expect in str(info.value) and "\n" not in str(info.value)


def test_reading_booleans_for_the_checks_imports_no_sglang(tmp_path):
    """The launcher's checks read a YAML boolean as present (true) or absent (false), without SGLang's
    parser: `enable-dp-attention: false` is off, `true` is on."""
    path = _yaml(tmp_path, "enable-dp-attention: false\nenable-metrics: true\ntp-size: 2\n")
    code = ("import sys; from sglang_patches.launch_args import EveryKeyStoreTrue, with_sglang_config; "
            f"print(with_sglang_config(['--config', {path!r}], store_true=EveryKeyStoreTrue())); "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('sglang', 'torch')))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == ["['--enable-metrics', '--tp-size', '2']", "[]"]


def test_a_fixture_leaves_a_model_given_under_sglangs_other_spelling():
    from sglang_patches.offline.fixtures.model_flags import fixture_flags

    extra = fixture_flags("tiny", ["--model", "/x", "--speculative-draft-model", "/y"])
    assert "--model-path" not in extra and "--speculative-draft-model-path" not in extra
    assert "--model-path" in fixture_flags("tiny", [])
