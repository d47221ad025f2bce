"""RunConfig: the one parameter schema shared by notebooks, parameter files and the runner.

Every run is described by a flat set of typed values. They come from, in increasing precedence:

1. the defaults below,
2. parameter files (``params/<notebook>/<profile>.yaml``), in the order given,
3. a dict (in a notebook: the values of its ``parameters`` cell),
4. keyword overrides.

Unknown keys and values of the wrong type raise :class:`ConfigError` before anything runs, naming the key, where
it came from and, for a typo, the nearest valid key. Papermill on its own only warns about an unknown parameter,
which is how a misspelt ``lerning_rate`` silently trains with the default.

In a notebook, the cell after the ``parameters`` cell reads::

    cfg = RunConfig.from_globals(globals())

which picks the globals named like fields (see :meth:`RunConfig.from_globals`). Each field's documentation is the
string literal written right under it; :data:`FIELD_DOCS` is parsed from this file so ``RunConfig.describe()`` and
the tests can see it.

Names that belong to registries (model, protocol, retriever, rewards, advantage estimator) are checked by those
registries when the run builds its parts; this module checks types, ranges and the options that TRL fixes.
Conversion to the trainer's configuration lives with the trainer (``searchrl.trainer``), not here.
"""

from __future__ import annotations

import ast
import dataclasses
import difflib
import hashlib
import inspect
import json
import re
import textwrap
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import yaml

from searchrl.config.ablation import (
    COLD_START_ARM,
    COLD_START_OVERRIDES,
    Arm,
    ablation_base,
    arm_name_problem,
    arm_sources,
    cold_start_source_problems,
    parse_claims,
    source_problems,
)
from searchrl.config.choices import DRAW_SIZES, PROMPT_SELECTIONS
from searchrl.config.difficulty import DifficultyConfig, difficulty_problems
from searchrl.config.errors import ConfigError
from searchrl.config.evidence import EvidenceConfig, evidence_problems
from searchrl.config.health import HealthConfig, health_problems
from searchrl.config.knowledge import KnowledgeConfig, knowledge_problems
from searchrl.config.memorization import MemorizationConfig, memorization_problems
from searchrl.config.names import (
    ADVANTAGE_ESTIMATORS,
    BENCHMARKS,
    BENCHMARKS_WITHOUT_QUESTIONS,
    LAYOUTS,
    PROTOCOLS,
    RETRIEVERS,
    SPLITS,
    Choices,
    baseline_problem,
    judge_setting_problem,
    metric_name_key,
)
from searchrl.config.probe import ProbeConfig, probe_problems
from searchrl.config.rewards import REWARD_PRESETS, REWARDS, reward_problems
from searchrl.config.rollout import RolloutConfig, rollout_problems
from searchrl.config.service import ServiceConfig, service_problems
from searchrl.config.web_search import WebSearchConfig, web_search_problems

__all__ = [
    "BOOKKEEPING_SETTINGS",
    "COMPUTE_ONLY_SETTINGS",
    "FIELD_DOCS",
    "FIELD_SECTIONS",
    "RESERVED_YAML_KEYS",
    "ConfigError",
    "RunConfig",
    "arm_names",
    "arm_problems",
    "cold_start_key",
    "cold_start_settings",
    "load_params_file",
    "measured_changes",
    "parse_scalar",
    "with_cold_start_arm",
    "yaml_loader",
]

# A parameter file may name the notebook it is written for; the runner refuses it for any other notebook.
RESERVED_YAML_KEYS = ("notebook",)

# Settings that say where a run is recorded and on which machine it runs, not what it computes or measures.
BOOKKEEPING_SETTINGS = ("resume", "output_root", "run_name", "report_to", "device", "keep_resume_state",
                        "evidence_copy_dir")

# Settings that change how a run computes (threads; how a step, a generation batch or an evaluation is cut; what the
# backward pass recomputes) and not what it measures. A resumed run or ablation arm may change them: after a kernel
# was killed for memory, a smaller micro_batch_size is how it continues.
COMPUTE_ONLY_SETTINGS = ("torch_threads", "micro_batch_size", "activation_checkpointing", "max_concurrent_rollouts",
                         "eval_batch_size")


def measured_changes(was: Mapping[str, Any], now: RunConfig) -> dict[str, tuple[Any, Any]]:
    """{name: (was, now)} for each setting whose value in `now` differs from `was` (a run's saved parameters), with
    bookkeeping and compute-only settings left out: what a resume changes about what the run measures. A setting
    added to the schema since `was` was saved counts at its default there (at its default it changes nothing); one
    `was` holds that the schema no longer has counts as changed to None."""
    defaults, current = RunConfig.defaults(), now.to_dict()
    skip = (*BOOKKEEPING_SETTINGS, *COMPUTE_ONLY_SETTINGS)
    names = [*current, *(k for k in was if k not in current)]
    return {k: (was.get(k, defaults.get(k)), current.get(k)) for k in names
            if k not in skip and current.get(k) != was.get(k, defaults.get(k))}

_DESCRIBE_HINT = "list them with: python -m searchrl.config"


# --------------------------------------------------------------------------------------------------------------
# The schema. Section comments ("# == name ==") group fields in describe(); the string under each field is its doc.
# --------------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class RunConfig(RolloutConfig, ServiceConfig, WebSearchConfig, KnowledgeConfig, MemorizationConfig, EvidenceConfig,
                DifficultyConfig, HealthConfig, ProbeConfig):
    """All parameters of one run, flat and typed. Build it with :meth:`from_params` or :meth:`from_globals`.

    The rollout settings (max_searches, top_k, max_turn_tokens, max_completion_tokens, temperature, top_p, the
    retriever's timeouts and retries, forced and explored openers, ...) are declared once, in
    :class:`searchrl.rollout.RolloutConfig`, and inherited here so that params files set them flat;
    :meth:`rollout_config` hands them on as that object.
    """

    # == general ==
    run_name: str = ""
    """Label appended to the run folder's id (outputs/<notebook>/<timestamp>-<suffix>-<run_name>); empty: id only."""
    seed: int = 0
    """Random seed for sampling, initialisation and data order."""
    output_root: str = "outputs"
    """Folder that holds run folders; a relative path is taken from the project root."""
    evidence_copy_dir: str = ""
    """Folder that receives a slim copy of the run folder (`python -m searchrl.slim`: no weights), as
    <folder>/<notebook>/<run>, each time an ablation arm finishes and when the run ends, replacing the previous copy;
    for a machine that may be lost, point it at a folder that outlives it (synced, mounted, or in git). A relative
    path is taken from the project root. Empty: no copy."""
    resume: bool = False
    """Continue the run in the current run folder from its last checkpoint (set by `searchrl.runner --resume`)."""
    report_to: str = "none"
    """Experiment tracker handed to TRL: none, tensorboard, trackio, wandb (or another transformers integration)."""
    device: str = "auto"
    """Where to run: auto (GPU when present), cpu, cuda, cuda:N or mps."""
    torch_threads: int = 0
    """CPU threads for torch (0 keeps torch's default, one a core, and warns when other processes already use the
    cores). On a busy shared CPU, 1 can be several times faster (searchrl.core.threads)."""

    # == model ==
    model: str = "smollm2-135m-instruct"
    """Policy model: a name from the model registry or a local path / hub id."""
    use_peft: bool = False
    """Train LoRA adapters instead of all weights."""
    lora_r: int = 16
    """LoRA rank (only with use_peft)."""
    lora_alpha: int = 32
    """LoRA scaling numerator (only with use_peft)."""
    bf16: bool = False
    """Train in bfloat16 mixed precision: the forward and backward passes autocast to bfloat16, the policy's weights
    and optimizer state stay float32 (stored in bfloat16, small updates round away); rollouts are generated in
    float32 (on this CPU, bfloat16 decoding ran 0.7-0.8x float32's speed: benchmarks/bf16_decode.py). Fast on GPUs,
    and on CPUs with native bf16 instructions: on this project's 2-core AVX512-BF16 machine (torch 2.13) RL's
    forward and backward pass ran 1.4-1.6x faster than float32, its gradient at cosine 0.995 to float32's, where two
    micro-batches' float32 gradients are at 0.03 (benchmarks/bf16_pass.py). Whether RL learns as well in bfloat16 on
    a CPU is not measured yet."""
    use_vllm: bool = False
    """Generate rollouts with vLLM (GPU only)."""
    vllm_gpu_memory_utilization: float = 0.3
    """Fraction of GPU memory vLLM may reserve, in (0, 1] (colocate mode; a server takes its own flag)."""
    vllm_mode: str = "colocate"
    """colocate (vLLM inside each training process, sharing its GPU) or server (a separate `trl vllm-serve` on
    other GPUs, whose weights TRL updates after every step; start it before training)."""
    vllm_server_url: str = ""
    """Base URL of the vLLM server in server mode, e.g. http://10.0.0.2:8000; empty: TRL's default (port 8000 on
    this host)."""

    # == data ==
    dataset: str = "synthetic"
    """Question source: 'synthetic' (generated world) or a path to a QA file."""
    corpus: str = ""
    """Path to the document corpus searched by the retriever; ignored for the synthetic dataset."""
    world_seed: int = 0
    """Seed of the synthetic world (entities, facts and their documents)."""
    world_entities: int = 200
    """Number of entities in the synthetic world (at least 30)."""
    world_passage_words: int = 100
    """Approximate words per synthetic passage; shorter passages make CPU rollouts cheaper."""
    train_question_types: list[str] = field(default_factory=list)
    """Question types used for training (e.g. single_hop, inference); empty: all types."""
    train_max_hops: int = 0
    """Keep only training questions of at most this many hops; 0: no limit. Equal to max_searches, every training
    question can be answered within the search budget, so a correct answer is reachable by sampling."""
    n_train: int = 256
    """Number of training questions."""
    n_eval: int = 100
    """Number of evaluation questions."""
    n_eval_untrained: int = 0
    """Evaluation questions for the "untrained" stage (a subset of the n_eval); 0: all n_eval. An untrained model
    rarely closes its answer, so each of its rollouts runs to the token budget: a subset shows the same zero for
    less time."""
    eval_split: str = "test"
    """Split of the dataset used for evaluation."""

    # == retrieval ==
    retriever: str = "bm25"
    """Retriever name from the retrieval registry: bm25 or dense, a retrieval service http://HOST:PORT, or a web
    search API web+https://HOST/PATH (web_* settings) (documents per search: top_k)."""

    # == protocol ==
    protocol: str = "search_r1"
    """Search protocol (tag format and prompt) from the protocol registry."""
    chat_prompt: bool = True
    """Wrap the prompt in the tokenizer's chat template."""

    # == cold start ==
    sft_examples: int = 0
    """Supervised cold-start examples before RL; 0: no cold start."""
    sft_question_types: list[str] = field(default_factory=lambda: ["single_hop"])
    """Question types used for the cold-start examples."""
    sft_type_weights: dict = field(default_factory=dict)
    """Demonstrations of each question type per round of the cold start's round robin over
    `sft_question_types` (a type not named: 1), e.g. {single_hop: 3} makes half of four types' demonstrations
    single-hop. A plan-first cold start with one single-hop demonstration in four plans "two facts" for every
    single-hop question (docs/lab/LOG.md, 2026-11-28, lever Zm's cold start)."""
    sft_epochs: float = 1.0
    """Epochs of cold-start training."""
    sft_plan_thought: bool = False
    """Demonstrations open with a plan that counts the question's facts ("This needs two facts: the mother of X,
    then the father of that mother.") instead of naming only the first, so the choice of how many searches is made
    right after the question (data/synthetic/trajectories.py `plan_sentence`). Synthetic world only."""
    sft_learning_rate: float = 5e-5
    """Learning rate of cold-start training."""
    sft_group_by_length: bool = False
    """Batch cold-start examples of similar length together (transformers' length-grouped sampler) instead of in
    random order, so that short items are not padded to a long one. Pays when lengths differ widely: R1-Searcher++'s
    knowledge cold start mixes 48 trajectories of up to 900 tokens with ~900 fact statements of ~30, and grouping
    cuts its padded tokens per epoch from ~250k to ~83k in batches of 8, and from ~95k to ~64k in micro-batches of 2
    (benchmarks/sft_padding.py)."""

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
    """Rollouts per question (the group size for group-relative advantages); at least 2."""
    prompts_per_step: int = 2
    """Distinct questions per optimizer step (each sampled num_generations times)."""
    gradient_accumulation_steps: int = 1
    """Generation batches (of prompts_per_step questions each) accumulated into one optimizer step."""
    num_iterations: int = 1
    """GRPO's mu (TRL's num_iterations): optimizer steps taken on each batch of rollouts. Above 1, a batch is reused
    for that many updates, each clipped against the log-probs the rollouts were sampled with (one extra forward pass
    per batch); rl_steps counts updates, so rl_steps 20 with num_iterations 2 samples 10 batches. More updates per
    CPU minute where rollouts dominate the step: on the 2-core CPU a reuse step took 40-70% of a sampling step (lever
    Zj in docs/lab/LOG.md, one seed: +0.05 F1, the interval touching 0)."""
    train_top_layers: int = 0
    """RL trains only the top N decoder blocks (and the final norm); the embeddings, the output layer and the blocks
    below stay frozen, so the backward pass stops at the lowest trained block (`searchrl.trainer.levers.freeze`). 0 trains
    every weight. A speed lever for CPUs, where the backward pass is the largest part of a step; not with use_peft.
    It may learn less (one seed per setting so far, a direction rather than a result): on lever X's recipe the top
    10 of 30 blocks at lr 1e-5 left half the greedy answers unchanged after 20 steps, and at 3e-5 did not learn X's
    per-type search choice (docs/lab/LOG.md, 2026-11-27)."""
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
    The same update (bnpo, which normalises per micro-batch, keeps TRL's order and only loses the padding); measured
    1.05x on the forward and backward passes here (docs/lab/LOG.md, 2026-11-26), so off by default."""
    shared_prefix: bool = True
    """In RL's forward and backward passes, run the prompt prefix that all rows of a micro-batch share (the
    protocol's instructions) once, and only each row's remainder against it (`searchrl.trainer.shared_prefix`).
    The same loss and update up to float rounding (tests/test_micro_batches.py); measured 1.42x on the forward and
    backward passes of micro-batches of 4 real rollouts here (`benchmarks/shared_prefix.py`, docs/lab/LOG.md
    2026-11-27). One process only: under several, TRL's own pass runs. Runs before this setting existed used
    TRL's pass; set false to repeat one bit for bit."""
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
    groups on each side, not by the question (docs/lab/LOG.md, 2026-11-28, levers Zt and Zu); weights even the counts out."""
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
    stage1_rewards: list[str] = field(default_factory=lambda: ["preset:r1_searcher_stage1"])
    """Rewards of the first stage when two_stage is on, named as in `rewards` (their options in reward_options).
    R1-Searcher's: retrieving and the format (eq. 1 + eq. 2); e.g. [support_recall, format_r1s_stage1] pays for
    retrieving the question's supporting passages instead."""

    # == eval ==
    eval_batch_size: int = 16
    """Questions evaluated together in one batch."""
    eval_no_search: bool = False
    """Also evaluate the final policy with a search budget of 0 (stage "no search"): the answer-without-searching
    baseline per question type, which shows whether a type's F1 comes from searching or from guessing."""
    n_trajectories_shown: int = 3
    """Example trajectories printed in the notebook after evaluation."""

    # == benchmarks ==
    benchmarks: list[str] = field(default_factory=list)
    """Benchmarks evaluated by the eval_benchmarks notebook, by name: synthetic (the world_* settings' world) or one
    of searchrl.data.benchmarks (hotpotqa, nq,
    triviaqa, popqa, bamboogle, r1s_hotpotqa, r1s_2wiki, r1s_musique, r1s_bamboogle); n_eval questions of each,
    subsampled by seed. `corpus`, when set, replaces each benchmark's default corpus."""
    eval_models: list[str] = field(default_factory=list)
    """Search policies evaluated on the benchmarks: 'policy' (the `model` field, untrained), a bundled name, a
    saved model folder, or a run folder (its newest saved policy, under the protocol it was trained with)."""
    baselines: list[str] = field(default_factory=list)
    """Baselines evaluated beside the policies, by name (searchrl.evaluation.baselines: naive, cot, rag, ircot,
    prompted_search[:protocol], sft:<checkpoint>, rl_no_search:<checkpoint>, evidence_tool:<checkpoint>[@<answerer>]
    (R-Search-as-a-Tool: a trained r_search policy's evidence answered by another model)); they use `model`."""
    eval_metrics: list[str] = field(default_factory=lambda: ["em", "f1", "cem"])
    """Answer metrics reported (searchrl.metrics.scoring), including paper variants such as cem:r1_searcher."""
    judge: str = "none"
    """LLM judge for the papers' ACC_L: none, local[:<model>], openai:<model>[@<base url>] (key from
    $SEARCHRL_JUDGE_API_KEY or $OPENAI_API_KEY). Verdicts are cached in the run folder."""
    paper_layouts: list[str] = field(default_factory=list)
    """Paper table layouts to render beside the papers' numbers: search_r1_table2, r1_searcher_table2,
    r1_searcher_pp_table1."""
    data_dir: str = ""
    """Folder with the released benchmark files; empty: $SEARCHRL_DATA, else ../shared/data when it exists."""
    index_cache_dir: str = ""
    """Where dense retrieval caches corpus embeddings; empty: $SEARCHRL_INDEX_CACHE, else ~/.cache/searchrl/indexes."""

    # == ablation ==
    arms: dict = field(default_factory=dict)
    """The arms of an ablation notebook, by name: {arm name: {parameter: value, ...}}, each a set of overrides of
    this config (e.g. {em: {rewards: [em]}, f1: {rewards: [f1]}}). Every arm shares the cold start and the held-out
    questions; each runs in its own sub-folder. Checked like any parameter before anything runs."""
    seeds: list[int] = field(default_factory=list)
    """Seeds every arm runs with (empty: the single `seed`). Curves show the mean over seeds with a band."""
    cold_start_arm: bool = False
    """Also evaluate each seed's shared cold start on the held-out questions, as one more arm named `cold_start`
    (no RL; the cold start of the arms that change nothing it depends on), and every other cold start an arm starts
    from as an arm `cold_start.<arm>`: the tables then show what RL changed, and a claim may name them
    ({better: grpo, worse: cold_start}). Costs one evaluation per seed and cold start."""
    cold_start_from: str = ""
    """An arm whose cold start this arm starts from, in place of the one its own settings make ('' or its own name:
    its own). Set it in an arm's overrides when the arm changes a setting the cold start also reads (top_k,
    max_searches) but the comparison is about RL alone, as in the papers, which train without SFT."""
    claims: dict = field(default_factory=dict)
    """The papers' claims an ablation checks, by label: {label: {better: arm, worse: arm, metric: f1|em|...,
    source: 'paper, table'}}. The verdict table gives our difference better - worse, each question's averaged
    over the seeds, with a paired bootstrap interval over questions."""
    report_runs: list[str] = field(default_factory=list)
    """Ablation run folders the report notebook collects; empty: the newest finished run of each ablation notebook
    under output_root."""

    def __post_init__(self) -> None:
        # Direct construction validates too, so no RunConfig can exist with a wrong type or range.
        values = {name: getattr(self, name) for name in _FIELD_TYPES}
        problems: list[str] = []
        normalized = {}
        for name, value in values.items():
            ok, value_or_msg = _coerce(name, value)
            if ok:
                normalized[name] = value_or_msg
            else:
                problems.append(value_or_msg)
        if not problems:
            problems = [msg for _, msg in _semantic_problems(normalized)]
        if problems:
            raise ConfigError("invalid RunConfig:\n  " + "\n  ".join(problems))
        for name, value in normalized.items():
            object.__setattr__(self, name, value)

    # ---------------------------------------------------------------------------------------------- building

    @classmethod
    def from_params(
        cls, params: Mapping[str, Any] | None = None, *yaml_paths: str | Path, **overrides: Any
    ) -> RunConfig:
        """Build a config from defaults < ``yaml_paths`` (in order) < ``params`` < ``overrides``.

        Raises :class:`ConfigError` listing every unknown key (with the nearest valid one), wrongly typed value and
        out-of-range value, each with the place it came from.
        """
        sources: list[tuple[str, Mapping[str, Any]]] = []
        for path in yaml_paths:
            values, _ = load_params_file(path)
            sources.append((str(path), values))
        if params:
            sources.append(("params", params))
        if overrides:
            sources.append(("overrides", overrides))
        return cls.merge(*sources)

    @classmethod
    def merge(cls, *sources: tuple[str, Mapping[str, Any]]) -> RunConfig:
        """Build a config from ``(label, values)`` pairs, later ones winning; labels name the source in errors."""
        merged: dict[str, Any] = {}
        origin: dict[str, str] = {}
        problems: list[str] = []
        for label, values in sources:
            if not isinstance(values, Mapping):
                problems.append(f"{label}: expected a mapping of parameter names to values, got {_show(values)}")
                continue
            for key, value in values.items():
                problem = _unknown_key_problem(key, label)
                if problem:
                    problems.append(problem)
                    continue
                ok, value_or_msg = _coerce(key, value)
                if not ok:
                    problems.append(f"{label}: {value_or_msg}")
                    continue
                merged[key] = value_or_msg
                origin[key] = label
        if not problems:
            full = {**cls.defaults(), **merged}
            problems = [f"{origin.get(name, 'default')}: {msg}" for name, msg in _semantic_problems(full)]
        if problems:
            raise ConfigError("invalid parameters:\n  " + "\n  ".join(problems) + f"\n({_DESCRIBE_HINT})")
        return cls(**merged)

    @classmethod
    def from_globals(cls, namespace: Mapping[str, Any], **overrides: Any) -> RunConfig:
        """Build a config from a notebook's globals: ``RunConfig.from_globals(globals())``.

        Call it in the cell right after the ``parameters`` cell. At that point the only globals holding plain data
        (number, string, bool, list, dict) are the parameters cell's values and whatever papermill injected, so
        every such global must be a parameter: an unknown name (``lerning_rate``, papermill's ``-p lr 1e-4``)
        raises :class:`ConfigError` with the nearest valid name instead of being silently ignored. Modules,
        functions, classes, other objects, ``_private`` and ALL_CAPS names and IPython's own globals are left
        alone. Values given as text (papermill passes ``-p rewards "[em]"`` as a string) are read as YAML.
        """
        params = {name: namespace[name] for name in _FIELD_TYPES if name in namespace}
        problems = []
        for name, value in namespace.items():
            if (name in _FIELD_TYPES or name.startswith("_") or name.isupper() or name in _IPYTHON_GLOBALS
                    or name in RESERVED_YAML_KEYS):  # `notebook:` of a params file, passed on by papermill -f
                continue
            if not isinstance(value, (bool, int, float, str, list, tuple, dict)):
                continue
            problems.append(f"{_unknown_key_problem(name, 'notebook globals')} (a plain value defined before the "
                            "config is built must be a parameter)")
        if problems:
            raise ConfigError("invalid parameters:\n  " + "\n  ".join(problems) + f"\n({_DESCRIBE_HINT})")
        sources = [("notebook parameters", params)]
        if overrides:
            sources.append(("overrides", overrides))
        return cls.merge(*sources)

    def rollout_config(self) -> RolloutConfig:
        """The rollout settings of this run, as the object training, evaluation and rejection sampling take."""
        return RolloutConfig(**{f.name: getattr(self, f.name) for f in dataclasses.fields(RolloutConfig)})

    def replace(self, **changes: Any) -> RunConfig:
        """A copy with ``changes`` applied and validated (the config itself is immutable)."""
        return type(self).merge(("current config", self.to_dict()), ("replace", changes))

    # ---------------------------------------------------------------------------------------------- reading

    @classmethod
    def field_names(cls) -> tuple[str, ...]:
        """Names of all parameters, in schema order."""
        return tuple(_FIELD_TYPES)

    @classmethod
    def field_type(cls, name: str) -> type | Any:
        """The declared type of parameter ``name`` (e.g. ``int``, ``list[str]``)."""
        if name not in _FIELD_TYPES:
            raise ConfigError(_unknown_key_problem(name, "field_type"))
        return _FIELD_TYPES[name]

    @classmethod
    def defaults(cls) -> dict[str, Any]:
        """Default value of every parameter (fresh lists, safe to modify)."""
        out = {}
        for f in dataclasses.fields(cls):
            out[f.name] = f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default
        return out

    def to_dict(self) -> dict[str, Any]:
        """All parameters as a plain dict (lists copied), in schema order."""
        return {name: _copy(getattr(self, name)) for name in _FIELD_TYPES}

    def changed(self) -> dict[str, Any]:
        """Only the parameters that differ from their defaults."""
        defaults = self.defaults()
        return {k: v for k, v in self.to_dict().items() if v != defaults[k]}

    def to_yaml(self, path: str | Path | None = None, header: str = "") -> str:
        """The parameters as YAML (schema order), written to ``path`` when given; ``header`` becomes comments."""
        lines = [f"# {line}".rstrip() for line in header.splitlines()]
        body = yaml.safe_dump(self.to_dict(), sort_keys=False, default_flow_style=None, width=120)
        text = "\n".join(lines) + ("\n" if lines else "") + body
        if path is not None:
            Path(path).write_text(text, encoding="utf-8")
        return text

    @classmethod
    def describe(cls) -> str:
        """A table of every parameter (section, name, type, default, documentation), then every registry's names.

        The registries are read where they live (``searchrl.core.registry``), with their entries' descriptions, so
        the entry points (``python -m searchrl.config``, ``searchrl params``) import them first; one not imported
        lists its built-in names only."""
        defaults = cls.defaults()
        rows = [("name", "type", "default", "doc")]
        order = {section: i for i, section in enumerate(SECTION_ORDER)}
        names = sorted(_FIELD_TYPES, key=lambda n: order.get(FIELD_SECTIONS.get(n, ""), len(order)))
        for name in names:
            rows.append((name, _type_name(_FIELD_TYPES[name]), repr(defaults[name]), FIELD_DOCS.get(name, "")))
        widths = [max(len(r[i]) for r in rows) for i in range(3)]

        def fmt(row: tuple[str, ...]) -> str:
            return "  ".join(cell.ljust(widths[i]) for i, cell in enumerate(row[:3])) + "  " + row[3]

        out = [fmt(rows[0])]
        section = None
        for row in rows[1:]:
            if FIELD_SECTIONS.get(row[0]) != section:
                section = FIELD_SECTIONS.get(row[0])
                out.append(f"-- {section} --")
            out.append(fmt(row))
        for title, registry in (("protocol", PROTOCOLS), ("retriever", RETRIEVERS), ("rewards", REWARDS),
                                ("rewards: presets (write preset:<name>)", REWARD_PRESETS),
                                ("advantage_estimator", ADVANTAGE_ESTIMATORS)):
            out += ["", f"== {title} ==", _registry_description(registry)]
        return "\n".join(out)


def _registry_description(choices: Choices) -> str:
    """The live registry's own listing (names and descriptions), else the built-in names one a line."""
    live = choices.live
    return live.describe() if live is not None else "\n".join(f"  {name}" for name in choices.names())


# --------------------------------------------------------------------------------------------------------------
# Options fixed by outside libraries; registry names (protocol, retriever, rewards, advantage_estimator, ...) are
# checked as their registries check them (searchrl.config.names), model names in searchrl.config.evidence.
# --------------------------------------------------------------------------------------------------------------

CHOICES: dict[str, tuple[str, ...]] = {
    "loss_type": ("grpo", "dr_grpo", "dapo", "bnpo", "cispo", "sapo", "luspo", "vespo"),
    "scale_rewards": ("group", "batch", "none"),
    "lr_scheduler_type": ("linear", "constant", "constant_with_warmup", "cosine"),
    "prompt_selection": PROMPT_SELECTIONS,
    "dynamic_sampling_draw": DRAW_SIZES,
    "vllm_mode": ("colocate", "server"),
    "report_to": (
        "none", "all", "tensorboard", "trackio", "wandb", "mlflow", "azure_ml", "clearml", "codecarbon",
        "comet_ml", "dagshub", "dvclive", "flyte", "kubeflow", "neptune", "swanlab",
    ),
}  # fmt: skip

_DEVICE_PATTERN = re.compile(r"^(auto|cpu|mps|cuda(:\d+)?)$")

# Lower bounds (inclusive) of integer and float sizes; (name, minimum).
_MINIMUMS: dict[str, float] = {
    "seed": 0, "lora_r": 1, "lora_alpha": 1, "world_entities": 30, "n_train": 0, "n_eval": 0, "sft_examples": 0,
    "rl_steps": 0, "num_generations": 2, "prompts_per_step": 1, "gradient_accumulation_steps": 1, "beta": 0.0,
    "logging_steps": 1, "save_steps": 1, "stage1_steps": 0, "eval_batch_size": 1, "n_trajectories_shown": 0,
    "world_seed": 0, "world_passage_words": 20, "torch_threads": 0, "reward_kl_coef": 0.0, "train_max_hops": 0,
    "n_eval_untrained": 0, "micro_batch_size": 0, "num_iterations": 1, "train_top_layers": 0,
    "dynamic_sampling_max_draws": 1,
}  # fmt: skip
_POSITIVE = ("learning_rate", "sft_learning_rate", "sft_epochs", "vllm_gpu_memory_utilization", "value_lr")


def _type_weight_problems(values: Mapping[str, Any], name: str, types_name: str) -> list[tuple[str, str]]:
    """A question-type weight table (`name`): each type among `types_name` (empty: every type), each weight a whole
    number >= 1."""
    problems = []
    for qtype, weight in values[name].items():
        if values[types_name] and qtype not in values[types_name]:
            problems.append((name, f"{name} names {qtype!r}, which is not in {types_name} {values[types_name]}"))
        elif isinstance(weight, bool) or not isinstance(weight, int) or weight < 1:
            problems.append((name, f"{name}[{qtype!r}] must be a whole number >= 1, got {weight!r}"))
    return problems


def _semantic_problems(values: Mapping[str, Any]) -> list[tuple[str, str]]:
    """Range and consistency problems of a complete, well-typed parameter set, as (field, message)."""
    problems = list(rollout_problems(SimpleNamespace(**values)))
    for name, low in _MINIMUMS.items():
        if values[name] < low:
            problems.append((name, f"{name} must be >= {low}, got {values[name]!r}"))
    for name in _POSITIVE:
        if not values[name] > 0:
            problems.append((name, f"{name} must be > 0, got {values[name]!r}"))
    if not 0 <= values["warmup_ratio"] < 1:
        problems.append(("warmup_ratio", f"warmup_ratio is a share of rl_steps in [0, 1); got {values['warmup_ratio']!r}"))
    if values["vllm_gpu_memory_utilization"] > 1:
        problems.append(("vllm_gpu_memory_utilization", "vllm_gpu_memory_utilization must be at most 1"))
    step = values["prompts_per_step"] * values["num_generations"]
    if values["micro_batch_size"] > 0 and step % values["micro_batch_size"]:
        why = f"micro_batch_size must divide prompts_per_step x num_generations = {step}; got {values['micro_batch_size']}"
        problems.append(("micro_batch_size", why))
    openers = values["explore_openers"]
    if openers and values["num_generations"] % len(openers):
        why = (f"num_generations ({values['num_generations']}) must be a multiple of the number of explore_openers "
               f"({len(openers)}), so that every group starts each opener equally often")
        problems.append(("explore_openers", why))
    if values["train_top_layers"] and values["use_peft"]:
        why = "train_top_layers freezes full weights and use_peft trains adapters; choose one (0 with LoRA)"
        problems.append(("train_top_layers", why))
    url = values["vllm_server_url"]
    if url and not re.match(r"^https?://[^/\s]+", url):
        problems.append(("vllm_server_url",
                         f"vllm_server_url must be an http(s) base URL like http://host:8000; got {url!r}"))
    for name, options in CHOICES.items():
        chosen = [v.strip() for v in values[name].split(",")] if name == "report_to" else [values[name]]
        for v in chosen:
            if v not in options:
                near = difflib.get_close_matches(v, options, n=1)
                hint = f" (did you mean {near[0]!r}?)" if near else ""
                problems.append((name, f"{name} must be one of {', '.join(options)}; got {v!r}{hint}"))
    if not _DEVICE_PATTERN.match(values["device"]):
        problems.append(("device", f"device must be auto, cpu, mps, cuda or cuda:N; got {values['device']!r}"))
    problems += _type_weight_problems(values, "sft_type_weights", "sft_question_types")
    if values["train_type_weights"] and values["prompt_selection"] != "stratified":
        why = ("train_type_weights needs prompt_selection: stratified (it sets each type's share of a stratified "
               f"turn); got {values['prompt_selection']!r}")
        problems.append(("train_type_weights", why))
    else:
        problems += _type_weight_problems(values, "train_type_weights", "train_question_types")
    if values["reward_weights"] and len(values["reward_weights"]) != len(values["rewards"]):
        problems.append(
            (
                "reward_weights",
                (
                    f"reward_weights has {len(values['reward_weights'])} entries but rewards has "
                    f"{len(values['rewards'])} ({values['rewards']}); give one weight per reward or leave it empty"
                ),
            )
        )
    problems.extend(_registry_problems(values))
    problems.extend(_ablation_problems(values))
    # Each mechanism's settings are declared (and range-checked) in their own module; RunConfig inherits them.
    problems.extend(service_problems(values) + web_search_problems(values) + knowledge_problems(values)
                    + memorization_problems(values) + evidence_problems(values) + difficulty_problems(values)
                    + health_problems(values) + probe_problems(values))
    problems.extend(_environment_problems(values))
    if not values["rewards"] and values["rl_steps"] > 0:
        problems.append(("rewards", "rewards is empty but rl_steps > 0; name at least one reward"))
    if values["rl_steps"] > 0 and values["temperature"] == 0:  # a negative one is reported by rollout_problems
        problems.append(("temperature", ("temperature is 0 but rl_steps > 0, and RL samples its rollouts, so set "
                                         "temperature > 0 (e.g. 1.0; evaluation decodes greedily anyway)")))
    problems += _question_count_problems(values)
    if values["two_stage"] and not 0 < values["stage1_steps"] <= values["rl_steps"]:
        problems.append(
            ("stage1_steps", f"two_stage needs 0 < stage1_steps <= rl_steps, got stage1_steps={values['stage1_steps']}")
        )
    return problems


def _question_count_problems(values: Mapping[str, Any]) -> list[tuple[str, str]]:
    """Without `benchmarks` a config describes an Experiment (quickstart, the ablations; report reads neither
    count), which stops before training when its training or evaluation questions are none, so a zero count is
    refused here. eval_benchmarks passes n_eval 0 on as "all questions" of a released benchmark, which the synthetic
    one (held_out_rows) does not share."""
    problems = []
    benchmarks = values["benchmarks"]
    if values["n_eval"] == 0 and not benchmarks:
        why = "n_eval is 0, which leaves no held-out questions for the evaluation every run makes, so set n_eval >= 1"
        problems.append(("n_eval", why))
    elif values["n_eval"] == 0 and "synthetic" in benchmarks:
        why = ("n_eval is 0, which means all questions for a released benchmark but none for the synthetic one in "
               "benchmarks, so set n_eval >= 1")
        problems.append(("n_eval", why))
    if values["n_train"] == 0 and not benchmarks:
        why = "n_train is 0, which leaves no training questions and a run needs at least one, so set n_train >= 1"
        problems.append(("n_train", why))
    return problems


def _ablation_problems(values: Mapping[str, Any]) -> list[tuple[str, str]]:
    """Each arm's overrides must make a valid config on their own (typos fail naming the arm); claims must name
    arms that exist. The ablation package (searchrl.experiments.ablation) runs ablations with these same checks."""
    if not values["arms"] and not values["claims"]:
        return []
    problems = []
    base = ablation_base(values)
    for arm, overrides in values["arms"].items():
        if not isinstance(overrides, Mapping):
            problems.append(("arms", f"arms: arm {arm!r} must map parameter names to values, got {_show(overrides)}"))
            continue
        problems += [("arms", f"arms: {problem}") for problem in arm_problems(base, str(arm), overrides)]
    if not problems:
        problems += [("arms", f"arms: {problem}") for problem in cold_start_source_problems(values)]
    if values["claims"]:
        try:
            parse_claims(values["claims"], arm_names(values))
        except ConfigError as error:
            lines = [line.strip() for line in str(error).splitlines()]
            problems += [("claims", f"claims: {line}") for line in (lines[1:] if len(lines) > 1 else lines)]
    return problems


def _environment_problems(values: Mapping[str, Any]) -> list[tuple[str, str]]:
    """What can be known before any work: data files exist, the device exists, the split exists."""
    problems = []
    if values["dataset"] != "synthetic":
        for name in ("dataset", "corpus"):
            path = Path(values[name]).expanduser() if values[name] else None
            if path is None:
                problems.append((name, f"{name} is empty; dataset is a file, so name the {name} file too"))
            elif not path.exists():
                problems.append((name, f"{name}: no such file {values[name]!r} (relative paths start at {Path.cwd()})"))
    elif values["eval_split"] not in SPLITS:
        problems.append(("eval_split", (f"eval_split must be one of {', '.join(SPLITS)} for the synthetic world, "
                                       f"got {values['eval_split']!r}")))
    device = values["device"]
    if device.startswith("cuda") or device == "mps":
        import torch

        if device == "mps" and not torch.backends.mps.is_available():
            problems.append(("device", "device is mps but this machine has no MPS device; use device: auto"))
        elif device.startswith("cuda"):
            index = int(device.split(":")[1]) if ":" in device else 0
            if not torch.cuda.is_available():
                problems.append(("device", (f"device is {device} but no CUDA GPU is visible here; use device: auto "
                                           "(GPU when present) or cpu")))
            elif index >= torch.cuda.device_count():
                problems.append(("device", f"device is {device} but only {torch.cuda.device_count()} GPU(s) exist"))
    return problems


def _registry_problems(values: Mapping[str, Any]) -> list[tuple[str, str]]:
    """Names picked from the ablation registries (protocols, rewards, retrievers, estimators) must exist, so a typo
    fails here rather than after the model has loaded. Import paths (my_module:thing) are imported to check them.
    Each name is checked by its registry where that is imported (so a notebook's own entries pass), else against
    the built-in names (searchrl.config.names), with the same messages."""
    problems = []
    for name, registry in (("protocol", PROTOCOLS), ("retriever", RETRIEVERS),
                           ("advantage_estimator", ADVANTAGE_ESTIMATORS)):
        problem = registry.problem(values[name])
        if problem:
            problems.append((name, f"{name}: {problem}"))
    problems += [("rewards", f"rewards: {p}") for p in reward_problems(values["rewards"], values["reward_options"])]
    if values["two_stage"]:
        problems += [("stage1_rewards", f"stage1_rewards: {p}")
                     for p in reward_problems(values["stage1_rewards"], values["reward_options"])]
    return problems + _evaluation_problems(values)


def _evaluation_problems(values: Mapping[str, Any]) -> list[tuple[str, str]]:
    """The eval_benchmarks notebook's names (benchmarks, baselines, metrics, layouts, judge) must exist."""
    problems = []
    benchmarks = [b for b in values["benchmarks"] if b != "synthetic"]  # the synthetic world is always there
    for name, registry, entries in (("benchmarks", BENCHMARKS, benchmarks),
                                    ("paper_layouts", LAYOUTS, values["paper_layouts"])):
        problems += [(name, f"{name}: {p}") for p in map(registry.problem, entries) if p]
    problems += [("benchmarks", f"benchmarks: {p}") for p in map(_benchmark_without_questions, benchmarks) if p]
    for entry in values["eval_metrics"]:
        try:
            metric_name_key(entry)  # also checks a paper variant's ':' suffix
        except (TypeError, ValueError) as error:
            problems.append(("eval_metrics", f"eval_metrics: {error}"))
    problems += [("baselines", f"baselines: {p}") for p in map(baseline_problem, values["baselines"]) if p]
    try:
        metric_name_key(values["difficulty_metric"])
    except (TypeError, ValueError) as error:
        problems.append(("difficulty_metric", f"difficulty_metric: {error}"))
    judge = judge_setting_problem(values["judge"])
    if judge:
        problems.append(("judge", f"judge: {judge}"))
    return problems


def _benchmark_without_questions(name: str) -> str | None:
    """A benchmark whose questions come from a file named at load time (`custom`): no RunConfig field can name that
    file, so the eval_benchmarks notebook would fail when it reaches it."""
    if BENCHMARKS.problem(name):
        return None  # reported as an unknown name already
    live = BENCHMARKS.live
    # Without the registry, a name is a built-in benchmark or an import path, whose object is no BenchmarkSpec
    # (a module that builds one imports the registry's module, which then answers).
    if not (live.without_questions(name) if live is not None else BENCHMARKS.key(name) in BENCHMARKS_WITHOUT_QUESTIONS):
        return None
    return (f"{name!r} reads its questions from a file no parameter can name, so remove it here and evaluate it "
            f"from Python: load_benchmark({name!r}, questions=\"my_questions.jsonl\", corpus=...)")


# --------------------------------------------------------------------------------------------------------------
# Ablations: an arm's config is the ablation's with the arm's overrides; the checks that need RunConfig itself.
# --------------------------------------------------------------------------------------------------------------

# Settings the cold start does not read. Every other setting (including any added later) keys the shared cold start,
# so an unknown setting costs an extra cold start instead of silently sharing a wrong one.
# The cold start trains on templated trajectories of the run's data: the RL-side data selection, the health checks
# of RL training and the memorization loss (R1-Searcher++'s, added to RL's loss only) do not change it.
_NOT_COLD_START_SECTIONS = ("RL", "eval", "benchmarks", "ablation", "data difficulty", "training health",
                            "memorization")
_NOT_COLD_START_FIELDS = (
    # where the run is recorded, and how it computes
    "run_name", "output_root", "evidence_copy_dir", "resume", "report_to", *COMPUTE_ONLY_SETTINGS,
    # generation engine and sampling: the cold start trains on templated trajectories, it samples nothing
    "use_vllm", "vllm_gpu_memory_utilization", "vllm_mode", "vllm_server_url", "temperature", "top_p",
    # retriever service retries, waits and outages, and the untrained evaluation's subset
    "retriever_timeout_s", "retriever_retries", "retriever_backoff_s", "retriever_outage_s", "service_wait_s",
    "n_eval_untrained",
)  # fmt: skip


def arm_problems(base: Mapping[str, Any], name: str, overrides: Mapping[str, Any]) -> list[str]:
    """What is wrong with arm `name` (its folder name, a setting no arm may change, or its overrides on top of `base`,
    an ablation's values without its own lists: `ablation_base`), one message a problem, each naming the arm.
    RunConfig's own validation calls this too, so a params file with a bad arm fails before anything runs."""
    arm = Arm(name, dict(overrides))
    problem = arm_name_problem(arm)
    if problem:
        return [problem]
    try:
        RunConfig.merge(("ablation config", base), (f"arm {arm.name!r}", arm.overrides))
    except ConfigError as error:
        # merge's message lists one problem a line under a header, then a hint line "(list them with ...)"
        lines = [line.strip() for line in str(error).splitlines()[1:] if line.startswith("  ")]
        return [line if arm.name in line else f"arm {arm.name!r}: {line}" for line in lines] or [str(error)]
    return []


def arm_names(values: Mapping[str, Any]) -> list[str]:
    """The names of the arms of an ablation's parameter `values`: `arms`' own, then those `cold_start_arm` adds."""
    named = [Arm(str(name), dict(overrides or {})) for name, overrides in values["arms"].items()]
    return [arm.name for arm in (with_cold_start_arm(named, values) if values["cold_start_arm"] else named)]


def with_cold_start_arm(arms: list[Arm], values: Mapping[str, Any]) -> list[Arm]:
    """`arms` and the arms that evaluate cold starts without RL (`values`: the ablation's parameters):

    - `cold_start` (unless an arm is named so): the cold start of the arms that change nothing it reads;
    - `cold_start.<arm>` for every other cold start an arm starts from, evaluated with the settings of `<arm>`, the
      first arm whose own it is (ablate_topk's top_k and max_searches arms each have one).

    So the table shows what RL changed in every arm, not only in those sharing the first cold start.
    """
    everyone = list(arms)
    if not any(arm.name == COLD_START_ARM for arm in arms):
        everyone.append(Arm(COLD_START_ARM, dict(COLD_START_OVERRIDES)))
    by_name = {arm.name: arm for arm in everyone}
    plan = {"arms": {a.name: a.overrides for a in everyone}, "cold_start_arm": False,
            "cold_start_from": values.get("cold_start_from", "")}
    sources, base = arm_sources(plan), ablation_base(values)
    if source_problems(sources):
        return everyone  # reported by the checks of `cold_start_from`
    try:
        keys = {name: cold_start_key(RunConfig.merge(("ablation config", base), (f"arm {name!r}", arm.overrides)))
                for name, arm in by_name.items()}
    except ConfigError:
        return everyone  # an invalid arm: reported by `arm_problems`
    seen = {keys[sources[COLD_START_ARM]]}
    for arm in arms:
        source = sources[arm.name]
        if keys[source] in seen:
            continue
        seen.add(keys[source])
        own = {k: v for k, v in by_name[source].overrides.items() if k != "cold_start_from"}
        everyone.append(Arm(f"{COLD_START_ARM}.{source}", {**own, "cold_start_from": "", **COLD_START_OVERRIDES}))
    return everyone


def cold_start_settings(cfg: RunConfig) -> dict[str, Any]:
    """The settings a cold start depends on (everything but RL, evaluation, benchmarks and bookkeeping)."""
    return {name: value for name, value in cfg.to_dict().items()
            if FIELD_SECTIONS.get(name) not in _NOT_COLD_START_SECTIONS and name not in _NOT_COLD_START_FIELDS}


def cold_start_key(cfg: RunConfig) -> str:
    """A short name for `cfg`'s cold start: equal for configs whose cold starts are the same."""
    text = json.dumps(cold_start_settings(cfg), sort_keys=True, default=str)
    return hashlib.sha1(text.encode("utf-8")).hexdigest()[:8]


# --------------------------------------------------------------------------------------------------------------
# Type checking: exact types, with the few conversions a person means (int for float, tuple for list).
# --------------------------------------------------------------------------------------------------------------


def _coerce(name: str, value: Any) -> tuple[bool, Any]:
    """(True, normalized value) or (False, message) for ``value`` given to field ``name``.

    A string given to a number, bool, list or dict field is read as YAML first: plain papermill passes ``-p rewards
    "[em]"`` as the text "[em]", and PyYAML's default loader reads ``1e-4`` as text.
    """
    ok, out = _coerce_typed(name, value)
    if not ok and isinstance(value, str) and _FIELD_TYPES[name] is not str:
        try:
            parsed = parse_scalar(value)
        except ConfigError:
            return ok, out
        if not isinstance(parsed, str):
            ok2, out2 = _coerce_typed(name, parsed)
            if ok2:
                return ok2, out2
    return ok, out


def _coerce_typed(name: str, value: Any) -> tuple[bool, Any]:
    expected = _FIELD_TYPES[name]
    if expected is bool:
        return (True, value) if isinstance(value, bool) else (False, _type_msg(name, expected, value))
    if expected is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return True, value
        if isinstance(value, float) and value.is_integer():
            # 1e3 in YAML is a float; a whole number is clearly meant.
            return True, int(value)
        return False, _type_msg(name, expected, value)
    if expected is float:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return True, float(value)
        return False, _type_msg(name, expected, value)
    if expected is str:
        return (True, value) if isinstance(value, str) else (False, _type_msg(name, expected, value))
    if expected is dict:
        if not isinstance(value, Mapping) or not all(isinstance(k, str) for k in value):
            return False, _type_msg(name, expected, value) + "; write a mapping, e.g. {name: {option: value}}"
        return True, {k: dict(v) if isinstance(v, Mapping) else v for k, v in value.items()}
    # list[str] / list[float]
    item_type = expected.__args__[0]
    if not isinstance(value, (list, tuple)):
        hint = f"; write a list, e.g. {name}: [{value}]" if isinstance(value, (str, int, float)) else ""
        return False, _type_msg(name, expected, value) + hint
    items = []
    for i, item in enumerate(value):
        if item_type is float and isinstance(item, (int, float)) and not isinstance(item, bool):
            items.append(float(item))
        elif (item_type is int and isinstance(item, int) and not isinstance(item, bool)) or (
                item_type is str and isinstance(item, str)):
            items.append(item)
        else:
            return False, f"parameter {name!r} expects {_type_name(expected)}, but item {i} is {_show(item)}"
    return True, items


def _type_msg(name: str, expected: Any, value: Any) -> str:
    return f"parameter {name!r} expects {_type_name(expected)}, got {_show(value)}"


def _show(value: Any) -> str:
    return f"{value!r} ({type(value).__name__})"


def _type_name(tp: Any) -> str:
    return tp.__name__ if isinstance(tp, type) and not getattr(tp, "__args__", None) else str(tp)


def _unknown_key_problem(key: Any, label: str) -> str | None:
    if key in _FIELD_TYPES:
        return None
    if not isinstance(key, str):
        return f"{label}: parameter names must be strings, got {_show(key)}"
    lower = {name.lower(): name for name in _FIELD_TYPES}
    if key.lower() in lower:
        near = [lower[key.lower()]]
    elif key in _ABBREVIATIONS:
        near = [_ABBREVIATIONS[key]]
    else:
        near = difflib.get_close_matches(key, _FIELD_TYPES, n=1, cutoff=0.6)
    hint = f" (did you mean {near[0]!r}?)" if near else ""
    return f"{label}: unknown parameter {key!r}{hint}"


# Short names people type for a parameter, which string similarity alone does not connect to it.
_ABBREVIATIONS = {"lr": "learning_rate", "steps": "rl_steps", "max_steps": "rl_steps", "k": "top_k",
                  "group_size": "num_generations", "max_completion_length": "max_completion_tokens",
                  "kl_coef": "beta", "epochs": "sft_epochs"}


def _copy(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _copy(v) for k, v in value.items()}
    return list(value) if isinstance(value, list) else value


# --------------------------------------------------------------------------------------------------------------
# YAML: PyYAML reads 1e-5 as a string (YAML 1.1 wants a dot); this loader reads it as the float everyone means.
# --------------------------------------------------------------------------------------------------------------


class _ParamsLoader(yaml.SafeLoader):
    """SafeLoader that also reads exponent floats without a dot (1e-5, 5E3) as floats."""


_ParamsLoader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"^[-+]?(?:[0-9][0-9_]*)(?:\.[0-9_]*)?[eE][-+]?[0-9]+$"),
    list("-+0123456789"),
)


def yaml_loader() -> type[yaml.SafeLoader]:
    """The YAML loader used for parameter files and ``-p`` values."""
    return _ParamsLoader


def parse_scalar(text: str) -> Any:
    """Parse a command-line value as YAML (``3`` -> 3, ``1e-5`` -> 1e-05, ``[em, f1]`` -> list, ``true`` -> True)."""
    try:
        return yaml.load(text, Loader=_ParamsLoader)  # a SafeLoader subclass
    except yaml.YAMLError as err:
        raise ConfigError(f"cannot parse value {text!r}: {err}") from None


def load_params_file(path: str | Path) -> tuple[dict[str, Any], str | None]:
    """Read a parameter file: returns (parameters, the notebook it declares or None).

    Raises :class:`ConfigError` naming the file when it is missing, is not valid YAML or is not a mapping. Keys are
    not checked here (that is :meth:`RunConfig.merge`'s job, which names the file too).
    """
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"parameter file not found: {path}")
    try:
        data = yaml.load(path.read_text(encoding="utf-8"), Loader=_ParamsLoader)
    except yaml.YAMLError as err:
        raise ConfigError(f"{path}: not valid YAML: {err}") from None
    if data is None:
        return {}, None
    if not isinstance(data, dict):
        raise ConfigError(
            f"{path}: a parameter file must be a mapping of names to values (name: value per line), "
            f"got {type(data).__name__}"
        )
    notebook = data.pop("notebook", None)
    if notebook is not None and not isinstance(notebook, str):
        raise ConfigError(f"{path}: 'notebook' must be a notebook name such as quickstart, got {_show(notebook)}")
    return data, notebook


# --------------------------------------------------------------------------------------------------------------
# Field documentation, read from this file's source so the docstrings under the fields are the single source.
# --------------------------------------------------------------------------------------------------------------


def _field_docs_from_source(cls: type) -> tuple[dict[str, str], dict[str, str]]:
    """(docs, sections) for the fields of ``cls`` and its dataclass bases: the string literal under each field and
    the section comment above it."""
    docs: dict[str, str] = {}
    sections: dict[str, str] = {}
    for klass in reversed(cls.__mro__):
        if dataclasses.is_dataclass(klass):
            more_docs, more_sections = _class_field_docs(klass)
            docs.update(more_docs)
            sections.update(more_sections)
    return docs, sections


def _class_field_docs(cls: type) -> tuple[dict[str, str], dict[str, str]]:
    try:
        source = textwrap.dedent(inspect.getsource(cls))
    except (OSError, TypeError):  # no source (frozen/zipped install): describe() shows empty docs
        return {}, {}
    lines = source.splitlines()
    body = ast.parse(source).body[0].body
    docs: dict[str, str] = {}
    sections: dict[str, str] = {}
    section = "general"
    last_line = 0
    for i, node in enumerate(body):
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            # A "# == name ==" comment between the previous statement and this field opens a section.
            for line in lines[last_line : node.lineno - 1]:
                m = re.match(r"\s*# == (.+?) ==", line)
                if m:
                    section = m.group(1)
            name = node.target.id
            sections[name] = section
            nxt = body[i + 1] if i + 1 < len(body) else None
            if isinstance(nxt, ast.Expr) and isinstance(nxt.value, ast.Constant) and isinstance(nxt.value.value, str):
                docs[name] = " ".join(nxt.value.value.split())
        last_line = getattr(node, "end_lineno", node.lineno)
    return docs, sections


def _field_types(cls: type) -> dict[str, Any]:
    # The module uses postponed annotations, so field types are strings; evaluate them once here.
    namespace = {"list": list, "int": int, "float": float, "bool": bool, "str": str, "dict": dict}
    return {f.name: eval(f.type, namespace) for f in dataclasses.fields(cls)}  # our own annotations


# describe() lists sections in this order (the rollout section is declared in RolloutConfig, hence first in MRO).
SECTION_ORDER = ("general", "model", "data", "retrieval", "protocol", "rollout", "cold start", "RL", "eval",
                 "benchmarks", "ablation", "retrieval service", "web search", "knowledge", "memorization", "evidence", "data difficulty", "training health")
# What IPython puts in a notebook's globals besides the user's own names.
_IPYTHON_GLOBALS = frozenset({"In", "Out", "exit", "quit", "get_ipython"})
_FIELD_TYPES: dict[str, Any] = _field_types(RunConfig)
FIELD_DOCS, FIELD_SECTIONS = _field_docs_from_source(RunConfig)

