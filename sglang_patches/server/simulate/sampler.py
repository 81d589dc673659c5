"""Draw per-request accepted-draft counts from a chain of conditional rates, and write a verify
result the way SGLang's own `SGLANG_SIMULATE_ACC_LEN` simulation does, but per request.

Every request-cycle draws independently: S uniforms u_k on the device (a device-side generator, so
no host round trip and no synchronization); draft k is accepted when u_k < c_k and 0..k-1 were, so
the accepted count is the length of the leading run of accepted positions (cumprod, then sum).

`ChainSampler.write_verify_result` writes exactly the tensors that SGLang 0.5.17's
`spec_utils.generate_simulated_accept_index` writes, with accept length n_i per request instead of
one n for the batch:
- returns a new int32 `(bs, spec_steps + 1)` accept index: row i is `accept_index[i, 0] + 0..n_i-1`,
  then -1;
- `num_correct_drafts[i] = n_i - 1` (in place);
- token mode "fixed": `predict.fill_(100)` (SGLang's "some legit token id");
  token mode "real-draft-token": `predict[first_i + j] = candidates[i, 1 + j]` for j < n_i - 1 and
  `predict[first_i + n_i - 1] = target_predict[i, n_i - 1]`; other entries keep their values.
The chain layout (row i's nodes at `accept_index[i, 0] + j`) is topk 1's, which SGLang's simulation
assumes too; topk > 1 is refused before the server starts (see `checks.py`).

Rates, column ids and the uniforms' scratch are allocated once per device (the scratch grows only
with the batch). The returned accept index is a fresh tensor each cycle, as SGLang's is: the caller
keeps it past the next cycle's launch under the overlap scheduler, so it must not be a reused buffer.
"""
from __future__ import annotations

import torch

FIXED_TOKEN = 100  # SGLang's spec_utils: `predict.fill_(100)  # some legit token id`
TOKEN_MODES = ("fixed", "real-draft-token")


class ChainSampler:
    def __init__(self, rates: list[float], steps: int, device, seed: int = 0):
        if len(rates) > steps:
            raise ValueError(f"{len(rates)} rates for {steps} draft steps")
        self.steps = steps
        self.device = torch.device(device)
        padded = list(rates) + [0.0] * (steps - len(rates))
        self.rates = torch.tensor(padded, dtype=torch.float32, device=self.device)
        self.cols = torch.arange(steps + 1, dtype=torch.int32, device=self.device).view(1, -1)
        self.generator = torch.Generator(device=self.device)
        self.generator.manual_seed(seed)
        self._uniform = torch.empty((0, steps), dtype=torch.float32, device=self.device)

    def draw(self, bs: int) -> torch.Tensor:
        """(bs,) int32 accepted-draft counts, one independent chain per request."""
        if self._uniform.shape[0] < bs:
            self._uniform = torch.empty((max(bs, 2 * self._uniform.shape[0]), self.steps),
                                        dtype=torch.float32, device=self.device)
        u = self._uniform[:bs]
        u.uniform_(0.0, 1.0, generator=self.generator)
        accepted = (u < self.rates).to(torch.int32)
        return accepted.cumprod(dim=1).sum(dim=1, dtype=torch.int32)

    def write_verify_result(self, *, accept_index: torch.Tensor, predict: torch.Tensor,
                            num_correct_drafts: torch.Tensor, candidates: torch.Tensor,
                            target_predict: torch.Tensor | None, bs: int, spec_steps: int,
                            token_mode: str) -> torch.Tensor:
        if spec_steps != self.steps:
            raise ValueError(f"sampler built for {self.steps} steps, verify has {spec_steps}")
        if token_mode not in TOKEN_MODES:
            raise ValueError(f"token mode {token_mode!r} is not one of {TOKEN_MODES}")
        drafts = self.draw(bs)
        n = (drafts + 1).view(-1, 1)                       # accept length per request
        first = accept_index[:, 0].view(-1, 1)
        nodes = first + self.cols                          # (bs, steps + 1) chain node ids, int32
        sim_accept_index = torch.where(self.cols < n, nodes, -1)
        num_correct_drafts.copy_(drafts)
        if token_mode == "fixed":
            predict.fill_(FIXED_TOKEN)
            return sim_accept_index
        steps = self.steps
        # Value of node j: the draft token j + 1 for j < n - 1, the target's token j for j = n - 1.
        drafted = torch.cat([candidates[:, 1:steps + 1], candidates[:, :1]], dim=1)  # last column unused
        values = torch.where(self.cols < n - 1, drafted, target_predict[:, :steps + 1]).to(predict.dtype)
        idx = nodes.long()
        predict[idx] = torch.where(self.cols < n, values, predict[idx])
        return sim_accept_index
