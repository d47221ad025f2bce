"""R1-Searcher++'s external-knowledge memorization (section 4.2.2, eq. 8-9).

During RL, rollouts that searched and answered correctly are rewritten into internal-only reasoning: a rewrite model
gets the question and the documents the rollout retrieved, presented as knowledge it already holds, and writes a
solution that answers every sub-question inside the protocol's internal-answer tags. A rewrite is kept only if it
still reaches a correct answer and shows no trace of searching (`check_rewrite`). The kept rewrites (the set T of
eq. 8) are trained with a negative log-likelihood on their completion tokens, given the rollout's own prompt, and
added to the RL loss with weight mu in the same optimizer step (eq. 9): L = -J_Mask + mu * L_M.

Choices the paper leaves open, made here:
- The rewrite model is any local causal LM; by default the policy itself (current weights, greedy, no gradient).
  The paper fine-tunes a separate rewriter first; a path in `rewrite_model` loads such a model instead.
  `rewrite_model: extractive` writes no text at all: it keeps the rollout's own reasoning and puts, where each search
  and its result stood, the retrieved sentence that best answers that query inside an internal-answer span. A small
  policy (SmolLM2-135M on a CPU) cannot follow the rewrite prompt, so without it the loss never has a rewrite to
  train on; the extractive rewrite is what a faithful rewriter would write for one-fact-per-search questions.
- T is built from the current step's rollouts only (no buffer across steps), so L_M trains on what was just found.
- The retrieved documents are read from the tokens the rollout engine appended (its env mask), not from the decoded
  text, so a model that writes its own fake result block cannot pass that off as knowledge.

The trainer's lever is `Memorization` (below); the rewrites and their check are in
`searchrl.trainer.levers.rewrites`; the settings are `MemorizationConfig`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F

from searchrl.config.memorization import MemorizationConfig
from searchrl.protocols.base import SearchProtocol
from searchrl.rollout.engine import engine_notices
from searchrl.trainer.levers.base import Lever
from searchrl.trainer.levers.rewrites import (
    EXTRACTIVE,
    Candidate,
    answer_checker,
    check_rewrite,
    extractive_rewrite,
    retrieved_documents,
    rewrite_candidate,
    rewrite_prompt,
    rollout_segments,
)

__all__ = ["Memorization", "MemorizationExample", "Memorizer", "Rewriter", "load_rewriter", "masked_nll",
           "memorization_batch", "memorization_nll", "split_round_robin", "tokenize_rewrite"]


class Rewriter:
    """Greedy rewrites from a causal LM: `rewriter(prompts) -> [(text, finished)]`, finished meaning it reached EOS.

    The model runs in eval mode without gradients and is put back in the mode it was in (the policy is usually in
    training mode). The chat template is applied when the tokenizer has one.
    """

    def __init__(self, model, tokenizer, *, max_new_tokens: int, batch_size: int) -> None:
        from searchrl.rollout import HFTurnGenerator

        self.model, self.tokenizer = model, tokenizer
        self.max_new_tokens, self.batch_size = max_new_tokens, batch_size
        self.generator = HFTurnGenerator(model, tokenizer, [], greedy=True, reuse_cache=False)

    def render(self, prompt: str) -> list[int]:
        """Token ids of one prompt, as a user turn when the tokenizer has a chat template."""
        tok = self.tokenizer
        if getattr(tok, "chat_template", None):
            prompt = tok.apply_chat_template([{"role": "user", "content": prompt}], tokenize=False,
                                             add_generation_prompt=True)
        else:
            prompt = prompt + "\n"
        return tok(prompt, add_special_tokens=False)["input_ids"]

    def __call__(self, prompts: list[str]) -> list[tuple[str, bool]]:
        was_training = self.model.training
        self.model.eval()
        out: list[tuple[str, bool]] = []
        try:
            with torch.no_grad():
                for start in range(0, len(prompts), self.batch_size):
                    ids = [self.render(p) for p in prompts[start : start + self.batch_size]]
                    turns = self.generator.generate_turn(ids, [self.max_new_tokens] * len(ids))
                    out += [(self.tokenizer.decode(t.token_ids, skip_special_tokens=True).strip(), t.finish == "eos")
                            for t in turns]
        finally:
            self.model.train(was_training)
        return out


@dataclass
class MemorizationExample:
    """One kept rewrite, tokenised for the policy: its prompt and the rewritten completion (ends in EOS)."""

    prompt_ids: list[int]
    completion_ids: list[int]


def tokenize_rewrite(prompt_ids: list[int], text: str, tokenizer) -> MemorizationExample:
    """The rollout's prompt and the rewrite's tokens in the policy's vocabulary, closed by EOS (the rewrite ended
    there, and the policy should learn to stop)."""
    ids = tokenizer(text, add_special_tokens=False)["input_ids"]
    return MemorizationExample(list(prompt_ids), ids + [tokenizer.eos_token_id])


def memorization_batch(examples: Sequence[MemorizationExample], pad_id: int,
                       device: torch.device | str | None = None) -> dict[str, torch.Tensor]:
    """Examples as one padded batch, laid out as TRL lays out rollouts: prompts left-padded, completions
    right-padded, so every completion starts at the same column. `loss_mask` is 1 exactly on completion tokens."""
    if not examples:
        raise ValueError("memorization_batch needs at least one example")
    width_p = max(len(e.prompt_ids) for e in examples)
    width_c = max(len(e.completion_ids) for e in examples)
    n = len(examples)
    input_ids = torch.full((n, width_p + width_c), pad_id, dtype=torch.long)
    attention = torch.zeros_like(input_ids)
    loss_mask = torch.zeros_like(input_ids)
    for i, e in enumerate(examples):
        p, c = len(e.prompt_ids), len(e.completion_ids)
        input_ids[i, width_p - p : width_p] = torch.tensor(e.prompt_ids, dtype=torch.long)
        input_ids[i, width_p : width_p + c] = torch.tensor(e.completion_ids, dtype=torch.long)
        attention[i, width_p - p : width_p + c] = 1
        loss_mask[i, width_p : width_p + c] = 1
    batch = {"input_ids": input_ids, "attention_mask": attention, "loss_mask": loss_mask}
    return {k: v.to(device) for k, v in batch.items()} if device is not None else batch


def masked_nll(logits: torch.Tensor, input_ids: torch.Tensor, loss_mask: torch.Tensor) -> tuple[torch.Tensor,
                                                                                                  torch.Tensor]:
    """(sum, count) of -log p(token) over the tokens where `loss_mask` is 1.

    `logits[:, t]` predicts `input_ids[:, t + 1]`; `logits` may cover only the last positions of the sequence
    (then it lines up with the last `logits.size(1)` positions). A token at position 0 has no prediction.
    """
    width = logits.size(1)
    targets = input_ids[:, -width:][:, 1:]
    mask = loss_mask[:, -width:][:, 1:].to(logits.dtype)
    nll = F.cross_entropy(logits[:, :-1].float().reshape(-1, logits.size(-1)), targets.reshape(-1),
                          reduction="none").view_as(targets)
    return (nll * mask).sum(), mask.sum()


def memorization_nll(model, batch: Mapping[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
    """(sum, count) of the policy's NLL on the batch's rewritten completion tokens (eq. 8 before normalising).

    Logits are computed only from the position before the first completion token, as TRL does for rollouts: the
    prompt conditions the completion but is never a target. Raw logits: the rewrite is trained as text, not at the
    rollout sampling temperature.
    """
    loss_mask = batch["loss_mask"]
    columns = loss_mask.any(dim=0).nonzero()
    if columns.numel() == 0:
        zero = loss_mask.new_zeros((), dtype=torch.float32)
        return zero, zero
    keep = loss_mask.size(1) - int(columns[0]) + 1
    logits = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"], logits_to_keep=keep).logits
    return masked_nll(logits, batch["input_ids"], loss_mask)


def split_round_robin(items: Sequence[Any], parts: int) -> list[list[Any]]:
    """`items` dealt into `parts` lists (one per micro-batch of a generation batch)."""
    return [list(items[i::parts]) for i in range(parts)]


class Memorizer:
    """Rewrites candidates, checks the rewrites and tokenises the kept ones for the policy.

    `rewriter` is any callable `prompts -> [(text, finished)]` (a `Rewriter` over the policy or another model),
    unused with `rewrite_model: extractive`; `tokenizer` is the policy's.
    """

    def __init__(self, config: MemorizationConfig, protocol: SearchProtocol, tokenizer,
                 rewriter: Callable[[list[str]], list[tuple[str, bool]]], notices: Sequence[str] = ()) -> None:
        for tag in ("internal_open", "internal_close"):
            if not getattr(protocol, tag, None):
                raise ValueError(f"memorization rewrites rollouts into internal-answer spans, which the protocol "
                                 f"{protocol.name!r} does not have; use it with r1_searcher_pp or set "
                                 "memorization_coef=0")
        self.config, self.protocol, self.tokenizer, self.rewriter = config, protocol, tokenizer, rewriter
        self.notices = tuple(notices)  # engine texts that are not documents (the search-budget notice)
        self.last_tried: list[tuple[Candidate, str, str | None]] = []
        self.is_correct = answer_checker(protocol)

    def candidate(self, prompt_ids: list[int], completion: str, row: Mapping[str, Any]) -> Candidate | None:
        """The Candidate of one scored rollout, or None (see `rewrite_candidate`)."""
        return rewrite_candidate(prompt_ids, completion, row, self.protocol, self.is_correct)

    def rewrite(self, candidates: Sequence[Candidate]) -> tuple[list[MemorizationExample], list[str | None]]:
        """The kept rewrites as training examples, and for every candidate tried why it was rejected (None: kept).
        At most `max_rewrites_per_step` candidates are tried (the first ones). `last_tried` then holds each tried
        candidate with its rewrite text and that reason (what the rollout log writes)."""
        cap = self.config.max_rewrites_per_step
        tried = list(candidates[:cap] if cap else candidates)
        self.last_tried: list[tuple[Candidate, str, str | None]] = []
        if not tried:
            return [], []
        if self.config.rewrite_model == EXTRACTIVE:
            outputs = [(extractive_rewrite(c, self.protocol, self.notices), True) for c in tried]
        else:
            outputs = self.rewriter([rewrite_prompt(self.protocol, c.question, c.documents) for c in tried])
        if len(outputs) != len(tried):
            raise RuntimeError(f"the rewriter returned {len(outputs)} rewrites for {len(tried)} prompts")
        examples, reasons = [], []
        for cand, (text, finished) in zip(tried, outputs, strict=True):
            reason = check_rewrite(text, finished, cand.golden_answers, self.protocol, self.is_correct)
            reasons.append(reason)
            self.last_tried.append((cand, text, reason))
            if reason is None:
                examples.append(tokenize_rewrite(cand.prompt_ids, text, self.tokenizer))
        return examples, reasons


def load_rewriter(config: MemorizationConfig, policy, policy_tokenizer, device) -> Rewriter:
    """The rewriter of `config`: the policy itself when `rewrite_model` is "", else that model, loaded frozen."""
    if not config.rewrite_model:
        return Rewriter(policy, policy_tokenizer, max_new_tokens=config.rewrite_max_new_tokens,
                        batch_size=config.rewrite_batch_size)
    from searchrl.models import load_policy

    model, tokenizer = load_policy(config.rewrite_model, device=device)
    model.eval().requires_grad_(False)
    return Rewriter(model, tokenizer, max_new_tokens=config.rewrite_max_new_tokens,
                    batch_size=config.rewrite_batch_size)


class Memorization(Lever):
    """memorization_coef > 0: each scored training rollout that searched and answered correctly is a candidate
    (`on_rewards`); once the step's batch is scored the candidates are rewritten, checked and dealt to its
    micro-batches (`on_step_batch`), and each micro-batch's loss gets mu times their NLL (`extra_loss`, eq. 9).
    The rollout hands the reward functions the documents each rollout retrieved (`rollout_extras`)."""

    name = "memorization"

    def __init__(self, trainer) -> None:
        super().__init__(trainer)
        self.candidates: list = []  # this generation batch's correct searched rollouts
        self.chunks: list[dict] = []  # one rewrite batch (or None) per micro-batch of it
        self.scale = 1.0
        args = trainer.args
        self.memorizer = Memorizer(args.memorization, trainer.protocol, trainer.processing_class, self._rewrite,
                                   notices=engine_notices(args.rollout))
        self.rewriter = None

    def _rewrite(self, prompts: list[str]) -> list[tuple[str, bool]]:
        trainer = self.trainer
        if self.rewriter is None:  # built on first use: by then the policy sits where training runs
            self.rewriter = load_rewriter(self.args.memorization, trainer.accelerator.unwrap_model(trainer.model),
                                          trainer.processing_class, trainer.accelerator.device)
        return self.rewriter(prompts)

    def rollout_extras(self, trajs) -> dict:
        # The documents each rollout retrieved, read where the engine appended them.
        trainer = self.trainer
        notices = engine_notices(self.args.rollout)
        segments = [rollout_segments(t.completion_ids, t.env_mask, trainer.processing_class) for t in trajs]
        return {"retrieved_text": [retrieved_documents([text for text, sampled in runs if not sampled],
                                                       trainer.protocol, notices) for runs in segments],
                "rollout_segments": segments}  # what the extractive rewrite rebuilds the rollout from

    def on_rewards(self, inputs, prompts, completions) -> None:
        trainer = self.trainer
        if not trainer.model.training:
            return
        for ids, completion, row in zip(trainer._prompt_ids(prompts), completions, inputs, strict=True):
            candidate = self.memorizer.candidate(ids, completion, row)
            if candidate is not None:
                self.candidates.append(candidate)

    def on_step_batch(self, inputs, output, rewards):
        self.trainer._show_phase("memorization rewrites")
        self.prepare()
        return output

    def prepare(self) -> None:
        """Rewrite this generation batch's candidates, keep the checked rewrites and deal them to its micro-batches.

        Eq. 8 divides by the rewrites' token count over the batch; every process weighs its micro-batches' sums by
        that global count, shared out as TRL's token-normalised losses do (per process, per accumulation window).
        """
        trainer, args = self.trainer, self.args
        candidates, self.candidates = self.candidates, []
        if not trainer.model.training:  # an evaluation between steps leaves the training batch's rewrites alone
            return
        examples, reasons = self.memorizer.rewrite(candidates)
        accelerator = trainer.accelerator
        device = accelerator.device
        counts = accelerator.reduce(torch.tensor([float(len(reasons)), float(len(examples)),
                                                  float(sum(len(e.completion_ids) for e in examples))],
                                                 device=device), reduction="sum")
        trainer._metrics["train"]["memorization/rewrites_tried"].append(counts[0].item())
        trainer._metrics["train"]["memorization/rewrites_kept"].append(counts[1].item())
        trainer.lever("rollout_log").write_rewrites(self.memorizer.last_tried)
        parts = args.steps_per_generation
        pad_id = trainer.processing_class.pad_token_id
        self.chunks = [memorization_batch(chunk, pad_id, device) if chunk else None
                       for chunk in split_round_robin(examples, parts)]
        window_tokens = counts[2].clamp(min=1.0) / accelerator.num_processes
        window_tokens = window_tokens * args.gradient_accumulation_steps / parts
        self.scale = args.memorization.memorization_coef / window_tokens.item()

    def extra_loss(self, model, inputs):
        # Eq. 9: an NLL on sequences that were never sampled (the rewrites), in the same optimizer step.
        trainer = self.trainer
        if not trainer.model.training or not self.chunks:
            return None
        chunk = self.chunks[trainer._step % len(self.chunks)]
        term = None
        if chunk is not None:
            nll_sum, count = memorization_nll(model, chunk)
            term = self.scale * nll_sum
        else:
            nll_sum = count = torch.zeros((), device=trainer.accelerator.device)
        totals = trainer.accelerator.reduce(torch.stack([nll_sum.detach().float(), count.float()]), reduction="sum")
        if totals[1] > 0:
            trainer._metrics["train"]["memorization/nll"].append((totals[0] / totals[1]).item())
        return term
