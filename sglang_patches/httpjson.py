"""One stdlib HTTP helper for every client of an SGLang server (benchmarks, sweeps, the profiler).

`http_json` POSTs a JSON payload (GET without one) and returns the decoded JSON body, None for an
empty body, or the text itself when the body is not JSON (SGLang's /start_profile and /stop_profile
answer plain text). Errors are urllib's own; callers that need one-line messages wrap them
(`profiling.client.Client.request`).
"""
from __future__ import annotations

import json
import urllib.request


def http_json(url: str, payload: dict | None = None, timeout: float = 600.0, method: str | None = None,
              headers: dict | None = None):
    data = None if payload is None else json.dumps(payload).encode()
    req = urllib.request.Request(url, data=data, method=method or ("POST" if data is not None else "GET"),
                                 headers={"Content-Type": "application/json", **(headers or {})})
    with urllib.request.urlopen(req, timeout=timeout) as resp:
        body = resp.read()
    if not body.strip():
        return None
    try:
        return json.loads(body)
    except ValueError:
        return body.decode("utf-8", "replace")


def http_text(url: str, timeout: float = 30.0) -> str:
    with urllib.request.urlopen(url, timeout=timeout) as resp:
        return resp.read().decode()
