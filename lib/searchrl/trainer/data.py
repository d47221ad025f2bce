"""Question rows -> the prompt dataset TRL trains on."""

from __future__ import annotations

from datasets import Dataset

from searchrl.data.schema import QARow
from searchrl.protocols.base import SearchProtocol


def prompt_tokens(prompt, tokenizer) -> int:
    """Tokens of a prompt as the rollout feeds it (a chat prompt rendered with the template)."""
    if not isinstance(prompt, str):
        prompt = tokenizer.apply_chat_template(prompt, tokenize=False, add_generation_prompt=True)
    return len(tokenizer(prompt, add_special_tokens=False)["input_ids"])


def prompt_dataset(rows: list[QARow], protocol: SearchProtocol, tokenizer, *, chat: bool = True,
                   max_prompt_tokens: int = 0) -> Dataset:
    """One row per question: `prompt` (the protocol's full prompt text), `question`, `golden_answers`, `id`,
    `qtype`, `hops`, `difficulty` (R1-Searcher's bucket when the rows were labelled, else empty) and `supporting_ids`
    (the passages that hold the answer chain, where the data says; else empty). Columns other than `prompt` reach the
    reward functions as keyword arguments. With `max_prompt_tokens` > 0, questions whose prompt is longer are left
    out (and counted in a printed line)."""
    if not rows:
        raise ValueError("prompt_dataset needs at least one question row")
    prompts = [protocol.build_prompt(r["question"], tokenizer, chat=chat) for r in rows]
    if max_prompt_tokens > 0:
        kept = [i for i, p in enumerate(prompts) if prompt_tokens(p, tokenizer) <= max_prompt_tokens]
        if len(kept) < len(rows):
            print(f"max_prompt_tokens {max_prompt_tokens}: {len(rows) - len(kept)} of {len(rows)} training questions "
                  "have a longer prompt and are left out")
        if not kept:
            raise ValueError(f"every training question's prompt is longer than max_prompt_tokens "
                             f"({max_prompt_tokens}); raise it (0: no cap)")
        rows, prompts = [rows[i] for i in kept], [prompts[i] for i in kept]
    return Dataset.from_dict({
        "prompt": prompts,
        "question": [r["question"] for r in rows],
        "golden_answers": [list(r["golden_answers"]) for r in rows],
        "id": [r["id"] for r in rows],
        "qtype": [str(r["metadata"].get("type", "unknown")) for r in rows],
        "hops": [int(r["metadata"].get("hops", 1)) for r in rows],
        "difficulty": [str(r["metadata"].get("difficulty", "")) for r in rows],
        "supporting_ids": [[str(i) for i in r["metadata"].get("supporting_ids") or []] for r in rows],
    })
