"""The adaptive benchmark's export: what comes back from the GPU machine (few files come back)."""
from __future__ import annotations

import shutil
import tarfile
from pathlib import Path

SUBFOLDERS = ["cells", "starts", "configs", "advise", "bench", "logs", "mainjob", "timing"]


def export_run(out: Path, dst: Path, summary_path: Path, table: str, max_mb: float) -> None:
    """summary.json and the table as they are, everything else of `out` in one run.tgz: cells, starts,
    configs, advise input/output, bench_serving output, server logs, mainjob, timing logs (left out,
    and said so, when the archive would pass `max_mb`)."""
    dst.mkdir(parents=True, exist_ok=True)
    shutil.copy(summary_path, dst / "summary.json")
    (dst / "table.txt").write_text(table)
    for attempt in (SUBFOLDERS, SUBFOLDERS[:-1]):
        with tarfile.open(dst / "run.tgz", "w:gz") as tar:
            for sub in attempt + ["ood_prompts.txt", "temperature.txt"]:  # the pins: a resumed copy keeps its traffic
                if (out / sub).exists():
                    tar.add(out / sub, arcname=sub)
        if (dst / "run.tgz").stat().st_size <= max_mb * 2**20:
            return
    (dst / "run.tgz").unlink()
    (dst / "run_not_exported.txt").write_text(f"run.tgz passed {max_mb} MiB even without timing/; "
                                              f"the files stay in {out}\n")
