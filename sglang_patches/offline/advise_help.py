"""What `sglang-patches advise --help` explains: its table's columns, and SGLang's server flags a user
may pass to advise with what it takes instead (cliargs.OneLineParser names them in its one-line error)."""
from __future__ import annotations

COLUMNS = (
    ("config", "the chain: s<steps>_k<topk>_n<draft tokens>"),
    ("steps", "--speculative-num-steps of the chain"),
    ("draft tok", "draft tokens verified per request (steps + 1 at topk 1)"),
    ("accept len", "predicted accept length: tokens per request-cycle, accepted drafts + 1 bonus token"),
    ("acc 95 %", "range of accept len another sample of the same traffic could give (bootstrap over the log's "
                 "requests; only where the log follows them)"),
    ("trunc acc", "accept length from the logged cycles truncated to the chain (shown beside a span replay)"),
    ("cycle ms", "GPU ms from one cycle's start to the next: medians over all logged cycles of each batch size "
                 "(phases and gap), with the chain's phase changes"),
    ("tok/s", "tokens per second of the whole batch over the logged batch-size mix"),
    ("tok/s/req", "tokens per second of one request"),
    ("x plain", "tok/s divided by plain decode's over the same batch mix (needs a baseline)"),
    ("break-even acc", "the accept length at which the chain equals plain decode (needs a baseline; '< 1': the "
                       "baseline contradicts the log)"),
    ("break-even step ms", "without a baseline: the plain decode step time above which the chain wins"),
    ("note", "how accept len was found: logged / replayed / truncated / extrapolated"),
)


SGLANG_SPELLINGS = {  # SGLang's flags a user may pass here, and what advise takes instead
    "--speculative-num-steps": "here --steps LIST names the chains to price (e.g. --steps 2,3,5), or --max-steps N",
    "--speculative-num-draft-tokens": "advise prices topk-1 chains (draft tokens = steps + 1): give --steps LIST",
    "--speculative-eagle-topk": "advise prices topk-1 chains only: drop it",
    "--speculative-adaptive": "--adaptive-config OUT.json writes a config for it from the log",
    "--speculative-adaptive-config": "--adaptive-config OUT.json writes one from the log",
}
