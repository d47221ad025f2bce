"""A judge that is a local causal LM: greedy, batched, a handful of new tokens per verdict.

Any model `searchrl.models.load_policy` can load works: the bundled `smollm2-135m-instruct` (offline), a local
folder, or a Hugging Face id. A model already in memory can be handed over directly (`LocalJudge(model, tokenizer)`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from searchrl.judge.base import Chat, Judge
from searchrl.models import DEFAULT_POLICY, load_policy

DEFAULT_LOCAL_JUDGE = DEFAULT_POLICY


class LocalJudge(Judge):
    """Greedy verdicts from `model` (chat template applied when the tokenizer has one)."""

    def __init__(self, model: Any, tokenizer: Any, *, name: str | None = None, batch_size: int = 8,
                 max_new_tokens: int = 16) -> None:
        self.model = model.eval()
        self.tokenizer = tokenizer
        self.name = name or f"local:{getattr(model.config, '_name_or_path', '') or type(model).__name__}"
        self.batch_size = batch_size
        self.max_new_tokens = max_new_tokens

    @classmethod
    def load(cls, name_or_path: str = DEFAULT_LOCAL_JUDGE, *, device: str | None = "auto",
             dtype: torch.dtype | str = torch.float32, **options: Any) -> LocalJudge:
        """Load the judging model with `searchrl.models.load_policy` (bundled name, folder or hub id)."""
        model, tokenizer = load_policy(name_or_path, dtype=dtype, device=device)
        return cls(model, tokenizer, name=f"local:{name_or_path}", **options)

    def _render(self, chat: Chat) -> str:
        if getattr(self.tokenizer, "chat_template", None):
            return self.tokenizer.apply_chat_template(chat, tokenize=False, add_generation_prompt=True)
        return "\n\n".join(turn["content"] for turn in chat) + "\n"  # base model: the prompt as plain text

    def complete(self, chats: Sequence[Chat]) -> list[str]:
        tokenizer = self.tokenizer
        if tokenizer.pad_token_id is None:
            tokenizer.pad_token = tokenizer.eos_token
        previous_side, tokenizer.padding_side = tokenizer.padding_side, "left"  # every row continues at the right end
        replies: list[str] = []
        try:
            for start in range(0, len(chats), self.batch_size):
                texts = [self._render(chat) for chat in chats[start: start + self.batch_size]]
                batch = tokenizer(texts, return_tensors="pt", padding=True, add_special_tokens=False)
                batch = {k: v.to(self.model.device) for k, v in batch.items()}
                with torch.no_grad():
                    out = self.model.generate(**batch, max_new_tokens=self.max_new_tokens, do_sample=False,
                                              pad_token_id=tokenizer.pad_token_id)
                new = out[:, batch["input_ids"].shape[1]:]
                replies.extend(t.strip() for t in tokenizer.batch_decode(new, skip_special_tokens=True))
        finally:
            tokenizer.padding_side = previous_side
        return replies


__all__ = ["DEFAULT_LOCAL_JUDGE", "LocalJudge"]
