"""Verify-step tensors for the simulated-acceptance tests (test_simulate.py, test_simulate_hooks.py):
what SGLang's eagle_sample hands to its simulation for a topk-1 chain, random but seeded."""
from __future__ import annotations

import torch


def verify_state(bs, steps, seed=0):
    """Tensors as eagle_sample hands them to the simulation (topk 1 chain: dt = steps + 1)."""
    g = torch.Generator().manual_seed(seed)
    dt = steps + 1
    accept_index = torch.full((bs, dt), -1, dtype=torch.int32)
    accept_index[:, 0] = torch.arange(bs, dtype=torch.int32) * dt   # the root of each request's chain
    predict = torch.randint(0, 32000, (bs * dt,), generator=g, dtype=torch.int32)
    candidates = torch.randint(0, 32000, (bs, dt), generator=g, dtype=torch.int64)
    target_predict = torch.randint(0, 32000, (bs, dt), generator=g, dtype=torch.int64)
    num_correct_drafts = torch.full((bs,), 7, dtype=torch.int32)
    return accept_index, predict, num_correct_drafts, candidates, target_predict
