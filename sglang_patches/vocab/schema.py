"""The per-cycle timing record: one JSON object per line of a `--timing-log` file.

Schema version 1 (field `v`). Times are GPU milliseconds measured with CUDA events, except `t`
(host wall clock, Unix seconds, when the cycle started) and `host_gap_ms` (host time between the
return of the previous cycle's forward call and the start of this one; null for the first cycle;
with SGLang's overlap scheduler it includes waiting for the previous cycle's result, so it is
not GPU idle time). `gpu_gap_ms` (optional, added within v1) is the GPU-stream time from the end of
the previous timed cycle to the start of this one: the GPU bubble between cycles as the stream saw
it (null when unknown). `stale` (optional, added within v1): requests of the batch that had already
finished or been retracted when the cycle's result was processed (their drafts were wasted work;
SGLang counts no verify for them and they are left out of `accepted`). `simulated` (optional, added
within v1; absent = false): true when the server ran with simulated acceptance (`--simulate-acceptance`, or SGLang's own
`SGLANG_SIMULATE_ACC_LEN` > 0): `accepted` was then drawn from rates set at launch, not
measured, and the record is no measurement of a drafter. `req` (optional, added within v1): one tag
per entry of `accepted`, same order: the request's id hashed to 32 bits (`hash(rid) & 0xffffffff`,
stable within one server process, so only within one rank's log), so a reader can follow each
request's cycles at any batch size (the advisor's span replay and its per-request range).

Schema version 2 (what the recorder writes now; readers take v1 and v2): under SGLang's
`--speculative-adaptive` one log holds cycles of different `steps` / `draft_tokens` (each record
carries the shape that RAN in that cycle, read after SGLang switched it), and the field `plain`
(bool, always written in v2): true for a cycle of a speculative server that drafted nothing
(adaptive steps 0: `verify_ms` is a one-token target decode step, `extend_ms` keeps the drafter's
KV warm, `draft_ms` null, `accepted` all 0, `draft_tokens` 1). Plain cycles are no drafter
measurement (no acceptance statistics, no collapse alarm); they are the speculative server's own
no-speculation baseline. A v1 log has one shape per log and no plain cycles.

    {"schema": "sglang_patches.spec_timing", "v": 1,
     "cycle": 17,             # per-rank counter of timed cycles (decode and prefill share it)
     "t": 1764400000.123,     # host wall clock at cycle start
     "rank": 0,               # TP rank that measured it
     "kind": "decode",        # "decode" = draft + verify + draft-extend; "prefill" = target
                              #   prefill + prefill draft-extend (only extend_ms and cycle_ms)
     "bs": 4,                 # requests in the batch
     "steps": 3, "topk": 1, "draft_tokens": 4,
     "accepted": [3, 0, 2, 1],  # per request: accepted draft tokens (bonus token NOT counted);
                                # empty for prefill
     "draft_ms": 1.9, "verify_ms": 6.1, "extend_ms": 1.2,   # null when a phase did not run
     "cycle_ms": 9.4,         # whole forward_batch_generation on the GPU stream
     "host_gap_ms": 0.3, "gpu_gap_ms": 0.05,
     "req": [2748126, 99120, 4002117, 51]}   # per request (as `accepted`): its 32-bit tag

A server without speculative decoding and the opt-in `step_timing` feature writes the same records for
its forward steps: steps = topk = draft_tokens = 0, accepted [], only `cycle_ms` (the step's GPU ms).

Accept length of a request in a cycle = accepted + 1 (the bonus token), the SGLang/vLLM convention.
Per-position acceptance (vLLM's convention): position k (0-based) counts a request in a cycle
when drafts 0..k were all accepted, i.e. when accepted > k; rate_k = count_k / drafts = P(accepted
> k). The conditional rate (position k given 0..k-1, what --simulate-acceptance takes) is
rate_k / rate_(k-1).
"""
from __future__ import annotations

import math

SCHEMA_NAME = "sglang_patches.spec_timing"
SCHEMA_VERSION = 2
READ_VERSIONS = (1, 2)  # the versions the readers accept
PHASES = ("draft", "verify", "extend")
KINDS = ("decode", "prefill")

REQUIRED_FIELDS = {
    "cycle": int, "t": (int, float), "rank": int, "kind": str, "bs": int,
    "steps": int, "topk": int, "draft_tokens": int, "accepted": list,
    "draft_ms": (int, float, type(None)), "verify_ms": (int, float, type(None)),
    "extend_ms": (int, float, type(None)), "cycle_ms": (int, float, type(None)),
    "host_gap_ms": (int, float, type(None)),
}


# Ranges checked on read (inclusive). Far beyond any real server; they keep a damaged or hostile
# line from reaching the statistics (a huge `accepted` would size a histogram, a negative time
# would give negative tok/s, NaN would make --json output invalid).
INT_RANGES = {"cycle": (0, 1 << 62), "rank": (0, 1 << 16), "bs": (0, 1 << 20), "steps": (0, 1024),
              "topk": (0, 1024), "draft_tokens": (0, 1 << 16)}
MS_FIELDS = ("draft_ms", "verify_ms", "extend_ms", "cycle_ms", "host_gap_ms")
OPTIONAL_FIELDS = {"gpu_gap_ms": (int, float, type(None)), "stale": int, "simulated": bool, "req": list,
                   "plain": bool}
REQ_TAG_MASK = 0xFFFFFFFF


class RecordError(ValueError):
    """A line that is not a valid timing record of a version in READ_VERSIONS."""


def make_record(*, cycle: int, t: float, rank: int, kind: str, bs: int, steps: int, topk: int,
                draft_tokens: int, accepted: list[int], draft_ms, verify_ms, extend_ms, cycle_ms,
                host_gap_ms, gpu_gap_ms=None, stale=0, simulated=False, req=None, plain=False) -> dict:
    rec = {"schema": SCHEMA_NAME, "v": SCHEMA_VERSION, "cycle": cycle, "t": round(t, 6),
           "rank": rank, "kind": kind, "bs": bs, "steps": steps, "topk": topk,
           "draft_tokens": draft_tokens, "accepted": list(accepted),
           "draft_ms": _r(draft_ms), "verify_ms": _r(verify_ms), "extend_ms": _r(extend_ms),
           "cycle_ms": _r(cycle_ms), "host_gap_ms": _r(host_gap_ms),
           "gpu_gap_ms": _r(gpu_gap_ms), "stale": stale, "simulated": bool(simulated), "plain": bool(plain)}
    if req is not None:
        rec["req"] = list(req)
    return rec


def _r(x):
    return None if x is None else round(float(x), 4)


def validate_record(obj) -> dict:
    """Return `obj` if it is a valid record (a version in READ_VERSIONS), else raise RecordError
    naming the problem."""
    if not isinstance(obj, dict):
        raise RecordError("not a JSON object")
    if obj.get("schema") != SCHEMA_NAME:
        raise RecordError(f"schema is {obj.get('schema')!r}, expected {SCHEMA_NAME!r}")
    if obj.get("v") not in READ_VERSIONS or isinstance(obj.get("v"), bool):
        raise RecordError(f"schema version {obj.get('v')!r} is not supported (this tool reads "
                          f"v{READ_VERSIONS[0]} to v{READ_VERSIONS[-1]})")
    for key, typ in REQUIRED_FIELDS.items():
        if key not in obj:
            raise RecordError(f"missing field {key!r}")
        if not isinstance(obj[key], typ) or isinstance(obj[key], bool):
            raise RecordError(f"field {key!r} has type {type(obj[key]).__name__}")
    for key, typ in OPTIONAL_FIELDS.items():
        if key in obj and (not isinstance(obj[key], typ) or (typ is not bool and isinstance(obj[key], bool))):
            raise RecordError(f"field {key!r} has type {type(obj[key]).__name__}")
    if obj["kind"] not in KINDS:
        raise RecordError(f"kind {str(obj['kind'])[:40]!r} is not one of {KINDS}")
    for key, (lo, hi) in INT_RANGES.items():
        if not lo <= obj[key] <= hi:
            raise RecordError(f"field {key!r} is {obj[key]}, outside {lo}..{hi}")
    if not (math.isfinite(obj["t"]) and obj["t"] >= 0):
        raise RecordError(f"field 't' is {obj['t']}, not a finite time >= 0")
    for key in MS_FIELDS + ("gpu_gap_ms",):
        v = obj.get(key)
        if v is not None and not (math.isfinite(v) and v >= 0):
            raise RecordError(f"field {key!r} is {v}, not a finite time >= 0")
    if obj.get("stale", 0) < 0:
        raise RecordError(f"field 'stale' is {obj['stale']}, not >= 0")
    accepted = obj["accepted"]
    if len(accepted) > obj["bs"]:
        raise RecordError(f"accepted lists {len(accepted)} requests but bs is {obj['bs']}")
    limit = max(obj["steps"], obj["draft_tokens"])
    if not all(isinstance(a, int) and not isinstance(a, bool) and 0 <= a <= limit for a in accepted):
        raise RecordError(f"accepted must be a list of integers from 0 to {limit} (the draft length)")
    if obj.get("plain"):
        if obj["kind"] != "decode" or obj["steps"] != 0:
            raise RecordError(f"a plain cycle must be a decode cycle of steps 0 (has kind {obj['kind']!r}, "
                              f"steps {obj['steps']})")
        if any(accepted):
            raise RecordError("a plain cycle drafted nothing, so its accepted counts must all be 0")
    req = obj.get("req")
    if req is not None:
        if len(req) != len(accepted):
            raise RecordError(f"req lists {len(req)} tags but accepted {len(accepted)} requests")
        if not all(isinstance(x, int) and not isinstance(x, bool) and 0 <= x <= REQ_TAG_MASK for x in req):
            raise RecordError("req must be a list of integers from 0 to 2**32 - 1 (request tags)")
    return obj
