"""Cold-start items -> input_ids and labels, with labels -100 on the prompt and on every retrieved token.

Two kinds of items: written ones (`prompt` + `segments` [(text, trainable)], from the synthetic templates) and
sampled ones (`prompt_ids` + `completion_ids` + `env_mask`, from rejection sampling). The retrieved-token mask is the
same one throughout the project: `env_mask` 0 in rollouts, `tool_mask` 0 inside TRL, label -100 here.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from datasets import Dataset

logger = logging.getLogger(__name__)

IGNORE_INDEX = -100  # label value the loss skips (transformers and TRL convention)


def cut_observation(text: str, encode, limit: int, frame: tuple[str, str]) -> tuple[list[int], bool]:
    """(the tokens of observation `text`, whether they were cut): at most `limit` tokens (0: no limit), cut inside
    the protocol's `frame` (the text before and after the documents, e.g. "<information>" and "</information>") so
    the block still closes. `encode` tokenizes a piece the way the rollout engine appends it. Rollouts and the cold
    start's demonstrations both cut here, so a cold start shows the model the same observations RL will.
    """
    ids = encode(text)
    if not limit or len(ids) <= limit:
        return ids, False
    head, tail = frame
    head_ids, tail_ids = encode(head), encode(tail)
    room = limit - len(head_ids) - len(tail_ids)
    if room <= 0 or not (text.startswith(head) and text.endswith(tail)) or len(text) < len(head) + len(tail):
        return ids[:limit], True  # no room inside the tags (or a protocol that frames otherwise): cut the block itself
    return head_ids + encode(text[len(head): len(text) - len(tail)])[:room] + tail_ids, True


def _ids(tokenizer, text: str) -> list[int]:
    # Pieces are tokenized one by one, as the rollout engine does (observations are tokenized on their own and
    # appended), so SFT sees the same token boundaries around retrieved text as RL does.
    return tokenizer(text, add_special_tokens=False)["input_ids"]


def _item_tokens(item: Mapping, tokenizer, max_observation_tokens: int = 0,
                 observation_frame: tuple[str, str] = ("", "")) -> tuple[list[int], list[int]]:
    """(input_ids, labels) of one item, before the EOS and truncation; written observations cut as rollouts cut them."""
    if "completion_ids" in item:
        prompt = list(item.get("prompt_ids") or _ids(tokenizer, item["prompt"]))
        completion, mask = list(item["completion_ids"]), list(item["env_mask"])
        if len(completion) != len(mask):
            raise ValueError(f"item {item.get('id', '?')}: completion_ids ({len(completion)}) and env_mask "
                             f"({len(mask)}) differ in length")
        labels = [t if m else IGNORE_INDEX for t, m in zip(completion, mask)]
        return prompt + completion, [IGNORE_INDEX] * len(prompt) + labels
    if "segments" not in item or "prompt" not in item:
        raise ValueError("an SFT item needs 'prompt' and 'segments' [(text, trainable), ...] (templated_trajectories)"
                         " or 'completion_ids' and 'env_mask' (rejection_sampled_trajectories); got keys "
                         f"{sorted(item)}")
    ids = _ids(tokenizer, item["prompt"])
    labels = [IGNORE_INDEX] * len(ids)
    for text, trainable in item["segments"]:
        if trainable:
            piece = _ids(tokenizer, text)
        else:
            piece, _ = cut_observation(text, lambda t: _ids(tokenizer, t), max_observation_tokens, observation_frame)
        ids += piece
        labels += piece if trainable else [IGNORE_INDEX] * len(piece)
    return ids, labels


def tokenize_sft(items: Sequence[Mapping], tokenizer, max_length: int = 1024, *, max_observation_tokens: int = 0,
                 observation_frame: tuple[str, str] = ("", "")) -> Dataset:
    """Items -> a Dataset of input_ids, attention_mask and labels.

    With `max_observation_tokens` > 0, each written observation (a segment that is not trained) is cut as the rollout
    engine cuts retrieved documents (`cut_observation`, inside `observation_frame`: the protocol's text around the
    documents), so the demonstrations show what RL's rollouts will show. Sampled items were cut when they were sampled.

    labels = -100 on the prompt and on non-trainable (retrieved) tokens; the EOS closing every item is trained, so
    the model learns to stop after its answer. Items longer than `max_length` tokens are dropped (with a warning)
    rather than cut: a cut trajectory would teach a half answer.
    """
    from datasets import Dataset

    if isinstance(items, (str, bytes, Mapping)) or not isinstance(items, Sequence) or not items:
        raise ValueError("tokenize_sft needs a non-empty list of items (from templated_trajectories or "
                         "rejection_sampled_trajectories)")
    eos = tokenizer.eos_token_id
    if eos is None:
        raise ValueError("the tokenizer has no eos_token_id; set tokenizer.eos_token before tokenizing SFT data")
    columns: dict[str, list[list[int]]] = {"input_ids": [], "attention_mask": [], "labels": []}
    too_long = 0
    for item in items:
        ids, labels = _item_tokens(item, tokenizer, max_observation_tokens, observation_frame)
        if not ids or ids[-1] != eos:
            ids, labels = ids + [eos], labels + [eos]
        if len(ids) > max_length:
            too_long += 1
            continue
        columns["input_ids"].append(ids)
        columns["attention_mask"].append([1] * len(ids))
        columns["labels"].append(labels)
    if too_long:
        logger.warning("tokenize_sft: dropped %d of %d items longer than max_length=%d tokens", too_long, len(items),
                       max_length)
    if not columns["input_ids"]:
        # The cold start's max_length is fixed in trainer.arguments.sft_args, so a run shortens its demonstrations
        # instead; raising max_length is open only to Python callers of tokenize_sft / sft_args.
        raise ValueError(f"every item is longer than max_length={max_length} tokens, so shorten the demonstrations: "
                         "lower top_k, world_passage_words or max_searches (a synthetic-world passage is ~150 tokens, "
                         "a prompt ~250), or from Python raise max_length of tokenize_sft / sft_args")
    return Dataset.from_dict(columns)


__all__ = ["IGNORE_INDEX", "cut_observation", "tokenize_sft"]
