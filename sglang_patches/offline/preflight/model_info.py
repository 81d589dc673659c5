"""Read the `config.json` of a target or drafter checkpoint directory into a small dataclass.

Only plain JSON is read (no `transformers`, no remote code). Multimodal / Kimi-K2.5-style configs
keep the language model's sizes under `text_config` (or `language_config` / `llm_config`); those are
used when the top level lacks `hidden_size`. Unusable input raises `UserError` (exit 2).
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sglang_patches.errors import UserError

NESTED_TEXT_KEYS = ("text_config", "language_config", "llm_config")


@dataclass(frozen=True)
class ModelInfo:
    path: str
    role: str  # "target" or "drafter"
    architectures: tuple[str, ...]
    model_type: str | None
    hidden_size: int
    num_hidden_layers: int
    vocab_size: int | None
    draft_vocab_size: int | None = None
    target_hidden_size: int | None = None
    num_aux_hidden_states: int | None = None
    # eagle_config.eagle_aux_hidden_state_layer_ids as given (None when absent). SGLang's target
    # reads only this key; it captures the input of layer id+1 (see rules.capture_indices).
    aux_layer_ids: tuple[int, ...] | None = None
    # A top-level `eagle_aux_hidden_state_layer_ids` (read by the Kimi MLA drafter, not by the target).
    toplevel_aux_layer_ids: tuple[int, ...] | None = None
    use_aux_hidden_state: bool = True
    has_eagle_config: bool = False
    tie_word_embeddings: bool = False
    text_config_key: str | None = None  # which nested key the sizes came from, if any
    raw: dict = field(default_factory=dict, repr=False, compare=False)

    @property
    def arch(self) -> str:
        return self.architectures[0] if self.architectures else (self.model_type or "unknown")

    def eagle3_evidence(self, has_fc_weight: bool = False) -> list[str]:
        """Why this drafter looks like an EAGLE-3 head (empty list: it does not)."""
        why = []
        if any("eagle3" in a.lower() for a in self.architectures):
            why.append(f"architecture {self.arch}")
        if has_fc_weight:
            why.append("an fc weight in the checkpoint")
        if self.has_eagle_config:
            why.append("eagle_config")
        if self.draft_vocab_size is not None:
            why.append("draft_vocab_size")
        if self.target_hidden_size is not None:
            why.append("target_hidden_size")
        return why

    def looks_eagle3(self, has_fc_weight: bool = False) -> bool:
        return bool(self.eagle3_evidence(has_fc_weight))


def _load_config(path: Path, role: str, text: str) -> dict:
    """`text`: the path as given (Path drops a leading `./`, which marks it local)."""
    label = f"{role} model path {str(path)!r}"
    if not path.exists():
        from sglang_patches.offline.preflight.hub_cache import (download_hint, looks_like_hub_id, looks_local,
                                                                 no_such_directory)

        if looks_local(text) or not looks_like_hub_id(text):
            raise no_such_directory(text, role)
        raise UserError(f"{label} does not exist; preflight reads local directories only: download what it "
                        f"reads first ({download_hint(text, role)}; add --local-dir DIR)")
    if not path.is_dir():
        raise UserError(f"{label} is not a directory (pass the checkpoint folder that holds config.json)")
    if not os.access(path, os.R_OK | os.X_OK):
        raise UserError(f"{label} is not readable (permission denied)")
    cfg_path = path / "config.json"
    try:
        text = cfg_path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise UserError(f"{label} has no config.json; pass a Hugging Face checkpoint directory") from None
    except IsADirectoryError:
        raise UserError(f"{cfg_path} is a directory, not a JSON file") from None
    except PermissionError:
        raise UserError(f"{cfg_path} is not readable (permission denied)") from None
    except UnicodeDecodeError:
        raise UserError(f"{cfg_path} is not UTF-8 text") from None
    except OSError as err:
        raise UserError(f"cannot read {cfg_path} ({err.strerror or err})") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as err:
        raise UserError(f"{cfg_path} is not valid JSON ({err.msg} at line {err.lineno} column {err.colno})") from None
    except RecursionError:
        raise UserError(f"{cfg_path} is nested too deeply to be a model config") from None
    if not isinstance(data, dict):
        raise UserError(f"{cfg_path} must hold a JSON object, not a {type(data).__name__}")
    return data


def _int_field(cfg: dict, key: str, cfg_path: Path, required: bool, prefix: str = "") -> int | None:
    value = cfg.get(key)
    if value is None:
        if required:
            raise UserError(f"{cfg_path} lacks {prefix}{key}; preflight needs it to check hidden-state widths")
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise UserError(f"{cfg_path}: {prefix}{key} must be a positive integer, got {value!r}")
    return value


def _id_list(value: Any, cfg_path: Path, key: str) -> tuple[int, ...] | None:
    if value is None:
        return None
    if not isinstance(value, list) or not all(isinstance(v, int) and not isinstance(v, bool) for v in value):
        raise UserError(f"{cfg_path}: {key} must be a list of integer layer ids, got {value!r}")
    return tuple(value)


def read_model_info(path: str | os.PathLike, role: str = "target") -> ModelInfo:
    """Parse `<path>/config.json`. `role` only labels error messages ("target" / "drafter")."""
    text = os.fspath(path)
    path = Path(path)
    cfg = _load_config(path, role, text)
    cfg_path = path / "config.json"

    sizes, text_key, prefix = cfg, None, ""
    if "hidden_size" not in cfg:
        for key in NESTED_TEXT_KEYS:
            if isinstance(cfg.get(key), dict) and "hidden_size" in cfg[key]:
                sizes, text_key, prefix = cfg[key], key, f"{key}."
                break
    hidden = _int_field(sizes, "hidden_size", cfg_path, True, prefix)
    layers = _int_field(sizes, "num_hidden_layers", cfg_path, True, prefix)
    vocab = _int_field(sizes, "vocab_size", cfg_path, False, prefix)
    if vocab is None and text_key is None:
        vocab = next((_int_field(cfg[k], "vocab_size", cfg_path, False, f"{k}.") for k in NESTED_TEXT_KEYS
                      if isinstance(cfg.get(k), dict) and cfg[k].get("vocab_size") is not None), None)

    archs = cfg.get("architectures") or []
    if isinstance(archs, str):
        archs = [archs]
    if not isinstance(archs, list) or not all(isinstance(a, str) for a in archs):
        raise UserError(f"{cfg_path}: architectures must be a list of class names, got {archs!r}")

    eagle_cfg = cfg.get("eagle_config")
    if eagle_cfg is not None and not isinstance(eagle_cfg, dict):
        raise UserError(f"{cfg_path}: eagle_config must be an object, got {type(eagle_cfg).__name__}")
    eagle_cfg = eagle_cfg or {}
    use_aux = eagle_cfg.get("use_aux_hidden_state", True)
    if not isinstance(use_aux, bool):
        raise UserError(f"{cfg_path}: eagle_config.use_aux_hidden_state must be true or false, got {use_aux!r}")

    return ModelInfo(
        path=str(path),
        role=role,
        architectures=tuple(archs),
        model_type=cfg.get("model_type") if isinstance(cfg.get("model_type"), str) else None,
        hidden_size=hidden,
        num_hidden_layers=layers,
        vocab_size=vocab,
        draft_vocab_size=_int_field(cfg, "draft_vocab_size", cfg_path, False),
        target_hidden_size=_int_field(cfg, "target_hidden_size", cfg_path, False),
        num_aux_hidden_states=_int_field(cfg, "num_aux_hidden_states", cfg_path, False),
        aux_layer_ids=_id_list(eagle_cfg.get("eagle_aux_hidden_state_layer_ids"), cfg_path,
                               "eagle_config.eagle_aux_hidden_state_layer_ids"),
        toplevel_aux_layer_ids=_id_list(cfg.get("eagle_aux_hidden_state_layer_ids"), cfg_path,
                                        "eagle_aux_hidden_state_layer_ids"),
        use_aux_hidden_state=use_aux,
        has_eagle_config=bool(eagle_cfg),
        tie_word_embeddings=bool(cfg.get("tie_word_embeddings", False)),
        text_config_key=text_key,
        raw=cfg,
    )
