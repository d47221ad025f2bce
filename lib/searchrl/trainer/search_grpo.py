"""SearchGRPOTrainer: TRL's GRPOTrainer with search rollouts, retrieved-token masks and the papers' rewards.

What TRL already does, it keeps doing: generation plumbing for vLLM, loss types, KL, PEFT, logging. The rollout
goes through TRL's `rollout_func`, whose `env_mask` TRL turns into `tool_mask` and removes from the policy loss,
the KL term, the token count and the vLLM importance ratio. The settings are `SearchGRPOConfig`
(searchrl.trainer.grpo_config). Tested against trl 1.16 (pinned in pyproject.toml).

This module is the core: rollouts, the advantage estimators (searchrl.trainer.advantages) and the points where the
experiment levers act. Each lever (prompt selection, DAPO's zero-variance masking and dynamic sampling, the
memorization loss, the opener anchor and centred opener advantages, the rollout log, train_top_layers, the
search-count and opener metrics, the ppo critic) is one hook object in searchrl.trainer.levers, installed from the
settings (`levers.install`) and called at the events of `levers.base.Lever`, in installation order.

TRL methods overridden, each because TRL cannot express the behaviour otherwise:
- `__init__`: the protocol, the search rollout as TRL's `rollout_func`, and the levers are built with the trainer.
- `_get_train_sampler`: prompt selection replaces TRL's RepeatSampler; TRL has no sampler option.
- `_calculate_rewards`: TRL keeps the gathered per-function rewards inside its scoring; the estimators and the
  levers (the memorization candidates) need them with each batch's rows and completions.
- `_generate_and_score_completions`: TRL computes only GRPO advantages; the other estimators, zero-variance
  masking, dynamic sampling (which generates again within the step), the opener levers and the memorization
  rewrites act on the scored batch.
- `_prepare_inputs`: TRL cuts micro-batches with the padding of the step's longest rollout and cannot group them
  by length (length_grouped_micro_batches).
- `_get_per_token_logps_and_entropies`: TRL runs every row's prompt in full and cannot share a prefix
  (shared_prefix).
- `compute_loss`: TRL's loss covers only the sampled rollouts; the opener anchor and the memorization loss add
  terms over sequences that were never sampled, in the same optimizer step.
- `_save_checkpoint`: the levers' state (critic, selection record, draw streams) must be in checkpoint-N/ before
  TRL writes trainer_state.json; no callback runs before the Trainer's own save.
- `_load_optimizer_and_scheduler`: the one resume hook that every setup calls with the checkpoint folder after
  the optimizer exists; callbacks are not given the folder.
"""

from __future__ import annotations

import contextlib
import copy
import errno
import os
import time
from collections.abc import Callable

import torch
from accelerate.utils import gather_object
from transformers.trainer_utils import PREFIX_CHECKPOINT_DIR
from trl import GRPOTrainer

from searchrl.core.disk import checkpoint_space_problem
from searchrl.core.progress import update_phase
from searchrl.core.quiet import silence_known_warnings
from searchrl.protocols.base import SearchProtocol
from searchrl.rollout import HFTurnGenerator, SearchRollout, VLLMTurnGenerator, summarize
from searchrl.trainer.across_processes import mean_over_processes
from searchrl.trainer.advantages import ADVANTAGE_ESTIMATORS, AdvantageInputs
from searchrl.trainer.grpo_config import SearchGRPOConfig, refuse_one_process_settings
from searchrl.trainer.length_groups import length_grouped
from searchrl.trainer.levers import install
from searchrl.trainer.levers.base import Lever
from searchrl.trainer.levers.memorization import Memorizer
from searchrl.trainer.levers.opener_anchor import OpenerAnchor
from searchrl.trainer.levers.ppo_critic import Critic
from searchrl.trainer.levers.prompt_selection import SelectionRecord
from searchrl.trainer.monitors.health import garble_metrics
from searchrl.trainer.shared_prefix import shared_prefix_logps

silence_known_warnings()

os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")  # rollout_func is the documented way to do this in 1.16


class SearchGRPOTrainer(GRPOTrainer):
    """GRPO with a search engine in the loop.

    Args: model, reward_funcs, args and datasets as for GRPOTrainer (the dataset's `prompt` column holds prompt
    text already built by the protocol: see `searchrl.trainer.data.prompt_dataset`); `retriever` answers queries;
    `protocol` (an instance, or None to take `args.protocol` from the registry). Reward functions may be given by
    registry name (resolved with this protocol) or as callables with TRL's signature. The levers the settings turn
    on are `self.levers` (`searchrl.trainer.levers.install`), called at the events of `Lever`.
    """

    def __init__(self, model, reward_funcs, args: SearchGRPOConfig, train_dataset=None, *, retriever,
                 protocol: SearchProtocol | None = None, **kwargs):
        # Override: the search rollout, the protocol and the levers are built with the trainer.
        if protocol is None:
            from searchrl.protocols import get_protocol

            protocol = get_protocol(args.protocol)
        self.protocol = protocol
        self.retriever = retriever
        reward_funcs = [self._resolve_reward(r) for r in (reward_funcs if isinstance(reward_funcs, list)
                                                           else [reward_funcs])]
        super().__init__(model=model, reward_funcs=reward_funcs, args=args, train_dataset=train_dataset,
                         rollout_func=self._search_rollout, **kwargs)
        self._engine: SearchRollout | None = None
        self._reward_ref_model = None
        self._last_rewards_per_func: torch.Tensor | None = None
        # Told what a training step is doing ("rollouts: turn 2 of 4, ...", "update"), for a progress bar: on a CPU
        # one step can take many minutes (searchrl.core.progress.attach_stage_bar sets it).
        self.phase_listener: Callable[[str], None] | None = None
        self._rollout_label = "rollouts"
        # Whether the batch in hand is for training; the model itself is in eval mode while it generates.
        self._training_batch = False
        refuse_one_process_settings(args, self.accelerator.num_processes)
        self.levers: list[Lever] = install(self)
        self._levers_by_name = {lever.name: lever for lever in self.levers}

    def lever(self, name: str) -> Lever | None:
        """The installed lever called `name`, or None."""
        return self._levers_by_name.get(name)

    def _resolve_reward(self, reward):
        if isinstance(reward, str):
            from searchrl.rewards import make_reward

            return make_reward(reward, self.protocol)
        return reward

    # ---- the levers' state, where callers and tests read it ----------------------------------------------------

    @property
    def critic(self) -> Critic | None:
        """The ppo critic (None without one)."""
        lever = self.lever("ppo_critic")
        return lever.critic if lever is not None else None

    @property
    def selection(self) -> SelectionRecord:
        """Which questions gave informative groups (prompt_selection informative; empty otherwise)."""
        return self.lever("prompt_selection").record

    @property
    def opener_anchor(self) -> OpenerAnchor | None:
        lever = self.lever("opener_anchor")
        return lever.anchor if lever is not None else None

    @property
    def memorizer(self) -> Memorizer | None:
        lever = self.lever("memorization")
        return lever.memorizer if lever is not None else None

    @property
    def _rewriter(self):
        return self.lever("memorization").rewriter

    @_rewriter.setter
    def _rewriter(self, rewriter) -> None:
        self.lever("memorization").rewriter = rewriter

    @property
    def _memorization_chunks(self) -> list:
        lever = self.lever("memorization")
        return lever.chunks if lever is not None else []

    @property
    def _memorization_scale(self) -> float:
        lever = self.lever("memorization")
        return lever.scale if lever is not None else 1.0

    def _get_train_sampler(self, dataset=None):
        # Override: TRL's RepeatSampler shuffles all questions alike; prompt selection chooses each batch's
        # questions from the rollouts scored so far, or by type, and TRL has no sampler option for that.
        for lever in self.levers:
            sampler = lever.train_sampler(dataset)
            if sampler is not None:
                return sampler
        return super()._get_train_sampler(dataset)

    # ---- rollouts ---------------------------------------------------------------------------------------------

    @property
    def engine(self) -> SearchRollout:
        if self._engine is None:
            tokenizer = self.processing_class
            rollout = self.args.rollout
            if self.use_vllm:
                generator = VLLMTurnGenerator(self.vllm_generation, tokenizer, self.protocol.stop_strings)
            else:
                # top_k here is TRL's sampling top-k; documents per search are rollout.top_k.
                generator = HFTurnGenerator.from_rollout(self.accelerator.unwrap_model(self.model), tokenizer,
                                                         self.protocol.stop_strings, rollout, top_k=self.args.top_k,
                                                         query_span=(self.protocol.query_open,
                                                                     self.protocol.query_close))
            collective = self.use_vllm and self.accelerator.num_processes > 1
            self._engine = SearchRollout(self.protocol, self.retriever, tokenizer, generator, rollout,
                                         collective=collective, explore=True, on_turn=self._turn_phase)
        return self._engine

    def _show_phase(self, text: str) -> None:
        if self.phase_listener is not None and self._training_batch:
            self.phase_listener(text)

    def _turn_phase(self, done: int, turns: int, writing: int) -> None:
        self._show_phase(f"{self._rollout_label}: turn {done + 1} of at most {turns}, {writing} writing")

    def _prompt_ids(self, prompts: list) -> list[list[int]]:
        """Token ids of the prompts as the rollout feeds them (chat prompts rendered with the template)."""
        tokenizer = self.processing_class
        texts = [p if isinstance(p, str) else tokenizer.apply_chat_template(p, tokenize=False,
                                                                             add_generation_prompt=True)
                 for p in prompts]
        return [tokenizer(t, add_special_tokens=False)["input_ids"] for t in texts]

    def _search_rollout(self, prompts: list, trainer) -> dict:
        prompt_ids = self._prompt_ids(prompts)
        was_training = self.model.training
        self.model.eval()
        try:
            with merged_adapter(self.accelerator.unwrap_model(self.model), enabled=not self.use_vllm):
                trajs = self.engine.run(prompt_ids)
        finally:
            self.model.train(was_training)
        mode = "train" if was_training else "eval"
        for name, value in self._rollout_metrics(trajs).items():
            self._metrics[mode][name].append(value)
        self._last_num_searches = [t.num_searches for t in trajs]  # this slice's, scored next (_scored_batch)
        self._last_openers = [(t.opener_index, t.opener) for t in trajs]
        env_mask = [t.env_mask if self.args.mask_retrieved else _only_forced_masked(t) for t in trajs]
        extra = {}
        for lever in self.levers:
            extra.update(lever.rollout_extras(trajs))
        return {**extra,
            "prompt_ids": [t.prompt_ids for t in trajs],
            "completion_ids": [t.completion_ids for t in trajs],
            "logprobs": [t.logprobs for t in trajs] if self.use_vllm else None,
            "env_mask": env_mask,
            "num_searches": [t.num_searches for t in trajs],
            "queries": [list(t.queries) for t in trajs],
            "doc_ids": [list(t.doc_ids) for t in trajs],
            "invalid_queries": [t.invalid_queries for t in trajs],
            "hit_search_budget": [t.hit_search_budget for t in trajs],
            "hit_length_budget": [t.hit_length_budget for t in trajs],
        }

    def _rollout_metrics(self, trajs) -> dict[str, float]:
        metrics = summarize(trajs)
        metrics.update(garble_metrics(trajs, self.processing_class))  # read by training health (monitors/health.py)
        texts = self.processing_class.batch_decode([t.completion_ids for t in trajs], skip_special_tokens=True)
        parsed = [self.protocol.parse(text) for text in texts]
        n = max(len(parsed), 1)
        metrics["search/format_ok_rate"] = sum(p.format_ok for p in parsed) / n
        metrics["search/answer_rate"] = sum(p.answer is not None for p in parsed) / n
        # Each process rolled out only its slice of the batch; the logged value must describe the whole batch, as
        # TRL's own reward and length metrics do (otherwise the main process logs its half). Every value is a mean
        # over samples except the masked-token share, which is a mean over tokens.
        weights = dict.fromkeys(metrics, float(len(trajs)))
        weights["search/masked_token_frac"] = float(sum(len(t.env_mask) for t in trajs))
        return mean_over_processes(metrics, weights, self.accelerator)

    # ---- scoring: advantage estimators and the levers' events -------------------------------------------------

    def _calculate_rewards(self, inputs, prompts, completions, completion_ids_list):
        # Override: TRL keeps the gathered per-function rewards inside _generate_and_score_completions; the
        # estimators rebuild advantages from them, and the levers see each scored batch's rows and completions.
        rewards_per_func = super()._calculate_rewards(inputs, prompts, completions, completion_ids_list)
        self._last_rewards_per_func = rewards_per_func
        for lever in self.levers:
            lever.on_rewards(inputs, prompts, completions)
        return rewards_per_func

    def _generate_and_score_completions(self, inputs):
        # Override: TRL 1.16 computes only GRPO-style advantages here; RLOO, REINFORCE++, PPO and DAPO's removal of
        # zero-variance groups need the rewards and masks after TRL has built them, and dynamic sampling, the
        # opener levers and the memorization rewrites act on the step's batch once it is scored.
        self._training_batch = self.model.training
        started = time.perf_counter()
        output, rewards = self._scored_batch(inputs)
        for lever in self.levers:
            output = lever.on_step_batch(inputs, output, rewards)
        if self.model.training:  # the rest of step_time is the update (forward, backward, optimizer)
            self._metrics["train"]["timing/rollouts_s"].append(time.perf_counter() - started)
        self._show_phase(update_phase(1, self.args.gradient_accumulation_steps))
        return output

    def _scored_batch(self, inputs):
        """TRL's generated and scored batch, with this run's advantage estimator and the levers' events applied;
        also returns the per-sample total rewards."""
        output = super()._generate_and_score_completions(inputs)
        for lever in self.levers:
            lever.on_generated(output)
        rewards = (self._last_rewards_per_func * self.reward_weights.to(self._last_rewards_per_func.device)
                   .unsqueeze(0)).nansum(dim=1)
        mode = "train" if self.model.training else "eval"
        # The gathered batch's (id, qtype) rows, in the order of the gathered rewards; one collective for every use.
        rows = gather_object([(str(row.get("id", "")), str(row.get("qtype", "unknown"))) for row in inputs])
        for lever in self.levers:
            lever.on_batch_rewards(rows, rewards, mode)
        local = slice(self.accelerator.process_index * len(inputs), (self.accelerator.process_index + 1) * len(inputs))
        if self.args.advantage_estimator != "grpo":  # grpo keeps TRL's advantages
            num_generations = self.num_generations if mode == "train" else self.num_generations_eval
            mask = output["completion_mask"] * output.get("tool_mask", torch.ones_like(output["completion_mask"]))
            advantages = ADVANTAGE_ESTIMATORS.get(self.args.advantage_estimator)(AdvantageInputs(
                rewards=rewards, local=local, mask=mask, num_generations=num_generations,
                kl_coef=self.args.reward_kl_coef, reward_kl=lambda: self._reward_kl(output),
                global_sum=self._global_sum,
                critic_advantages=(lambda r, m: self._ppo_advantages(output, r, m, mode)) if self.critic else None,
                group_advantages=output["advantages"],
            ))
            if advantages is not None:
                output["advantages"] = advantages
        for lever in self.levers:
            lever.on_advantages(output, rewards, mode, local)
        for lever in self.levers:
            lever.on_scored_batch(inputs, output, rewards, mode)
        return output, rewards

    def _draw_questions(self, n: int, types: list[str] | None = None) -> list[dict]:
        """`n` training questions for one of dynamic sampling's extra draws (`RefillDraws.draw`)."""
        return self.lever("refill_draws").draw(n, types)

    def _ppo_advantages(self, output, rewards: torch.Tensor, mask: torch.Tensor, mode: str) -> torch.Tensor:
        """(B, T) GAE advantages from the ppo critic, which also trains on this batch (`PPOCritic.advantages`)."""
        return self.lever("ppo_critic").advantages(output, rewards, mask, mode)

    def _global_sum(self, value: torch.Tensor) -> torch.Tensor:
        return self.accelerator.gather(value.reshape(1)).sum()

    @torch.no_grad()
    def _reward_kl(self, output) -> torch.Tensor:
        """Per-token KL estimate log pi_old - log pi_ref on the completion, for REINFORCE++'s reward."""
        ids = torch.cat([output["prompt_ids"], output["completion_ids"]], dim=1)
        attention = torch.cat([output["prompt_mask"], output["completion_mask"]], dim=1)
        keep = output["completion_ids"].size(1)
        old = output.get("old_per_token_logps")
        if old is None:
            old, _, _ = self._get_per_token_logps_and_entropies(self.model, ids, attention, keep)
        if self._reward_ref_model is None:
            # A frozen copy of the policy as it was when KL was first needed (the start of training).
            self._reward_ref_model = copy.deepcopy(self.accelerator.unwrap_model(self.model)).eval()
            self._reward_ref_model.requires_grad_(False)
        ref, _, _ = self._get_per_token_logps_and_entropies(self._reward_ref_model, ids, attention, keep)
        return old - ref

    # ---- the update ---------------------------------------------------------------------------------------------

    def _prepare_inputs(self, generation_batch):
        # Override (private in trl 1.16, pinned): TRL cuts each generation batch into micro-batches that all keep
        # the padding of the step's longest rollout, and has no option to group by length for GRPO. When it has
        # just cut a new batch, recut it by length and drop the all-padding columns (same update, less compute).
        before = self._buffered_inputs
        inputs = super()._prepare_inputs(generation_batch)
        if self.model.training and self.args.length_grouped_micro_batches and self._buffered_inputs is not before:
            self._buffered_inputs = length_grouped(self._buffered_inputs, self.loss_type)
            inputs = self._buffered_inputs[self._step % self.args.steps_per_generation]
        return inputs

    def _get_per_token_logps_and_entropies(self, model, input_ids, attention_mask, logits_to_keep, batch_size=None,
                                           compute_entropy=False, compute_aux_loss=False, **multimodal):
        # Override (private in trl 1.16, pinned): TRL runs every row's prompt in full and has no option to share a
        # prefix; here the prefix a chunk's rows share runs once (searchrl.trainer.shared_prefix). Text-only,
        # one process (DDP's reducer expects one forward per backward), no MoE aux loss: TRL's pass otherwise.
        plain = (not self.args.shared_prefix or compute_aux_loss or self.accelerator.num_processes > 1
                 or any(value is not None for value in multimodal.values()))
        if plain:
            return super()._get_per_token_logps_and_entropies(
                model, input_ids, attention_mask, logits_to_keep, batch_size=batch_size,
                compute_entropy=compute_entropy, compute_aux_loss=compute_aux_loss, **multimodal)
        batch_size = batch_size or input_ids.size(0)
        logps, entropies = [], []
        for start in range(0, input_ids.size(0), batch_size):
            ids, mask = input_ids[start:start + batch_size], attention_mask[start:start + batch_size]
            shared = shared_prefix_logps(model, ids, mask, logits_to_keep, compute_entropy=compute_entropy,
                                         autocast=self.accelerator.autocast())
            if shared is None:  # no prefix worth sharing, or a cache that cannot be broadcast: TRL's pass
                chunk, entropy, _ = super()._get_per_token_logps_and_entropies(
                    model, ids, mask, logits_to_keep, compute_entropy=compute_entropy)
                shared = (chunk, entropy)
            logps.append(shared[0])
            entropies.append(shared[1])
        return torch.cat(logps), torch.cat(entropies) if compute_entropy else None, None

    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
        # Override: TRL's loss covers only the sampled rollouts of the batch; the levers add terms over sequences
        # that were never sampled (the opener anchor's prompts, the memorization rewrites of eq. 9) in the same
        # optimizer step, which no GRPOConfig option can express.
        loss = super().compute_loss(model, inputs, return_outputs, num_items_in_batch)
        for lever in self.levers:
            term = lever.extra_loss(model, inputs)
            if term is not None:
                loss = loss + term
        return loss

    # ---- checkpoints: the Trainer saves and restores none of the levers' state ----------------------------------

    def _save_checkpoint(self, model, trial):
        # Override (TRL 1.16 uses this hook for its own extra state): the levers write into checkpoint-N/ before
        # super(), so the checkpoint is complete once super() writes trainer_state.json, and rotation and hub pushes
        # include it; no callback runs before the Trainer's own save.
        output_dir = self._get_output_dir(trial=trial)
        folder = os.path.join(output_dir, f"{PREFIX_CHECKPOINT_DIR}-{self.state.global_step}")
        if self.args.should_save:
            problem = checkpoint_space_problem(output_dir, self.checkpoint_bytes())
            if problem:
                raise OSError(errno.ENOSPC, f"cannot save {os.path.basename(folder)}: {problem}")
            for lever in self.levers:
                lever.save(folder)
        super()._save_checkpoint(model, trial)

    def checkpoint_bytes(self) -> int:
        """About how many bytes one checkpoint of this run takes: the saved weights (the adapter only, with PEFT) and
        Adam's two fp32 moments per trainable parameter, plus the levers' shares (the ppo critic's)."""
        params = list(self.model.parameters())  # tied weights are listed once
        trainable = sum(p.numel() for p in params if p.requires_grad)
        peft = hasattr(self.model, "peft_config")
        weights = trainable * 4 if peft else sum(p.numel() * p.element_size() for p in params)
        optimizer = 0 if self.args.save_only_model else 2 * 4 * trainable
        total = weights + optimizer
        for lever in self.levers:
            total = lever.checkpoint_bytes(total)
        return total

    def _load_optimizer_and_scheduler(self, checkpoint):
        # Override: the one resume hook that every setup (single process, DDP, DeepSpeed, FSDP) calls with the
        # checkpoint folder, after the optimizer exists (a callback's on_train_begin is not given the folder).
        super()._load_optimizer_and_scheduler(checkpoint)
        if checkpoint is not None:
            for lever in self.levers:
                lever.load(checkpoint)


@contextlib.contextmanager
def merged_adapter(model, enabled: bool = True):
    """A LoRA policy generates with its adapter merged into the base weights, then unmerged: generation through an
    unmerged adapter adds low-rank products to every adapted layer at every token (measured: docs/speed.md).
    Merging and unmerging changes a weight only by float rounding, as
    in TRL's vLLM sync. Other models pass through."""
    mergeable = enabled and hasattr(model, "merge_adapter") and hasattr(model, "unmerge_adapter")
    if mergeable:
        model.merge_adapter()
    try:
        yield model
    finally:
        if mergeable:
            model.unmerge_adapter()


def _only_forced_masked(traj) -> list[int]:
    """The loss mask with retrieved tokens trained (mask_retrieved off): everything but forced_searches' text, which
    the model did not choose and which stays out of the loss either way."""
    mask = [1] * len(traj.env_mask)
    for start, end in traj.forced_spans:
        mask[start:end] = [0] * (end - start)
    return mask
