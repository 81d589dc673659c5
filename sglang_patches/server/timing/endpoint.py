"""`GET /spec_timing` and `POST /spec_timing/reset` on the drop-in server's FastAPI app.

The timing data lives in the scheduler processes; these routes reach it through SGLang's own
internal-state RPC (the `marker` feature adds it there), so no extra socket or file is involved.
Reset is guarded like SGLang's other admin endpoints (`AuthLevel.ADMIN_OPTIONAL`).
"""
# No `from __future__ import annotations` here: FastAPI must see the real `Request` class in the
# signature of the routes below (they are defined in a function scope).
from sglang_patches import compat
from sglang_patches.server.patches.marker import RESET_KEY  # the key the marker hook consumes

# The body's layout; a change to it gets the next number (the summary inside keeps its own fields).
ENDPOINT_FORMAT = 1


def collect_from_states(states: list) -> dict:
    per_dp = []
    for i, state in enumerate(states or []):
        info = state.get("sglang_patches") if isinstance(state, dict) else None
        per_dp.append({"dp_rank": i, "overlay": info is not None,
                       "spec_timing": None if info is None else info.get("spec_timing")})
    if not per_dp or not any(p["overlay"] for p in per_dp):
        return {"format": ENDPOINT_FORMAT,
                "error": "the overlay is not active in the scheduler (start the server with "
                         "python -m sglang_patches.launch, --patches including marker,timing)", "dp": per_dp}
    first = next(p["spec_timing"] for p in per_dp if p["overlay"])
    sim = next((s.get("sglang_patches", {}).get("simulated_acceptance") for s in states
                if isinstance(s, dict) and s.get("sglang_patches")), None)
    out = {"format": ENDPOINT_FORMAT, "spec_timing": first, "dp": per_dp}
    if sim is not None:  # simulated acceptance: the accept figures above are not measurements
        out["simulated_acceptance"] = sim
    return out


def install_routes(app) -> None:
    from fastapi import Request
    from fastapi.responses import ORJSONResponse

    c = compat.current()
    get_global_state = c.GET_GLOBAL_STATE.resolve()
    SetInternalStateReq = c.SET_INTERNAL_STATE_REQ.resolve()
    AuthLevel, auth_level = c.AUTH_LEVEL.resolve(), c.AUTH_LEVEL_DECORATOR.resolve()

    if any(getattr(r, "path", None) == "/spec_timing" for r in app.routes):
        return

    @app.get("/spec_timing")
    async def spec_timing():
        states = await get_global_state().tokenizer_manager.get_internal_state()
        body = collect_from_states(states)
        return ORJSONResponse(body, status_code=503 if "error" in body else 200)

    @app.post("/spec_timing/reset")
    @auth_level(AuthLevel.ADMIN_OPTIONAL)
    async def spec_timing_reset(request: Request):
        tm = get_global_state().tokenizer_manager
        ok = await tm.set_internal_state(SetInternalStateReq(server_args={RESET_KEY: 1}))
        return ORJSONResponse({"reset": bool(ok) and all(ok)})
