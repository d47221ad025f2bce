"""The policy's log-probabilities with the prompt prefix that a micro-batch shares computed once.

Every rollout's prompt opens with the same instructions (about 270 tokens of the search_r1 prompt), and the rollouts
of one group share the whole question as well; a rollout's completion is about as long again. TRL's forward and
backward passes run every row's prompt in full, so on a CPU, where training a large step costs several times its
generation, about half the compute of an RL step goes to recomputing one prefix. Here the longest prefix that every
row of the micro-batch shares is run once (batch 1, with gradients), its keys and values are broadcast to the rows,
and only each row's remainder (the rest of its prompt and its completion) is run against them. Gradients flow back
through the broadcast into the one prefix pass, so the loss and the update are those of the full pass up to float
rounding (tests/test_shared_prefix.py compares both).

Positions: TRL left-pads prompts and lets positions count the padding; here each row is re-laid without its padding
(prefix, then the rest, then right padding). Rotary attention depends only on the distance between tokens, so the
scores are the same.
"""

from __future__ import annotations

from contextlib import nullcontext

import torch

from searchrl.rollout.kv_batch import cache_keyword, peft_base

MIN_SHARED_PREFIX = 16  # below this the second model call costs more than the prefix saves


def shared_prefix_length(input_ids: torch.Tensor, attention_mask: torch.Tensor, prompt_width: int) -> int:
    """Tokens at the start of every row's unpadded prompt that all rows share, at most the shortest prompt minus
    one (the last prompt token must stay in each row's remainder: its output predicts the first completion token).
    0 when the prompt area is not left-padded (padding after a real token)."""
    prompt_mask = attention_mask[:, :prompt_width]
    lengths = prompt_mask.sum(dim=1)
    starts = prompt_width - lengths
    columns = torch.arange(prompt_width, device=input_ids.device)
    if not torch.equal(prompt_mask.bool(), columns.unsqueeze(0) >= starts.unsqueeze(1)):
        return 0
    shortest = int(lengths.min())
    if shortest < 2:
        return 0
    index = starts.unsqueeze(1) + torch.arange(shortest, device=input_ids.device).unsqueeze(0)
    heads = input_ids.gather(1, index)  # (B, shortest): each row's first real prompt tokens
    differs = (heads != heads[:1]).any(dim=0).nonzero()
    common = int(differs[0]) if len(differs) else shortest
    return min(common, shortest - 1)


def _backbone(model):
    """The decoder stack under the LM head (what TRL's fused head runs), through a PEFT wrapper if there is one."""
    return peft_base(model).base_model


def _dynamic_cache(model):
    from transformers import DynamicCache
    from transformers.cache_utils import DynamicLayer

    cache = DynamicCache(config=peft_base(model).config)
    # Only plain full-attention layers broadcast by a view; sliding windows and other layouts keep TRL's path.
    if not cache.layers or any(type(layer) is not DynamicLayer for layer in cache.layers):
        return None
    return cache


def shared_prefix_logps(model, input_ids: torch.Tensor, attention_mask: torch.Tensor, logits_to_keep: int, *,
                        compute_entropy: bool = False, autocast=None, min_prefix: int = MIN_SHARED_PREFIX):
    """Per-token log-probabilities (and entropies) of the last `logits_to_keep` columns, as TRL's
    `_get_per_token_logps_and_entropies` returns them for one chunk (0 where the attention mask is 0), or None when
    the rows share fewer than `min_prefix` prompt tokens or the model's cache cannot be broadcast (the caller then
    runs TRL's own pass). `model` must carry TRL's fused LM head (`fused_lm_head=True`)."""
    rows, width = input_ids.shape
    prompt_width = width - logits_to_keep
    shared = shared_prefix_length(input_ids, attention_mask, prompt_width)
    if shared < min_prefix:
        return None
    cache = _dynamic_cache(model)
    if cache is None:
        return None
    device = input_ids.device
    starts = prompt_width - attention_mask[:, :prompt_width].sum(dim=1)
    rest = (prompt_width - starts - shared).tolist()  # prompt tokens after the prefix, per row (>= 1)
    suffix_width = max(rest) + logits_to_keep
    suffix_ids = torch.zeros((rows, suffix_width), dtype=input_ids.dtype, device=device)
    suffix_mask = torch.zeros((rows, suffix_width), dtype=attention_mask.dtype, device=device)
    labels = torch.full((rows, suffix_width), -100, dtype=input_ids.dtype, device=device)
    completion = input_ids[:, prompt_width:]
    completion_mask = attention_mask[:, prompt_width:]
    for i, n in enumerate(rest):
        begin = int(starts[i]) + shared
        suffix_ids[i, :n + logits_to_keep] = input_ids[i, begin:]
        suffix_mask[i, :n + logits_to_keep] = attention_mask[i, begin:]
        labels[i, n:n + logits_to_keep] = completion[i].masked_fill(completion_mask[i] == 0, -100)
    prefix = input_ids[:1, starts[0]:starts[0] + shared]
    keyword = cache_keyword(model)
    with autocast if autocast is not None else nullcontext():
        _backbone(model)(input_ids=prefix, attention_mask=torch.ones_like(prefix), use_cache=True,
                         **{keyword: cache})
        if cache.get_seq_length() != shared:  # e.g. gradient checkpointing drops the cache in training
            return None
        for layer in cache.layers:  # one prefix for every row: a broadcast view, whose backward sums the rows
            layer.keys = layer.keys.expand(rows, -1, -1, -1)
            layer.values = layer.values.expand(rows, -1, -1, -1)
        full_mask = torch.cat([torch.ones((rows, shared), dtype=attention_mask.dtype, device=device), suffix_mask],
                              dim=1)
        outputs = model(input_ids=suffix_ids, attention_mask=full_mask, labels=labels, fused_lm_head=True,
                        **{keyword: cache})
    # log_probs[:, t] scores suffix token t + 1: row i's completion starts at suffix column rest[i]
    index = (torch.tensor(rest, device=device) - 1).unsqueeze(1) + torch.arange(logits_to_keep, device=device)
    logps = outputs.log_probs.gather(1, index)
    entropies = outputs.entropy.gather(1, index) if compute_entropy else None
    return logps, entropies


__all__ = ["MIN_SHARED_PREFIX", "shared_prefix_length", "shared_prefix_logps"]
