"""The critic of the `ppo` estimator: a separate copy of the policy's transformer body with a scalar value head,
trained by its own AdamW on the clipped value loss (the Search-R1 / veRL design: the value LLM starts from the
policy's weights and learns at its own rate).

The loss and statistics are pure functions; `Critic` holds the model and optimizer, predicts values, fits them,
and saves and loads both with the trainer's checkpoints. `PPOCritic` is the trainer's lever: it builds the critic,
gives the estimator its GAE advantages (training the critic on the same batch), and keeps it in checkpoint-N/critic/.
"""

from __future__ import annotations

import copy
import math
import os
import warnings

import torch
from safetensors.torch import load_model, save_model
from torch import nn

from searchrl.trainer.advantages import gae_advantages
from searchrl.trainer.levers.base import Lever

WEIGHTS_NAME = "model.safetensors"
OPTIMIZER_NAME = "optimizer.pt"
SHUFFLE_STREAM_NAME = "shuffle_rng.pt"


class ValueModel(nn.Module):
    """V for each completion position: a linear head on the last hidden state of a causal LM's transformer body."""

    def __init__(self, body: nn.Module, hidden_size: int, init_std: float = 0.02):
        super().__init__()
        self.body = body
        self.head = nn.Linear(hidden_size, 1)
        nn.init.normal_(self.head.weight, std=init_std)
        nn.init.zeros_(self.head.bias)

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor, logits_to_keep: int) -> torch.Tensor:
        hidden = self.body(input_ids=input_ids, attention_mask=attention_mask, use_cache=False).last_hidden_state
        # V(s_t) for completion token t is read where t is predicted, at the position before it: the same alignment
        # as the token's log-probability, so the state excludes the action it values.
        hidden = hidden[:, -logits_to_keep - 1: -1]
        return self.head(hidden).squeeze(-1).float()


def critic_from_policy(policy: nn.Module) -> ValueModel:
    """A float32 ValueModel on a deep copy of the policy's body (LoRA adapters merged in, LM head left out)."""
    if hasattr(policy, "merge_and_unload"):  # PEFT: the critic is a plain full model, trained in full
        policy = copy.deepcopy(policy).merge_and_unload()
        body = policy.base_model
    else:
        body = copy.deepcopy(policy.base_model)  # the body alone: the LM head is not needed
    config = policy.config
    model = ValueModel(body, config.hidden_size, getattr(config, "initializer_range", 0.02))
    # float32 weights for the regression; forwards run under the trainer's autocast.
    return model.float().requires_grad_(True)


def value_loss(values: torch.Tensor, old_values: torch.Tensor, returns: torch.Tensor, mask: torch.Tensor,
               clip: float, num_tokens: float | torch.Tensor | None = None) -> torch.Tensor:
    """PPO's clipped value loss, 0.5 * max((V - R)^2, (V_clip - R)^2) with V_clip = V_old + clamp(V - V_old, +-clip),
    summed over mask-1 tokens and divided by `num_tokens` (default: their number). `clip <= 0`: no clipping.
    Masked tokens (retrieved text, padding) contribute exactly nothing, to the loss or to its gradient."""
    mask = mask.to(values.dtype)
    loss = (values - returns) ** 2
    if clip > 0:
        clipped = old_values + (values - old_values).clamp(-clip, clip)
        loss = torch.maximum(loss, (clipped - returns) ** 2)
    count = mask.sum().clamp(min=1.0) if num_tokens is None else num_tokens
    return 0.5 * (loss * mask).sum() / count


def masked_mean(x: torch.Tensor, mask: torch.Tensor, global_sum=None) -> torch.Tensor:
    global_sum = global_sum or (lambda t: t)
    mask = mask.float()
    return global_sum((x.float() * mask).sum()) / global_sum(mask.sum()).clamp(min=1.0)


def explained_variance(values: torch.Tensor, returns: torch.Tensor, mask: torch.Tensor, global_sum=None) -> float:
    """1 - Var(R - V) / Var(R) over the masked tokens of the global batch: 1 is a perfect critic, 0 one no better
    than the mean return, negative a harmful one (NaN if the returns do not vary)."""
    mask = mask.float()
    residual = returns.float() - values.float()
    var = {}
    for name, x in (("residual", residual), ("returns", returns.float())):
        mean = masked_mean(x, mask, global_sum)
        var[name] = masked_mean((x - mean) ** 2, mask, global_sum)
    if var["returns"] <= 1e-8:  # constant returns (e.g. every reward 0): rounding noise, not a variance
        return float("nan")
    return (1.0 - var["residual"] / var["returns"]).item()


class Critic:
    """The value model with its optimizer.

    `fit` takes `epochs` passes over the batch in shuffled mini-batches of `mini_batch_size` sequences (0: the
    whole batch), one optimizer step each, forwarding `micro_batch_size` sequences at a time to bound memory.
    With several processes every rank holds a full replica and gradients are averaged before each step (DeepSpeed
    or FSDP sharding of the critic is not supported).
    """

    def __init__(self, model: ValueModel, accelerator, *, lr: float, clip: float, epochs: int = 1,
                 mini_batch_size: int = 0, micro_batch_size: int = 0, max_grad_norm: float = 1.0, seed: int = 0):
        self.model = model.to(accelerator.device)
        self.accelerator = accelerator
        self.optimizer = torch.optim.AdamW(self.model.parameters(), lr=lr, weight_decay=0.0)
        self.clip, self.epochs, self.max_grad_norm = clip, epochs, max_grad_norm
        self.mini_batch_size, self.micro_batch_size = mini_batch_size, micro_batch_size
        # Own generator: shuffling mini-batches must not shift the random stream the policy samples from.
        self.generator = torch.Generator().manual_seed(seed)

    @torch.no_grad()
    def predict(self, input_ids, attention_mask, logits_to_keep) -> torch.Tensor:
        self.model.eval()
        chunk = self.micro_batch_size or input_ids.size(0)
        with self.accelerator.autocast():
            return torch.cat([self.model(input_ids[i: i + chunk], attention_mask[i: i + chunk], logits_to_keep)
                              for i in range(0, input_ids.size(0), chunk)])

    def fit(self, input_ids, attention_mask, logits_to_keep, old_values, returns, mask) -> float:
        """Regress V on `returns` over the mask-1 tokens; returns the mean loss of the optimizer steps."""
        self.model.train()
        mask = mask.float()
        n = input_ids.size(0)
        mini = self.mini_batch_size or n
        micro = min(self.micro_batch_size or mini, mini)
        losses = []
        for _ in range(self.epochs):
            order = torch.randperm(n, generator=self.generator).to(input_ids.device)
            for start in range(0, n, mini):
                rows = order[start: start + mini]
                tokens = mask[rows].sum().clamp(min=1.0)
                self.optimizer.zero_grad(set_to_none=True)
                total = 0.0
                for i in range(0, len(rows), micro):
                    r = rows[i: i + micro]
                    with self.accelerator.autocast():
                        values = self.model(input_ids[r], attention_mask[r], logits_to_keep)
                    loss = value_loss(values, old_values[r], returns[r], mask[r], self.clip, num_tokens=tokens)
                    loss.backward()
                    total += loss.item()
                self._average_gradients()
                if self.max_grad_norm:
                    torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.max_grad_norm)
                self.optimizer.step()
                losses.append(total)
        self.optimizer.zero_grad(set_to_none=True)
        return sum(losses) / max(len(losses), 1)

    def _average_gradients(self) -> None:
        if self.accelerator.num_processes == 1:
            return
        for p in self.model.parameters():
            if p.grad is None:  # every rank must join each collective: a missing gradient is a zero one
                p.grad = torch.zeros_like(p)
            p.grad = self.accelerator.reduce(p.grad, reduction="mean")

    def save(self, folder: str, *, optimizer: bool = True) -> None:
        os.makedirs(folder, exist_ok=True)
        save_model(self.model, os.path.join(folder, WEIGHTS_NAME))  # handles tied tensors, unlike save_file
        if optimizer:
            torch.save(self.optimizer.state_dict(), os.path.join(folder, OPTIMIZER_NAME))
        # the mini-batch shuffle's stream too: a resumed run then shuffles as the uninterrupted one would have
        torch.save(self.generator.get_state(), os.path.join(folder, SHUFFLE_STREAM_NAME))

    def load(self, folder: str) -> None:
        load_model(self.model, os.path.join(folder, WEIGHTS_NAME), device=str(self.accelerator.device))
        path = os.path.join(folder, OPTIMIZER_NAME)
        if os.path.exists(path):  # absent when the checkpoint was saved with save_only_model
            self.optimizer.load_state_dict(torch.load(path, map_location=self.accelerator.device, weights_only=True))
        path = os.path.join(folder, SHUFFLE_STREAM_NAME)
        if os.path.exists(path):  # absent in checkpoints written before the stream was kept
            self.generator.set_state(torch.load(path, weights_only=True))


def lr_factor(kind: str, progress: float, warmup: float) -> float:
    """The share of its peak learning rate a schedule `kind` (transformers' meanings: constant ignores `warmup`;
    constant_with_warmup, linear and cosine rise linearly over the first `warmup` share, then hold, fall linearly
    to 0, or fall along a half cosine to 0) gives at `progress`, the share of training done, in [0, 1]."""
    if kind == "constant":
        return 1.0
    if progress < warmup:
        return progress / warmup
    if kind == "constant_with_warmup":
        return 1.0
    rest = min(1.0, (progress - warmup) / max(1.0 - warmup, 1e-12))
    if kind == "linear":
        return 1.0 - rest
    if kind == "cosine":
        return 0.5 * (1.0 + math.cos(math.pi * rest))
    raise ValueError(f"unknown learning-rate schedule {kind!r}")


class PPOCritic(Lever):
    """advantage_estimator ppo: the critic, its GAE advantages and its regression on each training batch, and its
    weights, optimizer and shuffle stream in every checkpoint.

    The critic's learning rate follows `value_lr_scheduler_type` and `value_warmup_ratio` over the run's max_steps,
    read off the trainer's step count at each regression (so a resumed run continues the schedule without state of
    its own). When each generation batch serves several optimizer steps (steps_per_generation), the critic takes as
    many: one mini-batch of an update's share of the batch each, as verl's critic does."""

    name = "ppo_critic"

    def __init__(self, trainer) -> None:
        super().__init__(trainer)
        args = trainer.args
        self.critic = Critic(critic_from_policy(trainer.accelerator.unwrap_model(trainer.model)), trainer.accelerator,
                             lr=args.value_lr, clip=args.value_clip, epochs=args.critic_epochs,
                             mini_batch_size=args.critic_mini_batch_size or self._update_share(args),
                             micro_batch_size=args.per_device_train_batch_size,
                             max_grad_norm=args.max_grad_norm, seed=args.seed)

    @staticmethod
    def _update_share(args) -> int:
        """This process's rollouts of one optimizer step when a generation batch serves several steps; 0 (the whole
        local batch) when it serves one."""
        if args.steps_per_generation <= args.gradient_accumulation_steps:
            return 0
        return args.per_device_train_batch_size * args.gradient_accumulation_steps

    def learning_rate(self) -> float:
        """The critic's learning rate at the trainer's current step."""
        args = self.args
        progress = self.trainer.state.global_step / max(args.max_steps, 1)
        return args.value_lr * lr_factor(args.value_lr_scheduler_type, progress, args.value_warmup_ratio)

    def advantages(self, output, rewards: torch.Tensor, mask: torch.Tensor, mode: str) -> torch.Tensor:
        """(B, T) GAE advantages from the critic's values; in training, then one critic regression on this batch
        towards the GAE returns, over the same trained (non-retrieved) tokens as the policy loss."""
        trainer, args = self.trainer, self.args
        ids = torch.cat([output["prompt_ids"], output["completion_ids"]], dim=1)
        attention = torch.cat([output["prompt_mask"], output["completion_mask"]], dim=1)
        keep = output["completion_ids"].size(1)
        values = self.critic.predict(ids, attention, keep)
        kl = trainer._reward_kl(output) if args.reward_kl_coef else None
        advantages, returns = gae_advantages(rewards, values, mask, kl, args.reward_kl_coef, args.gae_gamma,
                                             args.gae_lambda, global_sum=trainer._global_sum)
        metrics = trainer._metrics[mode]
        metrics["search/value_mean"].append(masked_mean(values, mask, trainer._global_sum).item())
        metrics["search/explained_variance"].append(explained_variance(values, returns, mask, trainer._global_sum))
        if mode == "train":
            lr = self.learning_rate()
            for group in self.critic.optimizer.param_groups:
                group["lr"] = lr
            metrics["search/value_lr"].append(lr)
            loss = self.critic.fit(ids, attention, keep, values, returns, mask)
            metrics["search/value_loss"].append(
                (trainer._global_sum(torch.tensor(loss, device=ids.device)) / trainer.accelerator.num_processes).item())
        return advantages

    def checkpoint_bytes(self, total: int) -> int:
        return total * 2  # a copy of the policy with a value head, and its own optimizer

    def save(self, folder: str) -> None:
        # Before TRL's own save, so the checkpoint is complete once it writes trainer_state.json, and rotation and
        # hub pushes include it.
        self.critic.save(os.path.join(folder, "critic"), optimizer=not self.args.save_only_model)

    def load(self, checkpoint: str) -> None:
        folder = os.path.join(checkpoint, "critic")
        if os.path.isdir(folder):
            self.critic.load(folder)
        else:
            warnings.warn(f"{checkpoint} has no critic/: the ppo critic restarts from the policy's weights")
