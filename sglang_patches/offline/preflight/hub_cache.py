"""A model argument as SGLang takes it (a local directory or a Hugging Face hub id) -> a local
checkpoint directory, through the local Hugging Face cache only: never the network.

The cache is `HF_HUB_CACHE`, else `HF_HOME/hub`, else `XDG_CACHE_HOME/huggingface/hub`, else
`~/.cache/huggingface/hub` (huggingface_hub's own order). A hub id `org/name` lives there as
`models--org--name/`: `refs/<revision>` holds a commit hash and `snapshots/<commit>/` the files
(links into `blobs/`). The revision is `main` unless given (`--revision`,
`--speculative-draft-model-revision`); a commit hash names its snapshot directly.
"""
from __future__ import annotations

import os
import re
from pathlib import Path

from sglang_patches.errors import UserError

HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*(/[A-Za-z0-9][\w.-]*)?$")


class NotCached(UserError):
    """A hub id that the local Hugging Face cache does not hold (the launcher goes on without preflight)."""


def hub_cache_dir() -> Path:
    env = os.environ
    if env.get("HF_HUB_CACHE"):
        return Path(env["HF_HUB_CACHE"]).expanduser()
    if env.get("HF_HOME"):
        return Path(env["HF_HOME"]).expanduser() / "hub"
    base = Path(env["XDG_CACHE_HOME"]).expanduser() if env.get("XDG_CACHE_HOME") else Path.home() / ".cache"
    return base / "huggingface" / "hub"


def looks_like_hub_id(text: str) -> bool:
    return bool(HUB_ID.match(text)) and ".." not in text


def looks_local(text: str) -> bool:
    """A path the user meant as a local directory: absolute, `./`, `../` or `~`-led, or its first
    component is a directory here (`l8b/nope` beside a built `l8b/`). Such a path is never looked up
    as a hub id, so a typo in it is named as a missing directory, not a missing download."""
    if text.startswith(("/", "./", "../", "~")) or text in (".", ".."):
        return True
    first = text.split("/", 1)[0]
    return "/" in text and os.path.isdir(first)


def no_such_directory(text: str, role: str) -> UserError:
    """One line for a local path that does not exist, naming its nearest existing parent (what is
    there to fix the typo against)."""
    label = f"{role} model path {text!r}: no such directory"
    path = Path(text)
    parent = next((p for p in path.parents if os.path.lexists(p)), None)
    if text.startswith("~"):
        full = Path(text).expanduser()
        return UserError(f"{label} (a quoted `~` is not expanded, here or by SGLang); pass the full path"
                         + (f" {full}" if full.exists() else ""))
    if parent is None:
        return UserError(f"{label}; check the path")
    missing = path.relative_to(parent).as_posix()
    where = "the current directory" if str(parent) == "." else f"{parent.as_posix().rstrip('/')}/"
    if not parent.is_dir():
        return UserError(f"{label} ({where.rstrip('/')} is a file, not a directory); check the path")
    return UserError(f"{label} ({missing} does not exist in {where}, its nearest existing parent); check the path")


# What preflight reads of each model: the target's config.json; the drafter's config.json (and an
# index) and its weight files, whose headers give the shapes (a head is one layer: a few GB at most).
# `hf download REPO FILE...` with two or more names takes them as glob patterns. Safetensors only: a
# repo that ships both formats would be downloaded twice with '*.bin' too; whether it ships
# safetensors is not known offline, so the hint says when to add '*.bin' (BIN_ONLY).
READS = {"target": ("config.json",), "drafter": ("*.json", "*.safetensors")}
BIN_ONLY = "add '*.bin' if it ships no safetensors"


def download_hint(text: str, role: str, revision: str | None = None) -> str:
    """The `hf download` command that fetches only what preflight reads of `text`, never a target's
    weights (a Kimi-K2 target is about 1 TB; its config.json a few KB)."""
    names = " ".join(f"'{n}'" if "*" in n else n for n in READS.get(role, READS["target"]))
    rev = f" --revision {revision}" if revision else ""
    what = "its config.json only" if role != "drafter" else f"the head's config and weights; {BIN_ONLY}"
    return f"`hf download {text} {names}{rev}`: {what}"


def resolve_model(text: str, role: str, revision: str | None = None) -> tuple[str, str | None]:
    """(local directory, a note saying where it came from or None). A path that exists is returned
    as given (read_model_info then checks it); a hub id is looked up in the cache; anything else is
    returned as given, so the reader names what is missing."""
    text = os.fspath(text)
    if os.path.lexists(text) or not looks_like_hub_id(text):
        return text, None
    if looks_local(text):
        raise no_such_directory(text, role)
    cache = hub_cache_dir()
    repo = cache / ("models--" + text.replace("/", "--"))
    where = f"the Hugging Face cache {cache} (HF_HUB_CACHE / HF_HOME)"
    fetch = (f"download what preflight reads ({download_hint(text, role, revision)}), point HF_HUB_CACHE or "
             "HF_HOME at the cache that holds it, or pass a local directory")
    if not repo.is_dir():
        raise NotCached(f"{role} model {text!r} is not a local directory and not in {where}; {fetch}")
    rev = revision or "main"
    snapshot = None
    ref = repo / "refs" / rev
    if ref.is_file():
        try:
            commit = ref.read_text(encoding="utf-8").strip()
        except (OSError, UnicodeDecodeError) as err:
            raise UserError(f"{role} model {text!r}: cannot read {ref} ({err})") from None
        snapshot = repo / "snapshots" / commit
    elif (repo / "snapshots" / rev).is_dir():  # a commit hash
        snapshot = repo / "snapshots" / rev
    else:
        snaps = sorted(p for p in (repo / "snapshots").glob("*") if p.is_dir()) if revision is None else []
        if len(snaps) == 1:  # no ref written (a download by commit): its one snapshot
            snapshot = snaps[0]
    if snapshot is None or not snapshot.is_dir():
        raise NotCached(f"{role} model {text!r}: revision {rev!r} is not in {where} ({repo}); {fetch}")
    if not (snapshot / "config.json").exists():
        raise NotCached(f"{role} model {text!r}: the cached snapshot {snapshot} has no config.json (a partial "
                        f"download); {fetch}")
    return str(snapshot), f"{role} {text} (revision {rev}): {snapshot} in the local Hugging Face cache"
