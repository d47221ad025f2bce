"""A batch KV cache with holes: the data structure under `kv_turns`.

Column j of row r is either one of r's real tokens or a hole (mask 0) that attention never reads; position ids
count real tokens only, so a row's keys and values are those of its contiguous sequence wherever they sit. That
lets finished rows be split off mid-turn and merged back later (the narrower side padded with hole columns)
without recomputing anything.
"""

from __future__ import annotations

import inspect
from functools import cache

import torch


class KVBatch:
    """Cache, mask (B, columns), next position per row (B,), and `rows`: which rollout row each batch row is."""

    def __init__(self, cache, mask: torch.Tensor, pos: torch.Tensor, rows: list[int], pad_id: int,
                 keep_last: bool):
        self.cache, self.mask, self.pos, self.rows = cache, mask, pos, list(rows)
        self.pad_id, self.keep_last = pad_id, keep_last

    @classmethod
    def empty(cls, model, rows: list[int], device, pad_id: int, keep_last: bool) -> KVBatch:
        from transformers import DynamicCache

        mask = torch.zeros((len(rows), 0), dtype=torch.long, device=device)
        pos = torch.zeros(len(rows), dtype=torch.long, device=device)
        return cls(DynamicCache(config=model.config), mask, pos, rows, pad_id, keep_last)

    @property
    def layers(self):
        return self.cache.layers

    # ---- model calls -------------------------------------------------------------------------------------------

    def _forward(self, model, ids: torch.Tensor, cols: torch.Tensor, pos: torch.Tensor) -> torch.Tensor:
        self.mask = torch.cat([self.mask, cols], dim=1)
        kwargs = {"logits_to_keep": 1} if self.keep_last else {}
        kwargs[cache_keyword(model)] = self.cache
        out = model(input_ids=ids, attention_mask=self.mask, position_ids=pos, use_cache=True, **kwargs)
        return out.logits[:, -1].float()

    def prefill(self, model, suffixes: list[list[int]]) -> torch.Tensor:
        """Feed each row its own new tokens in one chunk, left-padded with holes; next-token logits per row."""
        device = self.mask.device
        width = max(len(s) for s in suffixes)
        ids = torch.full((len(suffixes), width), self.pad_id, dtype=torch.long)
        cols = torch.zeros((len(suffixes), width), dtype=torch.long)
        pos = self.pos.cpu().unsqueeze(1).repeat(1, width)
        for i, s in enumerate(suffixes):
            n = len(s)
            ids[i, width - n:] = torch.tensor(s)
            cols[i, width - n:] = 1
            pos[i, width - n:] += torch.arange(n)
        logits = self._forward(model, ids.to(device), cols.to(device), pos.to(device))
        self.pos = self.pos + torch.tensor([len(s) for s in suffixes], device=device)
        return logits

    def step(self, model, tokens: list[int], live: list[bool]) -> torch.Tensor:
        """One decode step: live rows feed their token, the others a hole."""
        device = self.mask.device
        feed = torch.tensor([t if ok else self.pad_id for t, ok in zip(tokens, live)], device=device)
        live_t = torch.tensor(live, dtype=torch.long, device=device)
        logits = self._forward(model, feed.unsqueeze(1), live_t.unsqueeze(1), self.pos.unsqueeze(1))
        self.pos = self.pos + live_t
        return logits

    # ---- reshaping ---------------------------------------------------------------------------------------------

    def keep(self, positions: list[int]) -> None:
        """Keep only these batch rows, in this order."""
        if positions == list(range(len(self.rows))):
            return
        idx = torch.tensor(positions, dtype=torch.long, device=self.mask.device)
        self.cache.batch_select_indices(idx)
        self.mask, self.pos = self.mask[idx], self.pos[idx]
        self.rows = [self.rows[j] for j in positions]

    def split_off(self, which: list[bool]) -> KVBatch:
        """Move the rows flagged in `which` into a new batch (returned); this one keeps the others."""
        from transformers import DynamicCache

        out_idx = [j for j, w in enumerate(which) if w]
        idx = torch.tensor(out_idx, dtype=torch.long, device=self.mask.device)
        cache = DynamicCache(ddp_cache_data=[(layer.keys[idx], layer.values[idx]) for layer in self.layers])
        other = KVBatch(cache, self.mask[idx], self.pos[idx], [self.rows[j] for j in out_idx], self.pad_id,
                        self.keep_last)
        self.keep([j for j, w in enumerate(which) if not w])
        return other

    def merge(self, other: KVBatch) -> None:
        """Append other's rows. The side with fewer columns gets hole columns on the right."""
        width = max(self.mask.size(1), other.mask.size(1))
        self.mask = torch.cat([_widen(self.mask, 1, width), _widen(other.mask, 1, width)])
        self.pos = torch.cat([self.pos, other.pos])
        for mine, theirs in zip(self.layers, other.layers):
            mine.keys = torch.cat([_widen(mine.keys, 2, width), _widen(theirs.keys, 2, width)])
            mine.values = torch.cat([_widen(mine.values, 2, width), _widen(theirs.values, 2, width)])
        self.rows = self.rows + list(other.rows)

    def sort_rows(self) -> None:
        self.keep(sorted(range(len(self.rows)), key=self.rows.__getitem__))

    def drop_unused_columns(self) -> None:
        """Remove the columns that are holes in every row (left by rows that have left the batch)."""
        used = self.mask.bool().any(dim=0)
        if bool(used.all()):
            return
        for layer in self.layers:
            layer.keys, layer.values = layer.keys[:, :, used], layer.values[:, :, used]
        self.mask = self.mask[:, used]


def _widen(x: torch.Tensor, dim: int, width: int) -> torch.Tensor:
    """x padded with zeros along `dim` up to `width`."""
    missing = width - x.size(dim)
    if missing <= 0:
        return x
    shape = list(x.shape)
    shape[dim] = missing
    return torch.cat([x, x.new_zeros(shape)], dim=dim)


def peft_base(model):
    """The model under a PEFT wrapper (whose own signature and attributes hide the base model's), or `model`."""
    return model.get_base_model() if hasattr(model, "get_base_model") else model


def cache_keyword(model) -> str:
    """`cache`, or `past_key_values` for models from transformers before the rename (5.x deprecates the old name
    and warns on every call, which floods a rollout's log)."""
    return _forward_cache_keyword(type(peft_base(model)))


@cache
def _forward_cache_keyword(cls: type) -> str:
    return "cache" if "cache" in inspect.signature(cls.forward).parameters else "past_key_values"
