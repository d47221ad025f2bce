"""SearchGRPOConfig: TRL's GRPOConfig plus the search settings, and the settings that need one process.

`SearchGRPOTrainer` (searchrl.trainer.search_grpo) trains with it; `searchrl.trainer.arguments.grpo_args` builds it
from a run's RunConfig.
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, field

from trl import GRPOConfig

from searchrl.config.choices import DRAW_SIZES, LR_SCHEDULES, PROMPT_SELECTIONS
from searchrl.config.memorization import MemorizationConfig
from searchrl.core.quiet import silence_known_warnings
from searchrl.rollout import RolloutConfig
from searchrl.trainer.advantages import ADVANTAGE_ESTIMATORS

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
    R1-Searcher++ memorization loss settings (`searchrl.trainer.levers.memorization`; off by default).
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
    value_lr_scheduler_type: str = field(
        default="constant", metadata={"help": "ppo: the critic's learning-rate schedule over max_steps: constant, "
                                              "constant_with_warmup, linear or cosine (transformers' meanings)."})
    value_warmup_ratio: float = field(
        default=0.0, metadata={"help": "ppo: share of max_steps over which the critic's learning rate warms up."})
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
    skip_empty_steps: bool = field(
        default=False, metadata={"help": "Skip an optimizer step whose gradient is zero everywhere, so that Adam's "
                                         "momentum does not move the weights (searchrl.trainer.levers.empty_steps)."})
    dynamic_sampling: bool = field(
        default=False, metadata={"help": "Draw more questions until the batch is filled with groups whose rewards "
                                         "differ (DAPO dynamic sampling); implies drop_zero_variance."})
    dynamic_sampling_max_draws: int = field(
        default=3, metadata={"help": "dynamic_sampling: extra batches drawn at most per step; what is still "
                                     "missing then is filled with zero-variance groups, masked out."})
    dynamic_sampling_draw: str = field(
        default="batch", metadata={"help": "dynamic_sampling: batch (every extra draw is a whole batch of questions, "
                                           "DAPO) or shortfall (as many questions as the missing groups need at the "
                                           "step's informative rate so far; searchrl.trainer.levers.dynamic_sampling)."})
    length_grouped_micro_batches: bool = field(
        default=False, metadata={"help": "Cut each step's rollouts into micro-batches of similar length and drop "
                                         "their all-padding columns (searchrl.trainer.length_groups)."})
    shared_prefix: bool = field(
        default=False, metadata={"help": "Run the prompt prefix that a micro-batch's rows share once in the policy's "
                                         "forward and backward passes (searchrl.trainer.shared_prefix)."})
    rollout_log_dir: str = field(
        default="", metadata={"help": "Write every scored training rollout (question, completion, searches, rewards, "
                                      "advantage) to <dir>/step-NNNN.jsonl (searchrl.trainer.levers.rollout_log); empty: "
                                      "off."})
    train_top_layers: int = field(
        default=0, metadata={"help": "Train only the top N decoder blocks and the final norm; 0: every weight "
                                     "(searchrl.trainer.levers.freeze)."})
    prompt_selection: str = field(
        default="uniform", metadata={"help": "uniform (TRL's shuffled order); informative: draw questions by how "
                                             "often their type gave informative groups so far; stratified: the "
                                             "types in equal shares in every batch "
                                             "(searchrl.trainer.levers.prompt_selection)."})
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
        # TRL refuses groups of one; the ppo critic needs no group (one response per prompt, as Search-R1's PPO). TRL's
        # check runs with a stand-in group that divides every process's batch, then the real size is put back.
        single = self.num_generations == 1 and self.advantage_estimator == "ppo"
        if single:
            self.num_generations = max(2, self.per_device_train_batch_size
                                       * (self.steps_per_generation or self.gradient_accumulation_steps))
        super().__post_init__()
        if single:
            self.num_generations = 1
        ADVANTAGE_ESTIMATORS.get(self.advantage_estimator)  # unknown names fail here, with the nearest one
        if not (0 < self.gae_gamma <= 1 and 0 <= self.gae_lambda <= 1):
            raise ValueError("gae_gamma must be in (0, 1] and gae_lambda in [0, 1]")
        if self.value_lr <= 0 or self.critic_epochs < 1 or self.critic_mini_batch_size < 0:
            raise ValueError("value_lr must be > 0, critic_epochs >= 1 and critic_mini_batch_size >= 0")
        if self.value_lr_scheduler_type not in LR_SCHEDULES or not 0 <= self.value_warmup_ratio < 1:
            raise ValueError(f"value_lr_scheduler_type must be one of {LR_SCHEDULES} and value_warmup_ratio in [0, 1)")
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


__all__ = ["SearchGRPOConfig", "refuse_one_process_settings"]
