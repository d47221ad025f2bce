"""SearchGRPOTrainer: TRL's GRPOTrainer with search rollouts, retrieved-token masks and the papers' rewards.

What TRL already does, it keeps doing: generation plumbing for vLLM, loss types, KL, PEFT, logging. The rollout
goes through TRL's `rollout_func`, whose `env_mask` TRL turns into `tool_mask` and removes from the policy loss,
the KL term, the token count and the vLLM importance ratio. Only the advantage estimators that TRL cannot express
override a method (see `_generate_and_score_completions`); `ppo` adds a critic (`searchrl.trainer.value`) that
is trained there and saved with each checkpoint. R1-Searcher++'s memorization loss (`searchrl.trainer.memorization`)
rewrites correct searched rollouts and adds their NLL to the loss in `compute_loss`. Tested against trl 1.16 (pinned
in pyproject.toml).
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import errno
import os
import time
import warnings
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

import torch
from accelerate.utils import gather_object
from transformers.trainer_utils import PREFIX_CHECKPOINT_DIR
from trl import GRPOConfig, GRPOTrainer

from searchrl.config.choices import DRAW_SIZES, PROMPT_SELECTIONS
from searchrl.config.memorization import MemorizationConfig
from searchrl.core.disk import checkpoint_space_problem
from searchrl.core.progress import update_phase
from searchrl.core.quiet import silence_known_warnings
from searchrl.protocols.base import SearchProtocol
from searchrl.rollout import HFTurnGenerator, RolloutConfig, SearchRollout, VLLMTurnGenerator, summarize
from searchrl.rollout.engine import engine_notices
from searchrl.trainer.across_processes import mean_over_processes
from searchrl.trainer.advantages import ADVANTAGE_ESTIMATORS, AdvantageInputs, gae_advantages
from searchrl.trainer.dynamic_sampling import (
    concat_batches,
    extra_draw_size,
    informative_groups,
    load_draw_stream,
    save_draw_stream,
    take_rows,
    take_within_quota,
)
from searchrl.trainer.freeze import train_top_blocks
from searchrl.trainer.health import garble_metrics
from searchrl.trainer.length_groups import length_grouped
from searchrl.trainer.memorization import (
    Memorizer,
    load_rewriter,
    memorization_batch,
    memorization_nll,
    retrieved_documents,
    rollout_segments,
    split_round_robin,
)
from searchrl.trainer.opener_advantage import centered_opener_advantages
from searchrl.trainer.opener_anchor import OpenerAnchor
from searchrl.trainer.prompt_selection import InformativeSampler, SelectionRecord, StratifiedSampler, draw_of_types
from searchrl.trainer.rollout_log import RolloutLog, mean_advantage
from searchrl.trainer.search_payoff import advantage_by_searches
from searchrl.trainer.shared_prefix import shared_prefix_logps
from searchrl.trainer.value import Critic, critic_from_policy, explained_variance, masked_mean

silence_known_warnings()

os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")  # rollout_func is the documented way to do this in 1.16

# TRL's own fields that a search rollout decides: (GRPOConfig field, RolloutConfig field).
_TRL_ROLLOUT_FIELDS = (("max_completion_length", "max_completion_tokens"), ("temperature", "temperature"),
                       ("top_p", "top_p"))
_GRPO_DEFAULTS = {f.name: f.default for f in dataclasses.fields(GRPOConfig)}


@dataclass
class SearchGRPOConfig(GRPOConfig):
    """GRPOConfig plus the search settings.

    `rollout` holds the rollout settings (searches, documents, budgets, sampling). TRL reads its own copies of three
    of them (`max_completion_length`, `temperature`, `top_p`: the temperature also scales the log-probs it trains
    on), so they are set from `rollout` here; giving one of them a different value as well is an error. Without
    `rollout`, one is built from those three TRL fields and the other settings' defaults. `memorization` holds the
    R1-Searcher++ memorization loss settings (`searchrl.trainer.memorization`; off by default).
    """

    rollout: RolloutConfig | None = field(default=None, metadata={"help": "Search rollout settings."})
    memorization: MemorizationConfig | None = field(
        default=None, metadata={"help": "R1-Searcher++ memorization loss settings (off by default)."})
    protocol: str = field(default="search_r1", metadata={"help": "Tag protocol: search_r1, r1_searcher, ..."})
    mask_retrieved: bool = field(default=True, metadata={"help": "Exclude retrieved tokens from loss and KL."})
    advantage_estimator: str = field(default="grpo", metadata={"help": "A name from ADVANTAGE_ESTIMATORS."})
    reward_kl_coef: float = field(
        default=0.0, metadata={"help": "reinforce_pp, ppo: KL penalty folded into the reward."}
    )
    # ---- ppo only: the critic (a copy of the policy's body with a value head) and GAE ----
    value_lr: float = field(default=1e-5, metadata={"help": "ppo: critic learning rate (Search-R1: 1e-5)."})
    value_clip: float = field(
        default=0.5, metadata={"help": "ppo: clip range of the value loss around the rollout-time values (0: none)."}
    )
    critic_epochs: int = field(default=1, metadata={"help": "ppo: critic passes over each generation batch."})
    critic_mini_batch_size: int = field(
        default=0, metadata={"help": "ppo: sequences per critic optimizer step (0: the whole local batch)."}
    )
    gae_gamma: float = field(default=1.0, metadata={"help": "ppo: GAE discount per trained token (Search-R1: 1)."})
    gae_lambda: float = field(default=1.0, metadata={"help": "ppo: GAE lambda (Search-R1: 1)."})
    drop_zero_variance: bool = field(
        default=False, metadata={"help": "Remove groups whose rewards are all equal from the loss (DAPO)."}
    )
    dynamic_sampling: bool = field(
        default=False, metadata={"help": "Draw more questions until the batch is filled with groups whose rewards "
                                         "differ (DAPO dynamic sampling); implies drop_zero_variance."})
    dynamic_sampling_max_draws: int = field(
        default=3, metadata={"help": "dynamic_sampling: extra batches drawn at most per step; what is still "
                                     "missing then is filled with zero-variance groups, masked out."})
    dynamic_sampling_draw: str = field(
        default="batch", metadata={"help": "dynamic_sampling: batch (every extra draw is a whole batch of questions, "
                                           "DAPO) or shortfall (as many questions as the missing groups need at the "
                                           "step's informative rate so far; searchrl.trainer.dynamic_sampling)."})
    length_grouped_micro_batches: bool = field(
        default=False, metadata={"help": "Cut each step's rollouts into micro-batches of similar length and drop "
                                         "their all-padding columns (searchrl.trainer.length_groups)."})
    shared_prefix: bool = field(
        default=False, metadata={"help": "Run the prompt prefix that a micro-batch's rows share once in the policy's "
                                         "forward and backward passes (searchrl.trainer.shared_prefix)."})
    rollout_log_dir: str = field(
        default="", metadata={"help": "Write every scored training rollout (question, completion, searches, rewards, "
                                      "advantage) to <dir>/step-NNNN.jsonl (searchrl.trainer.rollout_log); empty: "
                                      "off."})
    train_top_layers: int = field(
        default=0, metadata={"help": "Train only the top N decoder blocks and the final norm; 0: every weight "
                                     "(searchrl.trainer.freeze)."})
    prompt_selection: str = field(
        default="uniform", metadata={"help": "uniform (TRL's shuffled order); informative: draw questions by how "
                                             "often their type gave informative groups so far; stratified: the "
                                             "types in equal shares in every batch "
                                             "(searchrl.trainer.prompt_selection)."})
    stratified_type_weights: dict = field(
        default_factory=dict, metadata={"help": "prompt_selection stratified: questions of each type a turn (a type "
                                                "not named: 1), e.g. {single_hop: 2}."})

    def __post_init__(self):
        if self.memorization is None:
            self.memorization = MemorizationConfig()
        if self.rollout is None:
            self.rollout = RolloutConfig(max_completion_tokens=self.max_completion_length,
                                         temperature=self.temperature, top_p=self.top_p)
        for trl_name, ours in _TRL_ROLLOUT_FIELDS:
            given, wanted = getattr(self, trl_name), getattr(self.rollout, ours)
            if given != _GRPO_DEFAULTS[trl_name] and given != wanted:
                raise ValueError(f"{trl_name}={given!r} disagrees with rollout.{ours}={wanted!r}; set it in "
                                 "`rollout` only")
            setattr(self, trl_name, wanted)
        if self.rollout.temperature <= 0:
            raise ValueError("training samples its rollouts: rollout.temperature must be > 0 (greedy decoding is "
                             "for evaluation)")
        if self.use_vllm and self.rollout.query_temperature > 0:
            raise ValueError("rollout.query_temperature is sampled by the cached transformers generator only; with "
                             "vLLM set it to 0")
        if self.use_vllm and (self.rollout.explore_openers or self.rollout.train_forced_opener):
            # TRL's vLLM importance-sampling correction divides by each trained token's sampling probability, which
            # a token the environment wrote does not have (NaN would reach the loss).
            raise ValueError("rollout.explore_openers and rollout.train_forced_opener train tokens the model did not "
                             "sample, which vLLM's importance-sampling correction cannot weigh; with vLLM leave "
                             "them off")
        super().__post_init__()
        ADVANTAGE_ESTIMATORS.get(self.advantage_estimator)  # unknown names fail here, with the nearest one
        if not (0 < self.gae_gamma <= 1 and 0 <= self.gae_lambda <= 1):
            raise ValueError("gae_gamma must be in (0, 1] and gae_lambda in [0, 1]")
        if self.value_lr <= 0 or self.critic_epochs < 1 or self.critic_mini_batch_size < 0:
            raise ValueError("value_lr must be > 0, critic_epochs >= 1 and critic_mini_batch_size >= 0")
        if self.prompt_selection not in PROMPT_SELECTIONS:
            raise ValueError(f"prompt_selection must be one of {PROMPT_SELECTIONS}, not {self.prompt_selection!r}")
        if self.dynamic_sampling:
            self.drop_zero_variance = True  # groups that stay uninformative after the last draw are masked out
            if self.dynamic_sampling_max_draws < 1:
                raise ValueError("dynamic_sampling_max_draws must be >= 1")
        if self.dynamic_sampling_draw not in DRAW_SIZES:
            raise ValueError(f"dynamic_sampling_draw must be one of {DRAW_SIZES}, not {self.dynamic_sampling_draw!r}")

    def to_dict(self):
        # Trackers and TRL's logging serialise the arguments as JSON; the rollout travels as its fields.
        out = super().to_dict()
        out["rollout"] = self.rollout.to_dict() if self.rollout is not None else None
        out["memorization"] = self.memorization.memorization_dict() if self.memorization is not None else None
        return out


def refuse_one_process_settings(args: SearchGRPOConfig, num_processes: int) -> None:
    """Raise where a setting is built for one process and `num_processes` > 1 would silently change what it does."""
    if num_processes <= 1:
        return
    if args.dynamic_sampling:
        raise ValueError("dynamic_sampling draws extra questions in one process; it does not support "
                         f"{num_processes} processes yet: set dynamic_sampling false or run in one process")
    if args.rollout is not None and args.rollout.opener_anchor > 0:
        # Each process would hold its own questions' rate to its own reference rate, a different objective from
        # one process holding the whole batch's rate.
        raise ValueError(f"rollout.opener_anchor measures the plan rate over one process's questions; it does not "
                         f"support {num_processes} processes yet: set opener_anchor 0 or run in one process")


class SearchGRPOTrainer(GRPOTrainer):
    """GRPO with a search engine in the loop.

    Args: model, reward_funcs, args and datasets as for GRPOTrainer (the dataset's `prompt` column holds prompt
    text already built by the protocol: see `searchrl.trainer.data.prompt_dataset`); `retriever` answers queries;
    `protocol` (an instance, or None to take `args.protocol` from the registry). Reward functions may be given by
    registry name (resolved with this protocol) or as callables with TRL's signature.
    """

    def __init__(self, model, reward_funcs, args: SearchGRPOConfig, train_dataset=None, *, retriever,
                 protocol: SearchProtocol | None = None, **kwargs):
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
        self.critic: Critic | None = None
        refuse_one_process_settings(args, self.accelerator.num_processes)
        if getattr(ADVANTAGE_ESTIMATORS.get(args.advantage_estimator), "needs_critic", False):
            self.critic = Critic(critic_from_policy(self.accelerator.unwrap_model(self.model)), self.accelerator,
                                 lr=args.value_lr, clip=args.value_clip, epochs=args.critic_epochs,
                                 mini_batch_size=args.critic_mini_batch_size,
                                 micro_batch_size=args.per_device_train_batch_size,
                                 max_grad_norm=args.max_grad_norm, seed=args.seed)
        if args.train_top_layers:
            # After the critic's copy of the body (which trains in full); the optimizer, built in train(), takes
            # only the weights that still need gradients.
            trained, total = train_top_blocks(self.accelerator.unwrap_model(self.model), args.train_top_layers)
            print(f"train_top_layers {args.train_top_layers}: training {trained:,} of {total:,} weights")
        self.selection = SelectionRecord()  # which questions gave informative groups (prompt_selection)
        self._informative_sampler: InformativeSampler | None = None
        self._opened_rollout_log: RolloutLog | None = None  # see _rollout_log
        self.memorizer: Memorizer | None = None
        self._memorization_candidates: list = []  # this generation batch's correct searched rollouts
        self._memorization_chunks: list[dict] = []  # one rewrite batch (or None) per micro-batch of it
        self._memorization_scale = 1.0
        if args.memorization.memorization_on:
            self.memorizer = Memorizer(args.memorization, protocol, self.processing_class, self._rewrite,
                                       notices=engine_notices(args.rollout))
            self._rewriter = None
        # Told what a training step is doing ("rollouts: turn 2 of 4, ...", "update"), for a progress bar: on a CPU
        # one step can take many minutes (searchrl.core.progress.attach_stage_bar sets it).
        self.phase_listener: Callable[[str], None] | None = None
        self._rollout_label = "rollouts"
        # Whether the batch in hand is for training; the model itself is in eval mode while it generates.
        self._training_batch = False
        self.opener_anchor: OpenerAnchor | None = None
        if args.rollout.opener_anchor > 0:
            self.opener_anchor = OpenerAnchor(args.rollout.opener_anchor, self.engine.opener_ids,
                                              self.processing_class.pad_token_id, self._opener_reference(),
                                              self.accelerator.autocast)

    def _opener_reference(self):
        """What rollout.opener_anchor measures from, as a callable giving a context that yields the model: TRL's
        reference model (beta > 0), else the PEFT base with the adapter off, else a frozen copy taken before any
        update."""
        policy = self.accelerator.unwrap_model(self.model)
        if self.ref_model is not None:
            return lambda: contextlib.nullcontext(self.ref_model)
        if hasattr(policy, "disable_adapter"):
            @contextlib.contextmanager
            def adapter_off():
                with policy.disable_adapter():
                    yield policy
            return adapter_off
        frozen = copy.deepcopy(policy).eval().requires_grad_(False)
        return lambda: contextlib.nullcontext(frozen)

    def _get_train_sampler(self, dataset=None):
        # Override only for prompt_selection "informative" and "stratified": TRL's RepeatSampler shuffles all
        # questions alike, and these choose each batch's questions from the rollouts scored so far, or by type.
        if self.args.prompt_selection == "uniform":
            return super()._get_train_sampler(dataset)
        dataset = self.train_dataset if dataset is None else dataset
        if self.args.prompt_selection == "stratified":
            return StratifiedSampler(
                dataset["qtype"], mini_repeat_count=self.num_generations,
                batch_size=self.args.generation_batch_size // self.num_generations,
                repeat_count=self.num_iterations * self.args.steps_per_generation, seed=self.args.seed,
                type_weights=self.args.stratified_type_weights)
        self._informative_sampler = InformativeSampler(  # kept: checkpoints save the batches it has drawn
            dataset["id"], dataset["qtype"], self.selection, mini_repeat_count=self.num_generations,
            batch_size=self.args.generation_batch_size // self.num_generations,
            repeat_count=self.num_iterations * self.args.steps_per_generation, seed=self.args.seed)
        return self._informative_sampler

    def _resolve_reward(self, reward):
        if isinstance(reward, str):
            from searchrl.rewards import make_reward

            return make_reward(reward, self.protocol)
        return reward

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
        if self.memorizer is not None:  # the documents each rollout retrieved, read where the engine appended them
            notices = engine_notices(self.args.rollout)
            segments = [rollout_segments(t.completion_ids, t.env_mask, self.processing_class) for t in trajs]
            extra["retrieved_text"] = [
                retrieved_documents([text for text, sampled in runs if not sampled], self.protocol, notices)
                for runs in segments]
            extra["rollout_segments"] = segments  # what the extractive rewrite rebuilds the rollout from
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
        metrics.update(garble_metrics(trajs, self.processing_class))  # read by training health (trainer/health.py)
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

    # ---- advantage estimators ----------------------------------------------------------------------------------

    def _calculate_rewards(self, inputs, prompts, completions, completion_ids_list):
        # Keep the gathered per-function rewards: the non-GRPO estimators below rebuild advantages from them.
        rewards_per_func = super()._calculate_rewards(inputs, prompts, completions, completion_ids_list)
        self._last_rewards_per_func = rewards_per_func
        if self.memorizer is not None and self.model.training:  # every scored rollout of this step is a candidate
            for ids, completion, row in zip(self._prompt_ids(prompts), completions, inputs, strict=True):
                candidate = self.memorizer.candidate(ids, completion, row)
                if candidate is not None:
                    self._memorization_candidates.append(candidate)
        return rewards_per_func

    def _generate_and_score_completions(self, inputs):
        # Override: TRL 1.16 computes only GRPO-style advantages here; RLOO, REINFORCE++ (per-token, KL in the
        # reward, whitened over the global batch), PPO (GAE from a critic, which also trains here on the same batch)
        # and DAPO's removal of zero-variance groups and dynamic sampling need the rewards and masks after TRL has
        # built them, and dynamic sampling needs to generate again within one step. The memorization loss rewrites
        # the step's correct searched rollouts here, once they are scored.
        self._training_batch = self.model.training
        started = time.perf_counter()
        output, rewards = self._scored_batch(inputs)
        if self.opener_anchor is not None and self.model.training:
            # The step's scheduled questions (a fixed type mix under stratified selection), not the refills.
            self.opener_anchor.record(self._prompt_ids([row["prompt"] for row in inputs]),
                                      [str(row.get("qtype", "unknown")) for row in inputs])
        if self.args.dynamic_sampling and self.model.training:
            # TRL's "reward" averages every batch scored in the step, and dynamic sampling's extra draws are random
            # questions: this is the reward of the step's scheduled questions alone (stratified: the same type mix
            # every step), the curve that follows the policy rather than the draws.
            self._metrics["train"]["search/scheduled_reward"].append(rewards.mean().item())
            output = self._fill_with_informative_groups(inputs, output, rewards)
        if "opener_index" in output:  # tagged in _scored_batch; centred once the batch is final (after the refills)
            output = self._center_opener_advantages(output)
        if self.memorizer is not None:
            self._show_phase("memorization rewrites")
            self._prepare_memorization()
        if self.model.training:  # the rest of step_time is the update (forward, backward, optimizer)
            self._metrics["train"]["timing/rollouts_s"].append(time.perf_counter() - started)
        self._show_phase(update_phase(1, self.args.gradient_accumulation_steps))
        return output

    def _center_opener_advantages(self, output: dict) -> dict:
        """rollout.center_opener_advantage: the opener tokens' advantages centred over the batch, per opener
        (searchrl.trainer.opener_advantage); logs the mean removed as `search/opener_advantage_removed/<i>`."""
        index = output.pop("opener_index")
        mask = output["completion_mask"] * output.get("tool_mask", torch.ones_like(output["completion_mask"]))
        output["advantages"], removed = centered_opener_advantages(
            output["advantages"], index, self.engine.opener_lengths, mask, global_sum=self._global_sum)
        for i, value in enumerate(removed):
            if value is not None:
                self._metrics["train"][f"search/opener_advantage_removed/{i}"].append(value)
        return output

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

    # ---- R1-Searcher++ memorization (searchrl.trainer.memorization) -------------------------------------------

    def _rewrite(self, prompts: list[str]) -> list[tuple[str, bool]]:
        if self._rewriter is None:  # built on first use: by then the policy sits where training runs
            self._rewriter = load_rewriter(self.args.memorization, self.accelerator.unwrap_model(self.model),
                                           self.processing_class, self.accelerator.device)
        return self._rewriter(prompts)

    def _prepare_memorization(self) -> None:
        """Rewrite this generation batch's candidates, keep the checked rewrites and deal them to its micro-batches.

        Eq. 8 divides by the rewrites' token count over the batch; every process weighs its micro-batches' sums by
        that global count, shared out as TRL's token-normalised losses do (per process, per accumulation window).
        """
        candidates, self._memorization_candidates = self._memorization_candidates, []
        if not self.model.training:  # an evaluation between steps leaves the training batch's rewrites alone
            return
        examples, reasons = self.memorizer.rewrite(candidates)
        device = self.accelerator.device
        counts = self.accelerator.reduce(torch.tensor([float(len(reasons)), float(len(examples)),
                                                       float(sum(len(e.completion_ids) for e in examples))],
                                                      device=device), reduction="sum")
        self._metrics["train"]["memorization/rewrites_tried"].append(counts[0].item())
        self._metrics["train"]["memorization/rewrites_kept"].append(counts[1].item())
        self._log_rewrites()
        parts = self.args.steps_per_generation
        pad_id = self.processing_class.pad_token_id
        self._memorization_chunks = [memorization_batch(chunk, pad_id, device) if chunk else None
                                     for chunk in split_round_robin(examples, parts)]
        window_tokens = counts[2].clamp(min=1.0) / self.accelerator.num_processes
        window_tokens = window_tokens * self.args.gradient_accumulation_steps / parts
        self._memorization_scale = self.args.memorization.memorization_coef / window_tokens.item()

    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
        # Override: TRL's loss covers only the sampled rollouts of the batch; eq. 9 adds an NLL on sequences that
        # were never sampled (the rewrites), in the same optimizer step, which no GRPOConfig option can express.
        loss = super().compute_loss(model, inputs, return_outputs, num_items_in_batch)
        if self.opener_anchor is not None and self.model.training:
            # Also an addition: a term over the step's prompts with each opener, not over the sampled rollouts.
            taken = self.opener_anchor.take(model)
            if taken is not None:
                loss = loss + taken[0]
                for name, value in taken[1].items():
                    self._metrics["train"][name].append(value)
        if self.memorizer is None or not self.model.training or not self._memorization_chunks:
            return loss
        chunk = self._memorization_chunks[self._step % len(self._memorization_chunks)]
        if chunk is not None:
            nll_sum, count = memorization_nll(model, chunk)
            loss = loss + self._memorization_scale * nll_sum
        else:
            nll_sum = count = torch.zeros((), device=self.accelerator.device)
        totals = self.accelerator.reduce(torch.stack([nll_sum.detach().float(), count.float()]), reduction="sum")
        if totals[1] > 0:
            self._metrics["train"]["memorization/nll"].append((totals[0] / totals[1]).item())
        return loss

    def _fill_with_informative_groups(self, inputs, output, rewards):
        """DAPO dynamic sampling: draw and score more questions (at most dynamic_sampling_max_draws draws, each sized
        by dynamic_sampling_draw) until the batch holds as many informative groups as it has groups; the rest stays
        masked (drop_zero_variance). Under stratified selection each draw takes the types of the groups still
        missing, and a type takes no more groups than it lost, so the batch keeps its scheduled mix of types."""
        g = self.num_generations
        size = len(inputs)
        wanted = size // g
        batches, keeps, draws = [output], [informative_groups(rewards, g)], 0
        # (draw, group) pairs that fill the batch: the first batch's informative groups, then the refills.
        chosen = [(0, grp) for grp in keeps[0].nonzero().flatten().tolist()]
        missing = None  # stratified: type -> groups still wanted (types gathered: every process decides alike)
        if self.args.prompt_selection == "stratified":
            types = gather_object([str(row.get("qtype", "unknown")) for row in inputs])[::g]
            missing = Counter(t for t, k in zip(types, keeps[0].tolist(), strict=True) if not k)
        found, drawn = len(chosen), wanted
        while found < wanted and draws < self.args.dynamic_sampling_max_draws:
            n = extra_draw_size(self.args.dynamic_sampling_draw, wanted - found, found, drawn, wanted)
            questions = self._draw_questions(n, None if missing is None else list(missing.elements()))
            self._rollout_label = f"extra draw {draws + 1} ({n} questions)"
            try:
                more, more_rewards = self._scored_batch(questions)
            finally:
                self._rollout_label = "rollouts"
            batches.append(more)
            keeps.append(informative_groups(more_rewards, g))
            if missing is not None:
                taken = take_within_quota(keeps[-1], [row["qtype"] for row in questions[::g]], missing)
            else:
                taken = keeps[-1].nonzero().flatten().tolist()
            chosen += [(len(batches) - 1, grp) for grp in taken]
            found, drawn, draws = len(chosen), drawn + n, draws + 1
        # Informative groups first, in the order drawn; then the first batch's other groups as masked filler.
        chosen = chosen[:wanted]  # uniform refills may overshoot; the filler counts from what is kept
        chosen += [(0, grp) for grp in (~keeps[0]).nonzero().flatten().tolist()][: wanted - len(chosen)]
        parts = []
        for i, batch in enumerate(batches):
            groups = [grp for j, grp in chosen if j == i]
            if groups:
                rows = torch.tensor([grp * g + k for grp in groups for k in range(g)])
                parts.append(take_rows(batch, rows, keeps[i].numel() * g))  # an extra draw may be smaller
        merged = concat_batches(parts, len(parts[0]["completion_ids"]))
        mask = merged["completion_mask"] * merged.get("tool_mask", 1)
        merged["num_items_in_batch"] = mask.sum()
        self._metrics["train"]["search/dynamic_extra_draws"].append(float(draws))
        # Questions drawn beyond the scheduled ones: what the extra draws cost this step (dynamic_sampling_draw).
        self._metrics["train"]["search/dynamic_extra_questions"].append(float(drawn - wanted))
        informative = sum(1 for i, grp in chosen if keeps[i][grp])
        self._metrics["train"]["search/informative_group_frac"].append(informative / wanted)
        return merged

    def _draw_questions(self, n: int, types: list[str] | None = None) -> list[dict]:
        """`n` training questions, each repeated num_generations times, as TRL's sampler would batch them: of
        `types` in turn when given (stratified selection), by the selection record (informative), else at random."""
        if getattr(self, "_refill_generator", None) is None:
            self._refill_generator = torch.Generator().manual_seed(self.args.seed + 7919)
        if getattr(self, "_refill_columns", None) is None:  # read once: a column read walks the whole table
            self._refill_columns = (self.train_dataset["id"], self.train_dataset["qtype"])
        ids, qtypes = self._refill_columns
        if types:
            idx = draw_of_types(qtypes, types, n, self._refill_generator)
        elif self.args.prompt_selection == "informative":
            idx = self.selection.draw(ids, qtypes, range(len(ids)), n, self._refill_generator)
        else:
            idx = torch.randperm(len(self.train_dataset), generator=self._refill_generator)[:n].tolist()
        return [dict(self.train_dataset[i]) for i in idx for _ in range(self.num_generations)]

    def _scored_batch(self, inputs):
        """TRL's generated and scored batch, with this run's advantage estimator and zero-variance masking applied;
        also returns the per-sample total rewards."""
        output = super()._generate_and_score_completions(inputs)
        if self.args.rollout.center_opener_advantage and self.model.training:
            # Which opener each row started from, carried through dynamic sampling's refills (per-sample tensors).
            output["opener_index"] = torch.tensor([i for i, _ in self._last_openers], dtype=torch.long,
                                                  device=output["completion_ids"].device)
        estimator = ADVANTAGE_ESTIMATORS.get(self.args.advantage_estimator)
        rewards = (self._last_rewards_per_func * self.reward_weights.to(self._last_rewards_per_func.device)
                   .unsqueeze(0)).nansum(dim=1)
        mode = "train" if self.model.training else "eval"
        # The gathered batch's (id, qtype) rows, in the order of the gathered rewards; one collective for both uses.
        rows = gather_object([(str(row.get("id", "")), str(row.get("qtype", "unknown"))) for row in inputs])
        self._log_reward_by_searches([qtype for _, qtype in rows], rewards, mode)
        self._log_reward_by_opener(rewards, mode)
        if mode == "train" and self.args.prompt_selection == "informative":
            self._record_selection(rows, rewards)
        if self.args.advantage_estimator == "grpo" and not self.args.drop_zero_variance:
            self._log_rollouts(inputs, output, rewards, mode)
            return output, rewards
        num_generations = self.num_generations if mode == "train" else self.num_generations_eval
        local = slice(self.accelerator.process_index * len(inputs), (self.accelerator.process_index + 1) * len(inputs))
        mask = output["completion_mask"] * output.get("tool_mask", torch.ones_like(output["completion_mask"]))
        advantages = estimator(AdvantageInputs(
            rewards=rewards, local=local, mask=mask, num_generations=num_generations,
            kl_coef=self.args.reward_kl_coef, reward_kl=lambda: self._reward_kl(output), global_sum=self._global_sum,
            critic_advantages=(lambda r, m: self._ppo_advantages(output, r, m, mode)) if self.critic else None,
            group_advantages=output["advantages"],
        ))
        if advantages is not None:
            output["advantages"] = advantages
        if self.args.drop_zero_variance:
            kept_groups = informative_groups(rewards, num_generations)  # over the gathered batch: every group
            keep = kept_groups.repeat_interleave(num_generations)[local]
            output["completion_mask"] = output["completion_mask"] * keep.unsqueeze(1).to(output["completion_mask"])
            new_mask = output["completion_mask"] * output.get("tool_mask", 1)
            output["num_items_in_batch"] = self.accelerator.gather(new_mask.sum()).sum()
            # The share of the whole batch's groups, not of this process's slice (which may hold part of a group).
            self._metrics[mode]["search/kept_group_frac"].append(kept_groups.float().mean().item())
        self._log_rollouts(inputs, output, rewards, mode)
        return output, rewards

    def _log_rollouts(self, inputs, output, rewards: torch.Tensor, mode: str) -> None:
        """Every rollout of a scored training batch, gathered, to the rollout log (`rollout_log_dir`)."""
        if mode != "train" or not self.args.rollout_log_dir:
            return
        texts = self.processing_class.batch_decode(output["completion_ids"], skip_special_tokens=True)
        mask = output["completion_mask"] * output.get("tool_mask", torch.ones_like(output["completion_mask"]))
        advantages = mean_advantage(output["advantages"], mask)
        searches = getattr(self, "_last_num_searches", [None] * len(texts))
        local = [{"id": str(row.get("id", "")), "qtype": str(row.get("qtype", "unknown")),
                  "question": row.get("question", ""), "golden_answers": list(row.get("golden_answers") or []),
                  "completion": text, "searches": n, "advantage": a}
                 for row, text, n, a in zip(inputs, texts, searches, advantages, strict=True)]
        if self.args.rollout.explore_openers:
            for row, (_, opener) in zip(local, getattr(self, "_last_openers", []), strict=False):
                row["opener"] = opener
        everyone = gather_object(local)  # in the order of the gathered rewards
        if not self.accelerator.is_main_process:
            return
        per_func = self._last_rewards_per_func.tolist()
        g = self.num_generations
        rows = [{"group": i // g, **row, "reward": float(rewards[i]),
                 "rewards": dict(zip(self.reward_func_names, per_func[i]))} for i, row in enumerate(everyone)]
        self._rollout_log().write(self.state.global_step + 1, rows)

    def _rollout_log(self) -> RolloutLog:
        """The rollout log of `rollout_log_dir`, opened on first use (it remembers which step files it has begun)."""
        if self._opened_rollout_log is None:
            self._opened_rollout_log = RolloutLog(self.args.rollout_log_dir)
        return self._opened_rollout_log

    def _log_rewrites(self) -> None:
        """The memorization rewrites this process just tried, gathered, to the rollout log (`rollout_log_dir`)."""
        if not self.args.rollout_log_dir:
            return
        local = [{"question": cand.question, "golden_answers": cand.golden_answers,
                  "completion": "".join(text for text, _ in cand.segments), "rewrite": text, "kept": reason is None,
                  "rejected_because": reason} for cand, text, reason in self.memorizer.last_tried]
        everyone = gather_object(local)
        if everyone and self.accelerator.is_main_process:
            self._rollout_log().write_rewrites(self.state.global_step + 1, everyone)

    def _record_selection(self, rows: list[tuple[str, str]], rewards: torch.Tensor) -> None:
        """Note, per group of the gathered batch (its (id, qtype) `rows`), its question and whether its rewards
        differed; every process records the same groups, so every process's sampler draws the same questions next."""
        g = self.num_generations
        firsts = rows[::g]
        self.selection.record([r[0] for r in firsts], [r[1] for r in firsts], informative_groups(rewards, g).tolist())

    def _log_reward_by_searches(self, qtypes: list[str], rewards: torch.Tensor, mode: str) -> None:
        """`search/reward_at_<n>_searches`: the mean total reward of the batch's rollouts that searched n times.
        GRPO moves the policy towards the search count that out-earns its group mates, so these curves show, step by
        step, whether a second search pays (and a gap that closes shows the policy has settled on one count).
        `search/advantage_at_<n>_searches/<qtype>`: the same within groups, per question type (`search_payoff`);
        `qtypes` are the gathered batch's, in the order of `rewards`."""
        local = torch.tensor(getattr(self, "_last_num_searches", []), dtype=torch.long, device=rewards.device)
        counts = self.accelerator.gather(local)  # the whole batch's, in the order of the gathered rewards
        if counts.numel() != rewards.numel():  # a batch this trainer did not roll out (no search rollouts): skip
            return
        for n in sorted(set(counts.tolist())):
            self._metrics[mode][f"search/reward_at_{n}_searches"].append(rewards[counts == n].mean().item())
        g = self.num_generations if mode == "train" else self.num_generations_eval
        for (qtype, n), value in advantage_by_searches(rewards, counts.tolist(), qtypes, g).items():
            self._metrics[mode][f"search/advantage_at_{n}_searches/{qtype}"].append(value)

    def _log_reward_by_opener(self, rewards: torch.Tensor, mode: str) -> None:
        """`search/reward_by_opener/<i>`: the mean total reward of the batch's rollouts started from explore opener
        i, "free" for those left to the model; which opener pays, step by step (rollout.explore_openers)."""
        if not self.args.rollout.explore_openers or mode != "train":
            return
        local = [index for index, _ in getattr(self, "_last_openers", [])]
        which = self.accelerator.gather(torch.tensor(local, dtype=torch.long, device=rewards.device))
        if which.numel() != rewards.numel():
            return
        for i in sorted(set(which.tolist())):
            self._metrics[mode][f"search/reward_by_opener/{'free' if i < 0 else i}"].append(
                rewards[which == i].mean().item())

    def _ppo_advantages(self, output, rewards: torch.Tensor, mask: torch.Tensor, mode: str) -> torch.Tensor:
        """(B, T) GAE advantages from the critic's values; in training, then one critic regression on this batch
        towards the GAE returns, over the same trained (non-retrieved) tokens as the policy loss."""
        ids = torch.cat([output["prompt_ids"], output["completion_ids"]], dim=1)
        attention = torch.cat([output["prompt_mask"], output["completion_mask"]], dim=1)
        keep = output["completion_ids"].size(1)
        values = self.critic.predict(ids, attention, keep)
        kl = self._reward_kl(output) if self.args.reward_kl_coef else None
        advantages, returns = gae_advantages(rewards, values, mask, kl, self.args.reward_kl_coef, self.args.gae_gamma,
                                             self.args.gae_lambda, global_sum=self._global_sum)
        metrics = self._metrics[mode]
        metrics["search/value_mean"].append(masked_mean(values, mask, self._global_sum).item())
        metrics["search/explained_variance"].append(explained_variance(values, returns, mask, self._global_sum))
        if mode == "train":
            loss = self.critic.fit(ids, attention, keep, values, returns, mask)
            metrics["search/value_loss"].append(
                (self._global_sum(torch.tensor(loss, device=ids.device)) / self.accelerator.num_processes).item())
        return advantages

    # ---- checkpoints: the Trainer saves and restores neither the critic (not part of self.model), nor the
    # ---- prompt-selection record and the batches drawn with it, nor the extra draws' random stream

    def _save_checkpoint(self, model, trial):
        # Override (TRL 1.16 uses this hook for its own extra state): write checkpoint-N/critic/ before super(), so
        # the checkpoint is complete once super() writes trainer_state.json, and rotation and hub pushes include it.
        output_dir = self._get_output_dir(trial=trial)
        folder = os.path.join(output_dir, f"{PREFIX_CHECKPOINT_DIR}-{self.state.global_step}")
        if self.args.should_save:
            problem = checkpoint_space_problem(output_dir, self.checkpoint_bytes())
            if problem:
                raise OSError(errno.ENOSPC, f"cannot save {os.path.basename(folder)}: {problem}")
        if self.critic is not None and self.args.should_save:
            self.critic.save(os.path.join(folder, "critic"), optimizer=not self.args.save_only_model)
        if self.args.prompt_selection == "informative" and self.args.should_save:
            os.makedirs(folder, exist_ok=True)
            self.selection.save(folder)
            if self._informative_sampler is not None:
                self._informative_sampler.save(folder)
        if self.args.should_save:
            save_draw_stream(getattr(self, "_refill_generator", None), folder)
        super()._save_checkpoint(model, trial)

    def checkpoint_bytes(self) -> int:
        """About how many bytes one checkpoint of this run takes: the saved weights (the adapter only, with PEFT) and
        Adam's two fp32 moments per trainable parameter, plus the critic's share when there is one."""
        params = list(self.model.parameters())  # tied weights are listed once
        trainable = sum(p.numel() for p in params if p.requires_grad)
        peft = hasattr(self.model, "peft_config")
        weights = trainable * 4 if peft else sum(p.numel() * p.element_size() for p in params)
        optimizer = 0 if self.args.save_only_model else 2 * 4 * trainable
        total = weights + optimizer
        if self.critic is not None:
            total *= 2  # a copy of the policy with a value head, and its own optimizer
        return total

    def _load_optimizer_and_scheduler(self, checkpoint):
        # Override: the one resume hook that every setup (single process, DDP, DeepSpeed, FSDP) calls with the
        # checkpoint folder, after the optimizer exists; the critic's weights and optimizer come back here.
        super()._load_optimizer_and_scheduler(checkpoint)
        if checkpoint is not None and self.args.prompt_selection == "informative" and not self.selection.load(checkpoint):
            warnings.warn(f"{checkpoint} has no prompt-selection record: informative selection starts afresh")
        if checkpoint is not None and self._informative_sampler is not None:
            self._informative_sampler.load(checkpoint)  # none kept (an older checkpoint): draws anew, as before
        if checkpoint is not None:
            self._refill_generator = load_draw_stream(checkpoint)  # None: no extra draw yet, _draw_questions seeds it
        if self.critic is None or checkpoint is None:
            return
        folder = os.path.join(checkpoint, "critic")
        if os.path.isdir(folder):
            self.critic.load(folder)
        else:
            warnings.warn(f"{checkpoint} has no critic/: the ppo critic restarts from the policy's weights")

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


@contextlib.contextmanager
def merged_adapter(model, enabled: bool = True):
    """A LoRA policy generates with its adapter merged into the base weights, then unmerged: generation through an
    unmerged adapter adds low-rank products to every adapted layer at every token. On the 2-core CPU a demo step's
    rollout took 14.5 s unmerged and 13.3 s merged, against 10.9-11.3 s without LoRA (docs/lab/LOG.md, 2026-11-26):
    the adapter layers cost time even when merged. Merging and unmerging changes a weight only by float rounding, as
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
