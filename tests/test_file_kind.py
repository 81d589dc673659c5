"""What a file given as a log looks like (sglang_patches/vocab/file_kind.py), and the readers that name it:
the timing-log reader (report, advise, advise --adaptive-config) and --baseline-log's server-log reader.
The per-command one-line refusals are bad-input cases (tests/bad_input_cli.py, OTHER_FILES)."""
from __future__ import annotations

import json

import pytest

from sglang_patches.errors import UserError
from sglang_patches.offline.decode_log import steady_decode_steps
from sglang_patches.vocab.file_kind import not_a_server_log, not_a_timing_log, sniff
from sglang_patches.vocab.logread import read_records
from sglang_patches.vocab.schema import make_record


def rec(i: int, steps: int = 3) -> str:
    return json.dumps(make_record(cycle=i, t=1.0 + i, rank=0, kind="decode", bs=1, steps=steps, topk=1,
                                  draft_tokens=steps + 1 if steps else 0, accepted=[min(2, steps)] if steps else [],
                                  draft_ms=1.0, verify_ms=2.0, extend_ms=0.5, cycle_ms=3.6, host_gap_ms=0.1))


CHAT = '{"messages": [{"role": "user", "content": "Hi"}]}\n'


def test_a_chat_jsonl_is_named_not_schema_none(tmp_path):
    p = tmp_path / "chat.jsonl"
    p.write_text(CHAT * 5)
    with pytest.raises(UserError) as err:
        read_records([p])
    assert str(err.value) == (f'{p}: looks like a chat-request JSONL ({{"messages": [...]}} lines), not a timing log: '
                              "pass the file written by `--timing-log`")
    assert "schema is None" not in str(err.value)
    assert not_a_server_log(str(p), "--baseline-log") == (
        f'--baseline-log {p}: looks like a chat-request JSONL ({{"messages": [...]}} lines), not a SGLang server\'s '
        "log: pass the stdout/stderr log of a SGLang server run without speculation")
    with pytest.raises(UserError, match="looks like a chat-request JSONL"):
        steady_decode_steps(str(p), "--baseline-log")


def test_timing_logs_are_told_apart_and_still_read(tmp_path):
    spec, plain = tmp_path / "spec.jsonl", tmp_path / "plain.jsonl"
    spec.write_text("".join(rec(i) + "\n" for i in range(3)))
    plain.write_text("".join(rec(i, steps=0) + "\n" for i in range(3)))
    assert sniff(spec).key == "timing-speculative" and sniff(plain).key == "timing-plain"
    assert not_a_timing_log(str(spec)) is None and not_a_timing_log(str(plain)) is None
    # a stray request line ahead of real records: the file is a timing log, read with a warning
    mixed = tmp_path / "mixed.jsonl"
    mixed.write_text(CHAT + rec(0) + "\n")
    records, reader = read_records([mixed])
    assert len(records) == 1 and reader.skipped == 1
    assert "that is a speculative server's timing log" in not_a_server_log(str(spec), "--baseline-log")
    assert "goes in as a second LOG" in not_a_server_log(str(plain), "--baseline-log")


def test_unrecognised_files_keep_the_generic_line_with_its_fix(tmp_path):
    p = tmp_path / "junk.jsonl"
    p.write_text("junk\n[1, 2]\n")
    assert sniff(p) is None
    with pytest.raises(UserError) as err:
        read_records([p])
    assert str(err.value) == (f"{p}: no valid timing records in 2 line(s); first problem: line 1: not valid JSON; "
                              "pass the file written by `--timing-log`")
    # a timing record that is damaged is not another kind of file: the record's problem is named
    bad = tmp_path / "bad.jsonl"
    bad.write_text(rec(0).replace('"bs": 1', '"bs": -1') + "\n")
    with pytest.raises(UserError, match=r"no valid timing records in 1 line\(s\); first problem: line 1: field 'bs'"):
        read_records([bad])


def test_a_huge_line_without_newline_is_read_in_bounded_pieces(tmp_path):
    p = tmp_path / "big.jsonl"
    p.write_bytes(b"x" * (3 << 20))  # 3 MB, no newline: not held whole, not recognised
    assert sniff(p) is None


@pytest.mark.parametrize("fmt", ["gzip", "xz"])
def test_a_gzip_or_xz_timing_log_is_read_as_it_is(tmp_path, fmt):
    """Rotated logs are often compressed (logrotate's compress; the results folders keep .jsonl.xz): a timing log in
    gzip or xz is read without decompressing it first, and named for what it holds; the file is not changed. A
    server's log (--baseline-log) is read uncompressed, so a compressed one is refused with the fix."""
    import gzip
    import lzma

    body = "".join(rec(i) + "\n" for i in range(3)).encode()
    p = tmp_path / f"timing.jsonl.{fmt}"
    p.write_bytes(gzip.compress(body) if fmt == "gzip" else lzma.compress(body))
    before = p.read_bytes()
    assert sniff(p).key.startswith("timing")
    assert len(read_records([p])[0]) == 3
    with pytest.raises(UserError) as err:
        steady_decode_steps(str(p), "--baseline-log")
    said = "is gzip-compressed: gunzip it first" if fmt == "gzip" else "is xz-compressed: unxz it first"
    assert str(err.value) == f"--baseline-log {p} {said}" + (" (xz -dk keeps the .xz)" if fmt == "xz" else "") + \
        ", then pass the server log inside"
    assert p.read_bytes() == before


@pytest.mark.parametrize("fmt", ["gzip", "xz"])
def test_a_cut_short_archive_is_one_line_naming_it(tmp_path, fmt):
    import gzip
    import lzma

    body = "".join(rec(i) + "\n" for i in range(200)).encode()
    whole = gzip.compress(body) if fmt == "gzip" else lzma.compress(body)
    p = tmp_path / f"timing.jsonl.{fmt}"
    p.write_bytes(whole[:len(whole) // 2])
    with pytest.raises(UserError) as err:
        read_records([p])
    assert str(err.value).startswith(f"{p}: the compressed log is damaged or cut short (")
    assert "\n" not in str(err.value)


def test_a_zstd_log_is_named_with_its_fix_not_invalid_json(tmp_path):
    # zstd's frame magic, then bytes as opaque as a compressed frame (Python has no zstd reader)
    data = b"\x28\xb5\x2f\xfd" + bytes((i * 151 + 7) % 256 for i in range(4096) if (i * 151 + 7) % 256 != 10)
    p = tmp_path / "timing.jsonl.zstd"
    p.write_bytes(data)
    assert sniff(p).key == "compressed"
    with pytest.raises(UserError) as err:
        read_records([p])
    assert str(err.value).startswith(f"{p} is zstd-compressed: unzstd") and str(err.value).endswith(
        "then pass the timing log inside")
    assert p.read_bytes() == data
