"""The explore openers' shared prior held where the reference had it (`rollout.opener_anchor`).

With two explore openers ("<think> This needs one" / "... two"), a policy's choice on question q is the log-odds
log p(opener 1 | q) - log p(opener 0 | q). RL moves two things in it: how the questions differ (per-question
judgement, which is what training is for) and a shift shared by every question (the prior). The shared shift can
move far more than the differences, and then alone decides whether the greedy plan follows the question (measured:
docs/levers.md).

The anchor holds the prior as a rate: how often the policy picks opener 1 over the step's questions, the mean of
sigmoid(log-odds). It adds weight * (that rate now - the reference's rate on the same questions)^2 to the loss. A rate
rather than a mean log-odds, because a question the policy has settled (inference: log-odds +4 to +16, rising under
RL) would otherwise pull every undecided question the other way; in the rate, settled questions barely count and
the ones near the boundary, whose greedy choice the prior decides, count most.
"""

from __future__ import annotations

import contextlib
import copy
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager

import torch
from transformers import DynamicCache

from searchrl.rollout.kv_batch import cache_keyword, peft_base
from searchrl.trainer.levers.base import Lever


def opener_log_odds(model, prompts: Sequence[Sequence[int]], openers: Sequence[Sequence[int]], pad_id: int,
                    ) -> torch.Tensor:
    """log p(openers[1] | prompt) - log p(openers[0] | prompt) for each prompt.

    Per prompt, all but its last token run once without gradients (keys and values cached), and the last token with
    each opener runs against that cache, with gradients: the two rows, right-padded to the longer opener. So the
    value is exact, and the gradient is that of the opener positions alone (the prompt's own activations held
    fixed): a full backward through a 200-token prompt cost 12 s a question on one CPU thread, this about 0.1 s.
    Eval mode throughout (no dropout in these models, and gradient checkpointing would drop the cache). The decoder
    stack and the LM head are called directly: TRL patches the model's own `forward` with a wrapper that, on a deep
    copy (the reference), still runs the original's weights. Tokens the openers share at their start see the same
    context in both rows and cancel in the difference.
    """
    if len(openers) != 2 or not all(openers):
        raise ValueError(f"opener_log_odds compares two non-empty openers, got {len(openers)}")
    device = next(model.parameters()).device
    longest = max(len(o) for o in openers)
    base = peft_base(model)
    backbone, head, keyword = base.base_model, base.get_output_embeddings(), cache_keyword(model)
    was_training = model.training
    model.eval()
    try:
        odds = []
        for prompt in prompts:
            cache = DynamicCache(config=base.config)
            with torch.no_grad():
                prefix = torch.tensor([list(prompt[:-1])], device=device)
                backbone(input_ids=prefix, use_cache=True, **{keyword: cache})
            for layer in cache.layers:  # one prefix for both rows: a broadcast view
                layer.keys = layer.keys.expand(2, -1, -1, -1)
                layer.values = layer.values.expand(2, -1, -1, -1)
            ids = torch.full((2, 1 + longest), pad_id, dtype=torch.long, device=device)
            mask = torch.zeros((2, len(prompt) + longest), dtype=torch.long, device=device)
            for row, opener in enumerate(openers):
                ids[row, : 1 + len(opener)] = torch.tensor([prompt[-1], *opener], device=device)
                mask[row, : len(prompt) + len(opener)] = 1
            hidden = backbone(input_ids=ids, attention_mask=mask, use_cache=True, **{keyword: cache}).last_hidden_state
            logps = torch.log_softmax(head(hidden[:, :-1]).float(), dim=-1)  # column j predicts opener token j
            totals = [logps[row, : len(o)].gather(1, torch.tensor(o, device=device).unsqueeze(1)).sum()
                      for row, o in enumerate(openers)]
            odds.append(totals[1] - totals[0])
    finally:
        model.train(was_training)
    return torch.stack(odds)


def anchor_penalty(log_odds: torch.Tensor, reference: torch.Tensor, weight: float) -> tuple[torch.Tensor, float]:
    """weight * (rate now - reference rate)^2, the rate being the mean of sigmoid(log-odds) over the questions, and
    that difference (for the logs)."""
    if log_odds.shape != reference.shape or log_odds.numel() == 0:
        raise ValueError(f"anchor_penalty: log-odds {tuple(log_odds.shape)} against reference "
                         f"{tuple(reference.shape)}; both must be the same non-empty shape")
    shift = torch.sigmoid(log_odds).mean() - torch.sigmoid(reference.to(log_odds)).mean()
    return weight * shift.pow(2), shift.item()


class OpenerAnchor:
    """The anchor's state in a trainer: the step's questions with their reference log-odds, then the loss term.

    `reference` is a callable that returns a context manager yielding the reference model (the trainer's choice);
    `autocast` one that returns the training forward's autocast context.
    """

    def __init__(self, weight: float, openers: Sequence[Sequence[int]], pad_id: int,
                 reference: Callable[[], AbstractContextManager], autocast: Callable[[], AbstractContextManager]):
        self.weight, self.openers, self.pad_id = float(weight), [list(o) for o in openers], pad_id
        self.reference, self.autocast = reference, autocast
        self.prompts: list[tuple[int, ...]] = []
        self.qtypes: list[str] = []
        self.reference_odds: list[float] = []

    def record(self, prompts: Sequence[Sequence[int]], qtypes: Sequence[str]) -> None:
        """Add a scored batch's questions (each once) and their reference log-odds, until the next loss takes them."""
        new: dict[tuple[int, ...], str] = {}  # a group's rows share one prompt: each prompt once, in order
        for prompt, qtype in zip(prompts, qtypes):
            if tuple(prompt) not in self.prompts:
                new.setdefault(tuple(prompt), qtype)
        if not new:
            return
        with torch.no_grad(), self.reference() as model, self.autocast():
            odds = opener_log_odds(model, list(new), self.openers, self.pad_id)
        self.prompts += list(new)
        self.qtypes += list(new.values())
        self.reference_odds += odds.float().tolist()

    def take(self, model) -> tuple[torch.Tensor, dict[str, float]] | None:
        """The loss term for the questions recorded since the last call (None when there are none) and its metrics:
        `search/opener_rate_shift` and `search/opener_log_odds/<qtype>` (the policy's, before this update)."""
        if not self.prompts:
            return None
        with self.autocast():
            odds = opener_log_odds(model, self.prompts, self.openers, self.pad_id)
        penalty, shift = anchor_penalty(odds, torch.tensor(self.reference_odds), self.weight)
        metrics = {"search/opener_rate_shift": shift}
        values = odds.detach().float().tolist()
        for qtype in sorted(set(self.qtypes)):
            mine = [v for v, q in zip(values, self.qtypes) if q == qtype]
            metrics[f"search/opener_log_odds/{qtype}"] = sum(mine) / len(mine)
        self.prompts, self.qtypes, self.reference_odds = [], [], []
        return penalty, metrics


class OpenerAnchorLever(Lever):
    """rollout.opener_anchor: each training step's scheduled questions recorded with their reference log-odds
    (`on_step_batch`), and the anchor's term added to the next micro-batch's loss (`extra_loss`)."""

    name = "opener_anchor"

    def __init__(self, trainer) -> None:
        super().__init__(trainer)
        self.anchor = OpenerAnchor(trainer.args.rollout.opener_anchor, trainer.engine.opener_ids,
                                   trainer.processing_class.pad_token_id, self._reference(),
                                   trainer.accelerator.autocast)

    def _reference(self):
        """What the anchor measures from, as a callable giving a context that yields the model: TRL's reference
        model (beta > 0), else the PEFT base with the adapter off, else a frozen copy taken before any update."""
        trainer = self.trainer
        policy = trainer.accelerator.unwrap_model(trainer.model)
        if trainer.ref_model is not None:
            return lambda: contextlib.nullcontext(trainer.ref_model)
        if hasattr(policy, "disable_adapter"):
            @contextlib.contextmanager
            def adapter_off():
                with policy.disable_adapter():
                    yield policy
            return adapter_off
        frozen = copy.deepcopy(policy).eval().requires_grad_(False)
        return lambda: contextlib.nullcontext(frozen)

    def on_step_batch(self, inputs, output, rewards):
        trainer = self.trainer
        if trainer.model.training:
            # The step's scheduled questions (a fixed type mix under stratified selection), not the refills.
            self.anchor.record(trainer._prompt_ids([row["prompt"] for row in inputs]),
                               [str(row.get("qtype", "unknown")) for row in inputs])
        return output

    def extra_loss(self, model, inputs):
        # A term over the step's prompts with each opener, not over the sampled rollouts.
        trainer = self.trainer
        if not trainer.model.training:
            return None
        taken = self.anchor.take(model)
        if taken is None:
            return None
        for name, value in taken[1].items():
            trainer._metrics["train"][name].append(value)
        return taken[0]


__all__ = ["OpenerAnchor", "OpenerAnchorLever", "anchor_penalty", "opener_log_odds"]
