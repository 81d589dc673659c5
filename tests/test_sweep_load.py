"""The load generator (`sweep.load.run_batch`) against a local HTTP stand-in for SGLang's /generate.
A stand-in because no SGLang server can run here (no GPU); the client code under test is the real one."""
from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from sglang_patches.offline.sweep.load import pick_prompts, run_batch


class _Generate(BaseHTTPRequestHandler):
    in_flight = 0
    peak = 0
    lock = threading.Lock()
    seen: list = []

    def do_POST(self):  # noqa: N802 - http.server API
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        cls = type(self)
        with cls.lock:
            cls.in_flight += 1
            cls.peak = max(cls.peak, cls.in_flight)
            cls.seen.append(body)
        time.sleep(0.02)
        n = body["sampling_params"]["max_new_tokens"]
        out = {"text": body["text"].upper(), "meta_info": {"completion_tokens": n, "spec_verify_ct": n // 2,
                                                           "spec_accept_length": 2.0, "e2e_latency": 0.02}}
        data = json.dumps(out).encode()
        with cls.lock:
            cls.in_flight -= 1
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *a):
        pass


@pytest.fixture
def server():
    _Generate.in_flight, _Generate.peak, _Generate.seen = 0, 0, []
    srv = ThreadingHTTPServer(("127.0.0.1", 0), _Generate)
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    yield f"http://127.0.0.1:{srv.server_address[1]}"
    srv.shutdown()


def test_run_batch_counts_tokens_keeps_batch_in_flight_and_hashes_outputs_in_prompt_order(server):
    prompts = ["a", "b", "c"]
    r = run_batch(server, prompts, 2, 8, num_requests=4, offset=2, ignore_eos=False)
    assert r["requests"] == 4 and r["output_tokens"] == 32 and r["verify_ct"] == 16
    assert r["accept_length"] == 2.0 and r["tok_s"] > 0
    assert _Generate.peak == 2                                   # batch size in flight, not more
    assert sorted(b["text"] for b in _Generate.seen) == sorted(pick_prompts(prompts, 4, 2)) == ["a", "b", "c", "c"]
    assert all(b["sampling_params"]["ignore_eos"] is False and b["sampling_params"]["temperature"] == 0.0
               for b in _Generate.seen)
    same = run_batch(server, prompts, 1, 8, num_requests=4, offset=2)
    assert same["text_hashes"] == r["text_hashes"]              # same prompts -> same outputs, same order
    assert r["text_hashes"][0] != r["text_hashes"][1] and r["text_hashes"][0] == r["text_hashes"][3]  # c, a, b, c
    other = run_batch(server, prompts, 1, 8, num_requests=4, offset=0)
    assert other["text_hashes"] != r["text_hashes"]
