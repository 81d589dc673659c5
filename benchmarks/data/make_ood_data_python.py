"""Write benchmarks/data/ood_data_python.jsonl: Python modules whose bodies are mostly data, unlike
the stdlib source the trained pairs learnt from (deterministic: the same file on every run).

Why data: a drafter agrees with its target where the target's next token is predictable from the
text the two were trained on. Library code of other domains (ood_python.jsonl) still reads like the
stdlib token for token (the pair accepted 2.28 per cycle there against 2.31 in-distribution). Here
each prompt ends inside a literal the target has to continue: hex digests, base64 blobs, UUIDs,
random floats, coordinates, non-Latin string tables, so the continuation is text neither model saw.

    python benchmarks/data/make_ood_data_python.py          # rewrites the .jsonl beside this file
"""
from __future__ import annotations

import base64
import hashlib
import json
import random
import uuid
from pathlib import Path

OUT = Path(__file__).resolve().parent / "ood_data_python.jsonl"
N_PER_KIND = 8
WORDS_CJK = "数据处理模型训练推理服务缓存队列日志配置用户订单支付库存物流报表"
WORDS_CYR = ["данные", "модель", "сервер", "очередь", "журнал", "настройка", "пользователь", "заказ"]


def hex_digests(rng):
    names = [f"asset_{rng.randrange(10**6):06d}.bin" for _ in range(6)]
    body = "".join(f'    "{n}": "{hashlib.sha256(n.encode() + bytes([rng.randrange(256)])).hexdigest()}",\n'
                   for n in names)
    return f'"""Known-good SHA-256 digests of the release assets."""\n\nEXPECTED_SHA256 = {{\n{body}    "'


def base64_blob(rng):
    blob = base64.b64encode(bytes(rng.randrange(256) for _ in range(240))).decode()
    lines = "".join(f'    "{blob[i:i + 64]}"\n' for i in range(0, len(blob) - 64, 64))
    return f'import base64\n\n# firmware image, version {rng.randrange(1, 9)}.{rng.randrange(20)}\nFIRMWARE_B64 = (\n{lines}    "'


def uuids(rng):
    ids = "".join(f'    ("{uuid.UUID(int=rng.getrandbits(128), version=4)}", {rng.randrange(1, 500)}),\n'
                  for _ in range(6))
    return f"# (order id, quantity) fixtures for the checkout tests\nORDERS = [\n{ids}    (\""


def floats(rng):
    rows = "".join("    [" + ", ".join(f"{rng.gauss(0, 1):.6f}" for _ in range(6)) + "],\n" for _ in range(5))
    return f"import numpy as np\n\n# calibration matrix measured on rig {rng.randrange(100)}\nCALIB = np.array([\n{rows}    ["


def coordinates(rng):
    pts = "".join(f"    ({rng.uniform(-90, 90):.5f}, {rng.uniform(-180, 180):.5f}),  # {rng.randrange(10**4)}\n"
                  for _ in range(6))
    return f'"""Depot locations (lat, lon) for the routing benchmark."""\n\nDEPOTS = [\n{pts}    ('


def cjk_table(rng):
    def word():
        return "".join(rng.choice(WORDS_CJK) for _ in range(rng.randrange(2, 5)))
    rows = "".join(f'    "{k}": "{word()}",\n' for k in ("title", "save", "cancel", "error", "retry"))
    return f"# -*- coding: utf-8 -*-\n# UI strings, zh-CN\nMESSAGES = {{\n{rows}    \"{rng.choice(['help', 'quit', 'open'])}\": \""


def cyrillic_log(rng):
    rows = "".join(f'    ({rng.randrange(1, 28)}, "{rng.choice(WORDS_CYR)} {rng.choice(WORDS_CYR)}"),\n'
                   for _ in range(5))
    return f"# журнал событий (день, сообщение)\nEVENTS = [\n{rows}    ({rng.randrange(1, 28)}, \""


def bitmaps(rng):
    rows = "".join("    0b" + "".join(rng.choice("01") for _ in range(16)) + ",\n" for _ in range(6))
    return f"# 16x16 glyph for code point U+{rng.randrange(0x4e00, 0x9fff):04X}\nGLYPH = [\n{rows}    0b"


KINDS = [hex_digests, base64_blob, uuids, floats, coordinates, cjk_table, cyrillic_log, bitmaps]


def main() -> None:
    rng = random.Random(20261202)
    rows = []
    for kind in KINDS:
        for _ in range(N_PER_KIND):
            rows.append({"id": len(rows), "domain": kind.__name__.replace("_", "-"), "prompt": kind(rng)})
    order = random.Random(7).sample(range(len(rows)), len(rows))  # a cell's first prompts mix the kinds
    OUT.write_text("".join(json.dumps({**rows[i], "id": n}, ensure_ascii=False) + "\n" for n, i in enumerate(order)),
                   encoding="utf-8")
    print(f"wrote {OUT} ({len(rows)} prompts, {len(KINDS)} kinds)")


if __name__ == "__main__":
    main()
