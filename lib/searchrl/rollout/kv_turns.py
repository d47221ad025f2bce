"""Turns that continue from the KV cache of the previous turn, so a rollout never prefills the same token twice.

A search rollout is a few turns of generation with documents appended in between. Calling `generate` per turn
re-reads the prompt, every earlier turn and every document at each turn; here one batch KV cache lives for the
whole rollout and each turn feeds only what is new: the documents (and the last sampled token, which was never
fed). Rows of a batch stop at different times and get documents of different lengths, so the cache has holes:
columns a row does not use. The attention mask hides them and explicit position ids skip them, so every row sees
exactly its own contiguous sequence.

Within a turn, once half the rows have finished, the finished ones are set aside so the rest decode in a smaller
batch. (Continuous batching, where a row that closed its turn is given its documents and rejoins while others
still decode, was measured too: on a CPU a decode step costs about 50 ms plus 6 ms per row, so keeping the batch
full saves little, and the joins cost more than that.)

This works for models whose cache layers are plain full-attention `DynamicLayer`s (Llama, Qwen2, SmolLM, ...);
`HFTurnGenerator` (the uncached generator) makes one `generate` call per turn for anything else (sliding windows, hybrid caches).
"""

from __future__ import annotations

import inspect
import time

import torch

from searchrl.rollout.base import TurnOutput
from searchrl.rollout.kv_batch import KVBatch, peft_base


def kv_reuse_supported(model) -> bool:
    """Whether holes in the cache are sound for this model: only for plain full-attention layers (a sliding
    window counts columns, holes included, and hybrid or recurrent layers cannot skip a column)."""
    from transformers import DynamicCache
    from transformers.cache_utils import DynamicLayer

    try:
        layers = DynamicCache(config=model.config).layers
    except (AttributeError, KeyError, TypeError, ValueError):  # a config the cache cannot read: do not guess
        return False
    return bool(layers) and all(type(layer) is DynamicLayer for layer in layers)


# Below this many shared tokens, the extra model call for the prefix costs more than it saves.
MIN_SHARED_PREFIX = 16


def common_prefix_length(sequences: list[list[int]]) -> int:
    """How many leading tokens all `sequences` share."""
    if not sequences:
        return 0
    first, n = sequences[0], min(map(len, sequences))
    for other in sequences[1:]:
        same = 0
        while same < n and other[same] == first[same]:
            same += 1
        n = same
    return n


def shared_prefill_length(prompts: list[list[int]]) -> int:
    """How many leading tokens of these distinct prompts a new cache prefills once for all of them (0: none).
    Every prompt keeps at least one token of its own, so its next-token logits come out of its own prefill."""
    if len(prompts) < 2:
        return 0
    shared = min(common_prefix_length(prompts), min(map(len, prompts)) - 1)
    return shared if shared >= MIN_SHARED_PREFIX else 0


class KVTurns:
    """Cached multi-turn generation for one rollout at a time.

    `generate_turn` matches each incoming sequence to the cached row whose fed tokens are its prefix (rows come
    back in the same order, minus the finished ones); anything else starts a new cache. `reset` drops it: weights
    change between rollouts, so a cache must never outlive one.
    """

    def __init__(self, model, tokenizer, stop_strings: list[str], eos_ids: set[int], pad_id: int, sample, *,
                 query_span: tuple[str, str] | None = None, query_temperature: float = 0.0):
        self.model, self.tokenizer = model, tokenizer
        self.stop_strings = list(stop_strings)
        self.eos_ids, self.pad_id, self.sample = set(eos_ids), pad_id, sample
        # With a query span, rows inside an open query sample at query_temperature, the rest at the sampler's own.
        self.query_span, self.query_temperature = query_span, query_temperature
        # A tag is found in the decoded tail of the turn; the tail must span the longest tag's tokens.
        tags = self.stop_strings + list(query_span or ())
        lengths = [len(tokenizer(s, add_special_tokens=False)["input_ids"]) for s in tags]
        self.tail_tokens = max(lengths, default=1) + 4
        # Only the last position's logits are needed; a PEFT wrapper passes the argument on to its base model.
        self.keep_last_logits = "logits_to_keep" in inspect.signature(peft_base(model).forward).parameters
        # Where the time goes, summed over rollouts (read by benchmarks/rollout.py): prompt and document prefill,
        # one-token decode steps, sampling.
        self.stats = {"prompt_prefill_s": 0.0, "append_prefill_s": 0.0, "decode_s": 0.0, "sample_s": 0.0}
        self.prefilled_tokens = 0  # real tokens fed as prompts or documents
        self.parks = 0  # times finished rows were set aside mid-turn
        self.share_prefix = True  # prefill the prompts' common opening once (off: benchmarks/rollout.py compares)
        self.reset()

    def reset(self) -> None:
        self.batch: KVBatch | None = None
        self.fed: list[list[int]] = []  # per row (turn mode): the real tokens held in the cache

    # ---- shared steps ------------------------------------------------------------------------------------------

    def _new_batch(self, rows: list[int]) -> KVBatch:
        device = next(self.model.parameters()).device
        return KVBatch.empty(self.model, rows, device, self.pad_id, self.keep_last_logits)

    def _prefill(self, batch: KVBatch, suffixes: list[list[int]], stat: str) -> torch.Tensor:
        started = time.perf_counter()
        logits = batch.prefill(self.model, suffixes)
        self.stats[stat] += time.perf_counter() - started
        self.prefilled_tokens += sum(len(s) for s in suffixes)
        return logits

    def _sample(self, logits: torch.Tensor, temperatures: list[float] | None = None) -> list[int]:
        started = time.perf_counter()
        tokens = (self.sample(logits) if temperatures is None else self.sample(logits, temperatures)).tolist()
        self.stats["sample_s"] += time.perf_counter() - started
        return tokens

    def _step(self, batch: KVBatch, tokens: list[int], live: list[bool]) -> torch.Tensor:
        started = time.perf_counter()
        logits = batch.step(self.model, tokens, live)
        self.stats["decode_s"] += time.perf_counter() - started
        return logits

    def _finish(self, turn: list[int], budget: int) -> str | None:
        if turn[-1] in self.eos_ids:
            return "eos"
        if self.stop_strings:
            tail = self.tokenizer.decode(turn[-self.tail_tokens:], skip_special_tokens=False)
            if any(s in tail for s in self.stop_strings):
                return "stop"
        return "length" if len(turn) >= budget else None

    def _in_query(self, ids: list[int]) -> bool:
        """Whether the text of `ids` ends inside an open query (its last opener not yet closed)."""
        opener, close = self.query_span
        tail = self.tokenizer.decode(ids[-self.tail_tokens:], skip_special_tokens=False)
        return opener in tail and tail.rfind(opener) > tail.rfind(close)

    def _temperatures(self, rows: list[int], in_query: list[bool]) -> list[float] | None:
        if self.query_span is None:
            return None
        base = self.sample.temperature
        return [self.query_temperature if in_query[i] else base for i in rows]

    # ---- one turn (TurnGenerator) ------------------------------------------------------------------------------

    def _match(self, sequences: list[list[int]]) -> list[int] | None:
        """Cached row of each sequence, in order, or None when some sequence does not continue a cached row."""
        if self.batch is None:
            return None
        picks, r = [], 0
        for seq in sequences:
            while r < len(self.fed) and not (len(self.fed[r]) < len(seq) and seq[: len(self.fed[r])] == self.fed[r]):
                r += 1
            if r == len(self.fed):
                return None
            picks.append(r)
            r += 1
        return picks

    def _start(self, sequences: list[list[int]]) -> torch.Tensor:
        """A new cache for these sequences. GRPO repeats each prompt num_generations times: each distinct
        sequence is prefilled once and its cache rows copied. Distinct prompts that open with the same tokens
        (the protocol's instructions, a few hundred tokens, before each question) share one prefill of them."""
        distinct: dict[tuple[int, ...], int] = {}
        which = [distinct.setdefault(tuple(s), len(distinct)) for s in sequences]
        unique = [list(s) for s in distinct]
        shared = shared_prefill_length(unique) if self.share_prefix else 0
        if shared:
            # The prefix is fed once as a one-row batch whose cache rows are then copied, and each row's own
            # tokens follow it (left-padded with holes, so positions stay contiguous per row).
            self.batch = self._new_batch([0])
            self._prefill(self.batch, [unique[0][:shared]], "prompt_prefill_s")
            self.batch.keep([0] * len(unique))
            self.batch.rows = list(range(len(unique)))
            logits = self._prefill(self.batch, [s[shared:] for s in unique], "prompt_prefill_s")
        else:
            self.batch = self._new_batch(list(range(len(unique))))
            logits = self._prefill(self.batch, unique, "prompt_prefill_s")
        if len(distinct) < len(sequences):
            self.batch.keep(which)
            self.batch.rows = list(range(len(sequences)))
            logits = logits[torch.tensor(which, device=logits.device)]
        self.fed = [list(s) for s in sequences]
        return logits

    @torch.no_grad()
    def generate_turn(self, sequences: list[list[int]], max_new_tokens: list[int]):
        picks = self._match(sequences)
        if picks is None:
            logits = self._start(sequences)
        else:
            self.batch.keep(picks)
            self.batch.rows = list(range(len(picks)))
            self.batch.drop_unused_columns()
            self.fed = [self.fed[i] for i in picks]
            suffixes = [list(seq[len(fed):]) for seq, fed in zip(sequences, self.fed)]
            for fed, s in zip(self.fed, suffixes):
                fed.extend(s)
            logits = self._prefill(self.batch, suffixes, "append_prefill_s")

        # Decode. A finished row feeds holes until the turn ends; once half the batch has finished, the finished
        # rows are set aside (parked) so each step costs only the live ones, and they rejoin when the turn ends.
        batch, parked = self.batch, []
        turns: list[list[int]] = [[] for _ in sequences]
        finish: list[str | None] = [None] * len(sequences)
        # A turn may open inside a query (a forced search appends the opener); the close tag ends the turn.
        in_query = [self._in_query(seq) for seq in sequences] if self.query_span else [False] * len(sequences)
        for _ in range(max(max_new_tokens)):
            tokens = self._sample(logits, self._temperatures(batch.rows, in_query))
            for i, tok in zip(batch.rows, tokens):
                if finish[i] is None:
                    turns[i].append(tok)
                    finish[i] = self._finish(turns[i], max_new_tokens[i])
                    if self.query_span and not in_query[i]:
                        in_query[i] = self._in_query(turns[i])
            live = [finish[i] is None for i in batch.rows]
            if not any(live):
                break
            if sum(live) <= len(live) // 2:
                parked.append(batch.split_off([not ok for ok in live]))
                self.parks += 1
                tokens = [t for t, ok in zip(tokens, live) if ok]
                live = [True] * len(tokens)
            logits = self._step(batch, tokens, live)
            for i, tok, ok in zip(batch.rows, tokens, live):
                if ok:
                    self.fed[i].append(tok)
        for group in parked:
            batch.merge(group)
        batch.sort_rows()
        # Each row's last token is not in the cache yet: it is fed with whatever the next turn appends.
        return [TurnOutput(t, f or "length") for t, f in zip(turns, finish)]
