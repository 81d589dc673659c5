"""Sweeps spread over several GPUs, and searches replayed on measured rows.

`--shard I/N` runs every N-th configuration of the plan starting at I (the baseline is configuration
0, so shard 0 measures it), each shard on its own GPU (CUDA_VISIBLE_DEVICES) into its own --out.
`--merge DIR...` then joins the shards' rows, timing and server logs into one --out (copies; the
shard directories are left as they are) and writes the report. The shards must have been run with
the same settings (sweep.json keys that --resume also checks).

`--search --replay DIR` runs the search's decisions (design, fit, predicted best) against the rows a
full grid already measured in DIR instead of starting servers: each configuration the search asks
for is copied from DIR, so the search's pick can be compared with the grid's best on the same
measurements. search.json records `replayed_from` and every copied row keeps its original timing.
"""
from __future__ import annotations

import shutil
from pathlib import Path

from sglang_patches.errors import UserError
from sglang_patches.offline.sweep import results as res
from sglang_patches.whatif.grid import config_name


def parse_shard(text: str | None) -> tuple[int, int] | None:
    """'1/3' -> (1, 3); None -> None; UserError otherwise."""
    if text is None:
        return None
    idx, sep, total = str(text).partition("/")
    try:
        i, n = int(idx), int(total)
    except ValueError:
        i, n = -1, 0
    if not sep or n < 1 or not 0 <= i < n:
        raise UserError(f"--shard {text!r}: expected I/N with 0 <= I < N, e.g. 0/3 1/3 2/3 (one per GPU)")
    return i, n


def shard_configs(configs: list, shard: tuple[int, int] | None) -> list:
    if shard is None:
        return list(configs)
    i, n = shard
    return list(configs)[i::n]


def _manifest(d: Path) -> dict:
    return res.read_manifest(d, required=True)


def merge(dirs: list[str], out_dir: str, *, force: bool = False) -> Path:
    """Join shard sweeps into out_dir; returns it. Nothing in `dirs` is changed."""
    if len(dirs) < 2:
        raise UserError("--merge needs at least two sweep directories (the shards)")
    srcs = [Path(d) for d in dirs]
    out = Path(out_dir)
    seen: dict = {}
    for s in srcs:
        if not s.is_dir():
            raise UserError(f"--merge {s}: no such directory")
        if s.resolve() == out.resolve():
            raise UserError(f"--merge {s} is also --out; merge into a new directory")
        if s.resolve() in seen:  # its rows would count twice
            raise UserError(f"--merge {s}: given twice (also as {seen[s.resolve()]}); pass each shard once")
        seen[s.resolve()] = s
    manifests = [_manifest(s) for s in srcs]
    first = manifests[0]
    for s, m in zip(srcs[1:], manifests[1:]):
        diffs = [k for k in res.MATCH_KEYS if first.get(k) != m.get(k)]
        if diffs:
            raise UserError(f"--merge: {s} was run with other settings than {srcs[0]} ({', '.join(diffs)}); "
                            "only shards of one sweep can be merged")
    rows_by_src = [res.read_rows(s) for s in srcs]
    if not any(rows_by_src):
        raise UserError("--merge: the shard directories hold no rows")
    manifest = {**{k: v for k, v in first.items() if k != "shard"},
                "merged_from": [str(s) for s in srcs],
                "batch_sizes": sorted({b for m in manifests for b in m.get("batch_sizes", [])})}
    plan = res.read_object(srcs[0] / res.PLAN, "sweep plan")  # read and checked before writing
    out = res.prepare_out_dir(out, resume=False, force=force, manifest=manifest)
    if plan is not None:
        res.write_json(out / res.PLAN, plan)
    for s, rows in zip(srcs, rows_by_src):
        for r in rows:
            res.append_row(out, {**r, "shard_dir": str(s)})
        for sub in ("timing", "logs"):
            if (s / sub).is_dir():
                for f in (s / sub).iterdir():
                    if f.is_file() and not (out / sub / f.name).exists():
                        shutil.copy2(f, out / sub / f.name)
    return out


def replayer(grid_dir: str, out_dir: Path):
    """A `run(configs)` for run_search that copies rows measured in grid_dir instead of measuring."""
    src = Path(grid_dir)
    if not (src / res.RESULTS).is_file():
        raise UserError(f"--replay {grid_dir}: no {res.RESULTS} there; give the directory of a measured grid sweep")
    latest = res.latest_rows(res.read_rows(src))

    def run(configs: list) -> list[dict]:
        written = []
        done = res.done_keys(res.read_rows(out_dir))
        for cfg in configs:
            name = config_name(cfg)
            rows = [r for (c, _), r in sorted(latest.items(), key=lambda kv: kv[0][1]) if c == name]
            if not rows:
                raise UserError(f"--replay: {grid_dir} has no row for {name}; run the grid with the same "
                                "--steps/--topk/--draft-tokens first")
            for r in rows:
                if (name, int(r["batch_size"])) in done:
                    continue
                row = {**r, "replayed_from": str(src)}
                res.append_row(out_dir, row)
                written.append(row)
                for sub in ("timing", "logs"):
                    for f in (src / sub).glob(f"{name}.*"):
                        if f.is_file() and not (out_dir / sub / f.name).exists():
                            shutil.copy2(f, out_dir / sub / f.name)
        return written

    return run
