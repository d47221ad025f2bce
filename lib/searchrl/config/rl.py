"""The run's RL settings: schedule, batch shape, the loss and advantages, rewards, dynamic sampling and prompt
selection, checkpoints, two-stage training. `RunConfig` inherits them; each field's documentation is the string under
it."""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["RLSettings"]


@dataclass(frozen=True)
class RLSettings:
    """RL training: its schedule, batches, loss, rewards and the levers that shape its steps."""

    # == RL ==
    rl_steps: int = 20
    """Optimizer steps of RL training; 0: no RL."""
    learning_rate: float = 1e-5
    """Learning rate of RL training."""
    lr_scheduler_type: str = "linear"
    """How the RL learning rate moves over rl_steps: linear (TRL's default: down to 0 at the last step, so a run
    trains at half of learning_rate on average), constant (the papers' verl runs), constant_with_warmup or cosine."""
    warmup_ratio: float = 0.0
    """Share of rl_steps over which the RL learning rate rises from 0 to learning_rate, in [0, 1) (used by linear,
    cosine and constant_with_warmup; Search-R1's GRPO runs warm up over 0.285)."""
    num_generations: int = 8
    """Rollouts per question (the group size for group-relative advantages); at least 2, except 1 under
    advantage_estimator ppo, whose critic needs no group (Search-R1's and R-Search's PPO runs sample one response
    per prompt)."""
    prompts_per_step: int = 2
    """Distinct questions per optimizer step (each sampled num_generations times)."""
    gradient_accumulation_steps: int = 1
    """Generation batches (of prompts_per_step questions each) accumulated into one optimizer step."""
    steps_per_generation: int = 1
    """Optimizer steps cut from each batch of rollouts (TRL's steps_per_generation): a batch of steps_per_generation x
    prompts_per_step questions is rolled out and scored at once (advantages over the whole batch), then shuffled and
    cut into that many updates of prompts_per_step questions' rollouts, the later ones slightly off-policy (the
    rollouts' log-probs are kept for the clipped ratio). rl_steps counts updates. Search-R1's code: 512 questions a
    batch, 2 updates of 256 (ppo_mini_batch_size); R1-Searcher: rollout batch 64, 4 updates of 16. The ppo critic
    takes as many steps on each batch, one per update's share of it."""
    max_prompt_tokens: int = 0
    """Training questions whose prompt (the protocol's instructions and the question, with the chat template) takes
    more tokens than this are left out of RL, as verl's filter_overlong_prompts does, rather than cut (the papers'
    code caps the starting prompt at 2048 tokens: Search-R1's and R-Search's max_start_length); 0: no cap."""
    num_iterations: int = 1
    """GRPO's mu (TRL's num_iterations): optimizer steps taken on each batch of rollouts. Above 1, a batch is reused
    for that many updates, each clipped against the log-probs the rollouts were sampled with (one extra forward pass
    per batch); rl_steps counts updates, so rl_steps 20 with num_iterations 2 samples 10 batches. More updates per
    CPU minute where rollouts dominate the step (measured: docs/speed.md)."""
    train_top_layers: int = 0
    """RL trains only the top N decoder blocks (and the final norm); the embeddings, the output layer and the blocks
    below stay frozen, so the backward pass stops at the lowest trained block (`searchrl.trainer.levers.freeze`). 0 trains
    every weight. A speed lever for CPUs, where the backward pass is the largest part of a step; not with use_peft.
    It may learn less (measured: docs/speed.md)."""
    micro_batch_size: int = 0
    """Sequences per forward and backward pass, for RL rollouts and cold-start examples alike; 0: a whole step at
    once. A smaller value splits each step into micro-batches whose gradients are summed before the one optimizer
    step: the same update with less peak memory (an RL step of 8 rollouts of up to 512 tokens peaks near 14 GB on a
    CPU without it). Must divide prompts_per_step x num_generations."""
    activation_checkpointing: bool = False
    """Keep only each decoder block's input in the forward pass and recompute the rest during the backward pass,
    in the cold start and RL alike: most of the activation memory for about a third more compute per training pass.
    For a policy that does not fit otherwise (the papers' 3B-8B models; a laptop with little memory), and with
    micro_batch_size, which cuts activations too. The shared-prefix pass hands such passes to TRL."""
    length_grouped_micro_batches: bool = False
    """Cut each step's rollouts into micro-batches of similar length and drop the columns that are padding in all
    their rows, instead of TRL's shuffled micro-batches that each carry the padding of the step's longest rollout.
    The same update (bnpo, which normalises per micro-batch, keeps TRL's order and only loses the padding); off by
    default, since it gained little here (measured: docs/speed.md)."""
    shared_prefix: bool = True
    """In RL's forward and backward passes, run the prompt prefix that all rows of a micro-batch share (the
    protocol's instructions) once, and only each row's remainder against it (`searchrl.trainer.shared_prefix`).
    The same loss and update up to float rounding (tests/test_micro_batches.py), faster (measured: docs/speed.md).
    One process only: under several, TRL's own pass runs. Runs before this setting existed used TRL's pass; set
    false to repeat one bit for bit."""
    save_train_rollouts: bool = True
    """Write every scored training rollout (question, completion with its retrieved documents, searches, each
    reward, advantage) to trajectories/train/<stage>/step-NNNN.jsonl, dynamic sampling's extra draws included
    (`searchrl.trainer.levers.rollout_log`): what RL sampled, behind the logged curves. About 1-3 KB a rollout."""
    beta: float = 0.0
    """KL penalty coefficient against the reference model; 0: no reference model."""
    loss_type: str = "dapo"
    """TRL loss aggregation: grpo, dr_grpo, dapo, bnpo, cispo, sapo, luspo or vespo."""
    advantage_estimator: str = "grpo"
    """Advantage estimator from the trainer's registry (grpo, grpo_positive: only rollouts better than their
    group's mean are reinforced, rloo, reinforce_pp, or ppo with a learned critic)."""
    reward_kl_coef: float = 0.0
    """reinforce_pp and ppo: KL penalty against the starting policy, folded into the per-token reward."""
    value_lr: float = 1e-5
    """ppo: learning rate of the critic (Search-R1 uses 1e-5); GAE uses lambda = gamma = 1 as in Search-R1."""
    value_lr_scheduler_type: str = "constant"
    """ppo: how the critic's learning rate moves over rl_steps, named as lr_scheduler_type (constant,
    constant_with_warmup, linear, cosine); the papers' verl critics warm up, then stay constant
    (constant_with_warmup)."""
    value_warmup_ratio: float = 0.0
    """ppo: share of rl_steps over which the critic's learning rate rises from 0 to value_lr, in [0, 1) (with
    constant_with_warmup, linear or cosine; Search-R1's PPO critic: 0.05)."""
    rewards: list[str] = field(default_factory=lambda: ["em"])
    """Rewards, summed with reward_weights: registry names (f1, format_r1s_stage2, ...), paper presets
    (preset:r1_searcher_stage2) or import paths to your own (my_module:my_reward, path/to/file.py:my_reward)."""
    reward_weights: list[float] = field(default_factory=list)
    """Weight of each entry of rewards (a preset counts once and scales its own weights); empty: all 1.0."""
    reward_options: dict = field(default_factory=dict)
    """Options per reward, e.g. {evidence_r_search: {answerer_model: path/to/model}}; see each reward's class."""
    mask_retrieved: bool = True
    """Exclude retrieved tokens from the loss and KL (they were not generated by the policy). The same mask is
    env_mask in rollouts, tool_mask inside TRL, and labels -100 in the cold start."""
    scale_rewards: str = "group"
    """Advantage scaling: group (by the group's std), batch (by the batch's std) or none."""
    drop_zero_variance: bool = False
    """Skip groups whose rewards are all equal (they carry no learning signal)."""
    skip_empty_steps: bool = False
    """Skip an optimizer step whose gradient is zero everywhere (no group's rewards differed, or all were dropped):
    without it Adam still moves the weights along its momentum from earlier steps, so where rewards are rare each
    informative gradient is applied several times over (searchrl.trainer.levers.empty_steps)."""
    dynamic_sampling: bool = False
    """DAPO dynamic sampling: when groups of a step have equal rewards, draw and roll out more questions (up to
    dynamic_sampling_max_draws extra draws) until the batch is filled with groups whose rewards differ; implies
    drop_zero_variance. Costs extra rollouts, which on a CPU are cheaper than the backward pass they make count."""
    dynamic_sampling_draw: str = "batch"
    """How many questions each of dynamic_sampling's extra draws takes: batch (a whole step's worth, as DAPO) or
    shortfall (as many as the missing informative groups need at the rate the step's draws have given so far: a step
    with 12 of 16 groups informative draws 6 questions, not 16; a draw that falls short is followed by another).
    Shortfall generates fewer rollouts a step and may need more draws."""
    dynamic_sampling_max_draws: int = 3
    """dynamic_sampling: extra draws at most per step; groups still missing then are filled with the step's
    zero-variance groups, masked out of the loss."""
    prompt_selection: str = "uniform"
    """Which training questions each step draws: uniform (TRL's shuffled order) or informative, difficulty-aware
    selection from the rollouts already made (R1-Searcher 2.1, online): question types whose groups were informative
    (rewards differed) are drawn more, and a question whose last group was not is drawn less (also steers
    dynamic_sampling's extra draws); or stratified: every step holds the question types in equal shares (with as
    many prompts_per_step as types, one of each), so the training reward follows the policy rather than the mix of
    types a step happened to draw; dynamic_sampling's extra draws then replace an uninformative group with questions
    of its own type, so the trained batch keeps that mix too. No extra generation."""
    train_type_weights: dict = field(default_factory=dict)
    """prompt_selection stratified: questions of each type in every turn over the types (a type not named: 1), e.g.
    {single_hop: 2} with three types and prompts_per_step 4 gives each step two single-hop questions and one of each
    other. A choice one type rewards and the others penalise (one search or two) moves by the count of informative
    groups on each side, not by the question (measured: docs/levers.md); weights even the counts out."""
    balance_question_types: bool = False
    """Sample training questions so that each question type is equally frequent."""
    logging_steps: int = 1
    """Log metrics every this many steps."""
    save_steps: int = 50
    """Save a checkpoint every this many steps."""
    keep_resume_state: bool = False
    """Keep what only a resume needs after a run (or an ablation arm) completes: the trainer's checkpoint-N folders
    (weights, optimizer and RNG state: about 1.6 GB each for SmolLM2-135M, tens of GB for a 3B policy) and each RL
    stage's copy of its start weights. Off: a completed run keeps its final policies (checkpoints/cold_start,
    checkpoints/<stage>) and drops the rest; a failed or interrupted run keeps everything to resume from."""
    two_stage: bool = False
    """Two-stage training (R1-Searcher): a retrieval-format stage, then the answer reward."""
    stage1_steps: int = 0
    """Steps of the first stage when two_stage is on (counted within rl_steps)."""
    stage1_dataset: str = ""
    """Questions of the first stage when two_stage is on: a QA file of its own (R1-Searcher's stage 1 trains on the
    350 medium questions of stage_1.jsonl, its stage 2 on the 8148 of stage_2.jsonl: `dataset`), every row of it
    used; empty: the first stage trains on the run's questions like the second."""
    stage1_rewards: list[str] = field(default_factory=lambda: ["preset:r1_searcher_stage1"])
    """Rewards of the first stage when two_stage is on, named as in `rewards` (their options in reward_options).
    R1-Searcher's: retrieving and the format (eq. 1 + eq. 2); e.g. [support_recall, format_r1s_stage1] pays for
    retrieving the question's supporting passages instead."""
