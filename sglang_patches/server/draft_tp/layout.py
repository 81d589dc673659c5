"""Draft tensor-parallel layout: pure functions, no torch.distributed, no SGLang import.

The target runs at TP N; the drafter runs replicated on groups of K ranks (K | N; K = 1: every rank
drafts alone). This module answers, for the launcher, the tests and the 0.5.17 patch:

- which draft groups exist and in which order every rank must create them
  (`torch.distributed.new_group` is collective over the whole world: every rank calls it for every
  group, in the same order, also for groups it is not in; GroupCoordinator.__init__ loops over all
  group_ranks calling new_group, parallel_state.py:311-382 in 0.5.17);
- which group a rank is in and its rank within it;
- how the target's vocab-parallel embedding / lm_head shards become the full matrix a TP-K drafter
  needs (gather, strip the padding, re-pad and re-shard for K), and what that costs in memory.

Vocab padding mirrors sglang 0.5.17 `layers/vocab_parallel_embedding.py`: `pad_vocab_size` (:58,
pad to a multiple of DEFAULT_VOCAB_PADDING_SIZE = 64, :48), the CPU-only rule multiplying the padding
by tp_size when the padded vocab is not divisible by it (:262-266), and contiguous row shards of
`num_embeddings_padded / tp_size` rows per rank (:316-321, `vocab_range_from_global_vocab_size` :71).
With no added (LoRA) embeddings, rank r holds rows [r*P, (r+1)*P) of the padded matrix, so the
concatenation of all shards in rank order IS the padded full matrix.
"""
from __future__ import annotations

import dataclasses

DEFAULT_VOCAB_PADDING_SIZE = 64  # vocab_parallel_embedding.py:48 (0.5.17)
ALGORITHMS = ("EAGLE", "EAGLE3")


# ---------------------------------------------------------------- validation

def size_error(k: int, tp_size: int) -> str | None:
    """One-line reason why K cannot split a TP-N target, or None."""
    if not isinstance(k, int) or k < 1:
        return f"--draft-tp-size {k}: must be a positive integer (1 = every rank drafts alone)"
    if tp_size < 1:
        return f"--tp-size {tp_size}: must be a positive integer"
    if k > tp_size:
        return (f"--draft-tp-size {k} is larger than --tp-size {tp_size}; the drafter cannot use more "
                f"GPUs than the target; use a divisor of {tp_size}")
    if tp_size % k:
        divisors = ", ".join(str(d) for d in range(1, tp_size + 1) if tp_size % d == 0)
        return f"--draft-tp-size {k} does not divide --tp-size {tp_size}; use one of {divisors}"
    return None


def validation_error(k: int | None, tp_size: int = 1, algorithm: str | None = None,
                     dp_attention: bool = False, pp_size: int = 1) -> str | None:
    """One-line reason why `--draft-tp-size k` cannot be used, or None when it can."""
    if k is None:
        return None
    err = size_error(k, tp_size)
    if err:
        return err
    if algorithm is None or algorithm.upper() not in ALGORITHMS:
        return (f"--draft-tp-size needs --speculative-algorithm EAGLE or EAGLE3 (got {algorithm}); "
                "the overlay only re-groups the EAGLE draft worker")
    if dp_attention and k > 1:
        return ("--draft-tp-size >1 with --enable-dp-attention is not supported (SGLang already runs the "
                "EAGLE3 drafter on the attention-TP group there); drop one of them")
    if pp_size != 1:
        return f"--draft-tp-size with --pp-size {pp_size} is not supported (SGLang spec workers do not support PP)"
    return None


# ---------------------------------------------------------------- groups

def draft_groups(world_size: int, k: int, tp_size: int | None = None) -> list[list[int]]:
    """All draft groups, in the order EVERY rank must create them.

    The world is split into target TP groups of `tp_size` consecutive ranks (SGLang's layout with
    pp_size = 1: `initialize_model_parallel` builds TP groups [i*N, (i+1)*N), parallel_state.py:2290-2304); each is split into
    consecutive blocks of K. K=1 at N=2: [[0], [1]]; K=2 at N=4: [[0, 1], [2, 3]]."""
    tp_size = world_size if tp_size is None else tp_size
    err = size_error(k, tp_size)
    if err:
        raise ValueError(err)
    if world_size % tp_size:
        raise ValueError(f"world size {world_size} is not a multiple of the TP size {tp_size}")
    return [list(range(start, start + k)) for start in range(0, world_size, k)]


@dataclasses.dataclass(frozen=True)
class Membership:
    index: int                 # which group (position in draft_groups)
    ranks: tuple[int, ...]     # global ranks of that group
    rank_in_group: int         # this rank's position in it (its draft tp_rank)

    @property
    def size(self) -> int:
        return len(self.ranks)


def membership(rank: int, world_size: int, k: int, tp_size: int | None = None) -> Membership:
    groups = draft_groups(world_size, k, tp_size)
    for i, ranks in enumerate(groups):
        if rank in ranks:
            return Membership(i, tuple(ranks), ranks.index(rank))
    raise ValueError(f"rank {rank} is not in a world of size {world_size}")


def describe(rank: int, world_size: int, k: int, tp_size: int | None = None) -> str:
    m = membership(rank, world_size, k, tp_size)
    return (f"drafter on draft group {m.index} ranks {list(m.ranks)} (draft tp_size={m.size}, "
            f"draft tp_rank={m.rank_in_group}); target TP group of {tp_size or world_size}")


# ---------------------------------------------------------------- vocab shards

def pad_vocab_size(vocab_size: int, pad_to: int = DEFAULT_VOCAB_PADDING_SIZE) -> int:
    """vocab_parallel_embedding.py:58."""
    return ((vocab_size + pad_to - 1) // pad_to) * pad_to


def padded_vocab(org_vocab: int, tp_size: int, padding: int = DEFAULT_VOCAB_PADDING_SIZE,
                 cpu: bool = False) -> int:
    """`num_embeddings_padded` of a VocabParallelEmbedding built at `tp_size` (no added vocab)."""
    if cpu and pad_vocab_size(org_vocab, padding) % tp_size:
        padding *= tp_size  # vocab_parallel_embedding.py:262-266, CPU only
    padded = pad_vocab_size(org_vocab, padding)
    if padded % tp_size:
        raise ValueError(f"padded vocab {padded} is not divisible by tp_size {tp_size} "
                         "(SGLang's divide() would assert too)")
    return padded


@dataclasses.dataclass(frozen=True)
class GatherPlan:
    """How the target's TP-N shards become this rank's TP-K drafter weight."""
    org_vocab: int
    hidden: int
    tp_size: int
    k: int
    rank_in_group: int
    shard_rows: int            # rows per target shard (= padded_n / N)
    padded_n: int              # target's padded vocab
    padded_k: int              # drafter's padded vocab at TP K
    full_shape: tuple[int, int]    # after all-gather: (padded_n, hidden)
    strip: slice               # rows of the gathered matrix that are real vocab: [0, org_vocab)
    keep: slice                # rows of the re-padded (padded_k) matrix this rank keeps
    kept_shape: tuple[int, int]

    def gathered_bytes(self, dtype_bytes: int) -> int:
        """Transient memory of the all-gather output on every rank."""
        return self.full_shape[0] * self.full_shape[1] * dtype_bytes

    def extra_bytes(self, dtype_bytes: int) -> int:
        """Memory the drafter's weight adds per rank over sharing the target's shard."""
        return (self.kept_shape[0] - self.shard_rows) * self.hidden * dtype_bytes


def gather_plan(shard_shape: tuple[int, int], tp_size: int, org_vocab: int, k: int = 1,
                rank_in_group: int = 0, padding: int = DEFAULT_VOCAB_PADDING_SIZE,
                cpu: bool = False) -> GatherPlan:
    rows, hidden = int(shard_shape[0]), int(shard_shape[1])
    padded_n = padded_vocab(org_vocab, tp_size, padding, cpu)
    if rows * tp_size != padded_n:
        raise ValueError(f"target shard has {rows} rows x {tp_size} ranks = {rows * tp_size}, expected the "
                         f"padded vocab {padded_n} (vocab {org_vocab}, padding {padding}); is it vocab-parallel?")
    if not 0 <= rank_in_group < k:
        raise ValueError(f"rank_in_group {rank_in_group} not in [0, {k})")
    padded_k = padded_vocab(org_vocab, k, padding, cpu)
    per_k = padded_k // k
    keep = slice(rank_in_group * per_k, (rank_in_group + 1) * per_k)
    return GatherPlan(org_vocab=org_vocab, hidden=hidden, tp_size=tp_size, k=k, rank_in_group=rank_in_group,
                      shard_rows=rows, padded_n=padded_n, padded_k=padded_k, full_shape=(padded_n, hidden),
                      strip=slice(0, org_vocab), keep=keep, kept_shape=(per_k, hidden))


def reshard(full, plan: GatherPlan):
    """Gathered padded (padded_n, H) matrix -> this rank's (padded_k / K, H) rows (padding zeroed).

    When the TP-N and TP-K paddings agree and K = 1, this is `full` itself (no copy)."""
    import torch

    if tuple(full.shape) != plan.full_shape:
        raise ValueError(f"gathered weight has shape {tuple(full.shape)}, plan expects {plan.full_shape}")
    if plan.k == 1 and plan.padded_k == plan.padded_n:
        return full
    real = full[plan.strip]
    if plan.padded_k > plan.org_vocab:
        pad = torch.zeros((plan.padded_k - plan.org_vocab, plan.hidden), dtype=full.dtype, device=full.device)
        real = torch.cat([real, pad], dim=0)
    return real[plan.keep].contiguous()


def fmt_bytes(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.2f} {unit}"
        n /= 1024
    return f"{n:.2f} GiB"
