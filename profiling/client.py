"""The HTTP side of `sglang-patches profile`: talk to a running SGLang server (stdlib only).

Endpoints used (SGLang 0.5.17 unless noted):
  GET  /server_info          -> {"version", "internal_states": [...], "tp_size", "dp_size", ...};
                                the overlay adds internal_states[i].sglang_patches (server/patches/marker.py)
  GET  /spec_timing, POST /spec_timing/reset   (overlay only, server/timing/endpoint.py)
  POST /start_profile {ProfileReq fields}, POST /stop_profile   (SGLang's torch profiler)
"""
from __future__ import annotations

import urllib.error
import urllib.parse

from sglang_patches.errors import UserError
from sglang_patches.httpjson import http_json


class RequestFailed(RuntimeError):
    """A request to the server failed (connection, HTTP status or body); the message is one line."""


class Client:
    def __init__(self, url: str, api_key: str | None = None, timeout: float = 30.0):
        url = url.strip()
        if "://" not in url:
            url = "http://" + url
        try:
            parts = urllib.parse.urlsplit(url)
        except ValueError as exc:
            raise UserError(f"--url {url!r} is not a valid URL ({exc}); give e.g. http://127.0.0.1:30000") from None
        if any(c.isspace() or ord(c) < 32 for c in url):
            raise UserError(f"--url {url!r} contains whitespace or control characters; give e.g. http://127.0.0.1:30000")
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise UserError(f"--url {url!r} is not an http(s) URL; give e.g. http://127.0.0.1:30000")
        self.url, self.api_key, self.timeout = url.rstrip("/"), api_key, timeout
        self.host = parts.hostname
        try:
            self.port = parts.port or (443 if parts.scheme == "https" else 80)
        except ValueError as exc:
            raise UserError(f"--url {url!r}: {exc}") from None

    def request(self, path: str, payload=None, method: str | None = None, timeout: float | None = None):
        """JSON (or text) body of `path`; raises RequestFailed with one line on any failure."""
        method = method or ("POST" if payload is not None else "GET")
        headers = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else None
        try:
            return http_json(self.url + path, payload, timeout=timeout or self.timeout, method=method, headers=headers)
        except urllib.error.HTTPError as exc:
            detail = _one_line(exc.read().decode("utf-8", "replace"))
            raise RequestFailed(f"{method} {path}: HTTP {exc.code}" + (f" ({detail})" if detail else "")) from None
        except (urllib.error.URLError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            raise RequestFailed(f"{method} {path}: {_one_line(str(reason))}") from None

    # --- the calls the profiler makes ---------------------------------------------------------
    def server_info(self) -> dict:
        """`/server_info` of an SGLang server, or a one-line UserError (unreachable / not SGLang)."""
        try:
            info = self.request("/server_info", timeout=min(self.timeout, 15.0))
        except RequestFailed as exc:
            if "HTTP" in str(exc):
                raise UserError(f"{self.url} answered but is not an SGLang server ({exc}); "
                                "give the URL of a running SGLang server") from None
            raise UserError(f"cannot reach {self.url} ({exc}); is the server running and the URL "
                            "(host:port) right?") from None
        if not isinstance(info, dict) or "version" not in info or not isinstance(info.get("internal_states"), list):
            raise UserError(f"{self.url}/server_info is not SGLang's (no 'version' and 'internal_states'); "
                            "give the URL of a running SGLang server")
        return info

    def reset_spec_timing(self) -> dict:
        return self.request("/spec_timing/reset", payload={})

    def spec_timing(self) -> dict:
        return self.request("/spec_timing")

    def start_profile(self, output_dir: str, activities, profile_id: str) -> None:
        # with_stack/record_shapes off: SGLang turns both on by default, which makes the torch
        # profiler far heavier; Python stacks come from py-spy here.
        self.request("/start_profile", payload={"output_dir": output_dir, "activities": list(activities),
                                                "profile_id": profile_id, "with_stack": False,
                                                "record_shapes": False})

    def stop_profile(self, timeout: float = 300.0) -> None:
        self.request("/stop_profile", payload={}, timeout=timeout)  # exporting the trace takes a while


def overlay_markers(server_info: dict) -> list[dict]:
    """[{dp_index, pid, tp_rank, version, spec_timing}] for each internal state the overlay marked."""
    out = []
    for i, state in enumerate(server_info.get("internal_states") or []):
        info = state.get("sglang_patches") if isinstance(state, dict) else None
        if isinstance(info, dict):
            out.append({"dp_index": i, "pid": info.get("pid"), "tp_rank": info.get("tp_rank"),
                        "version": info.get("version")})
    return out


def _one_line(text: str, limit: int = 200) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."
