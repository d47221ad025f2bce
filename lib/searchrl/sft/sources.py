"""Where a cold start's demonstrations come from (`sft_source`), besides the synthetic world's templates:

- ``answer_only``: the question, then only the answer in the protocol's answer tags: no search (Search-R1's SFT
  baseline trains on question -> answer pairs);
- ``rejection:<model>``: correct, well-formed search rollouts sampled from a teacher (`rejection_sampled_trajectories`),
  rewritten as text segments so that the policy's own tokenizer and prompt carry them (R1-Searcher's SFT comparison:
  Qwen-2.5-7B-Instruct trajectories); ``rejection:policy`` samples the run's own model (R1-Searcher++'s cold start);
- a JSON-lines trajectory file: one item a line, either ``segments`` [(text, trainable), ...] with ``prompt`` or
  ``question`` (the prompt is then built by the run's protocol), or ``completion_ids`` + ``env_mask`` (+
  ``prompt_ids``) in the policy's own tokens, as rejection sampling with the policy writes them.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from searchrl.protocols.base import SearchProtocol

__all__ = ["ANSWER_ONLY", "REJECTION_PREFIX", "TEMPLATED", "answer_only_items", "as_text_item",
           "trajectory_file_items"]

TEMPLATED, ANSWER_ONLY, REJECTION_PREFIX = "templated", "answer_only", "rejection:"


def answer_only_items(rows: Sequence[Mapping], protocol: SearchProtocol, tokenizer, *, chat: bool = True,
                      ) -> list[dict[str, Any]]:
    """One item per row: the protocol's prompt, then the first golden answer in its answer tags, trained."""
    return [{"id": row.get("id", ""), "question": row["question"], "golden_answers": list(row["golden_answers"]),
             "qtype": str((row.get("metadata") or {}).get("type", "unknown")),
             "prompt": protocol.build_prompt(row["question"], tokenizer, chat=chat),
             "segments": [(f"{protocol.answer_open} {row['golden_answers'][0]} {protocol.answer_close}", True)]}
            for row in rows if row.get("golden_answers")]


def as_text_item(item: Mapping, teacher_tokenizer, prompt: str) -> dict[str, Any]:
    """A sampled item (token ids and env_mask in the teacher's tokens) as text segments under `prompt`: each run of
    trained tokens one trainable segment, each retrieved run one untrained segment."""
    ids, mask = list(item["completion_ids"]), list(item["env_mask"])
    segments, start = [], 0
    for end in range(1, len(ids) + 1):
        if end == len(ids) or mask[end] != mask[start]:
            text = teacher_tokenizer.decode(ids[start:end], skip_special_tokens=True)
            if text:
                segments.append((text, bool(mask[start])))
            start = end
    keep = {k: v for k, v in item.items() if k not in ("prompt_ids", "completion_ids", "env_mask")}
    return {**keep, "prompt": prompt, "segments": segments}


def trajectory_file_items(path: str | Path, protocol: SearchProtocol, tokenizer, *, chat: bool = True,
                          ) -> list[dict[str, Any]]:
    """The items of a JSON-lines trajectory file (see the module's description); a line of neither kind fails
    naming its number."""
    items = []
    with open(Path(path).expanduser(), encoding="utf-8") as handle:
        for number, line in enumerate(handle, 1):
            if not line.strip():
                continue
            item = json.loads(line)
            if "segments" in item:
                if "prompt" not in item:
                    if "question" not in item:
                        raise ValueError(f"{path}:{number}: an item with segments needs 'prompt' or 'question'")
                    item["prompt"] = protocol.build_prompt(item["question"], tokenizer, chat=chat)
                item["segments"] = [(str(text), bool(trained)) for text, trained in item["segments"]]
            elif not ("completion_ids" in item and "env_mask" in item):
                raise ValueError(f"{path}:{number}: an item needs 'segments' (with 'prompt' or 'question') or "
                                 f"'completion_ids' and 'env_mask'; got keys {sorted(item)}")
            items.append(item)
    if not items:
        raise ValueError(f"{path} holds no trajectories")
    return items
