"""The checks of a complete parameter set: ranges, options fixed by outside libraries, names picked from the
registries, consistency between settings, and what can be known about the environment before any work.

Each mechanism's settings are checked in their own module (`rollout_problems`, `service_problems`, ...); the checks
of an ablation's arms need `RunConfig` itself and live beside it (`searchrl.config.run`), handed in here.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from searchrl.config.choices import DRAW_SIZES, LR_SCHEDULES, PROMPT_SELECTIONS
from searchrl.config.data_names import SYNTHETIC, data_setting_problem, looks_like_path
from searchrl.config.difficulty import difficulty_problems
from searchrl.config.evidence import evidence_problems
from searchrl.config.health import health_problems
from searchrl.config.knowledge import knowledge_problems
from searchrl.config.memorization import memorization_problems
from searchrl.config.names import (
    ADVANTAGE_ESTIMATORS,
    BENCHMARKS,
    BENCHMARKS_WITHOUT_QUESTIONS,
    LAYOUTS,
    PROTOCOLS,
    RETRIEVERS,
    SPLITS,
    baseline_problem,
    judge_setting_problem,
    metric_name_key,
)
from searchrl.config.probe import probe_problems
from searchrl.config.replay import replay_fallback_problems
from searchrl.config.rewards import reward_problems
from searchrl.config.rollout import rollout_problems
from searchrl.config.service import service_problems
from searchrl.config.web_search import web_search_problems

__all__ = ["CHOICES", "Problems", "semantic_problems"]

Problems = list[tuple[str, str]]  # (field, message) pairs


# --------------------------------------------------------------------------------------------------------------
# Options fixed by outside libraries; registry names (protocol, retriever, rewards, advantage_estimator, ...) are
# checked as their registries check them (searchrl.config.names), model names in searchrl.config.evidence.
# --------------------------------------------------------------------------------------------------------------

CHOICES: dict[str, tuple[str, ...]] = {
    "loss_type": ("grpo", "dr_grpo", "dapo", "bnpo", "cispo", "sapo", "luspo", "vespo"),
    "scale_rewards": ("group", "batch", "none"),
    "lr_scheduler_type": LR_SCHEDULES,
    "value_lr_scheduler_type": LR_SCHEDULES,
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
    "rl_steps": 0, "num_generations": 1, "prompts_per_step": 1, "gradient_accumulation_steps": 1, "beta": 0.0,
    "logging_steps": 1, "save_steps": 1, "stage1_steps": 0, "eval_batch_size": 1, "n_trajectories_shown": 0,
    "world_seed": 0, "world_passage_words": 20, "torch_threads": 0, "reward_kl_coef": 0.0, "train_max_hops": 0,
    "n_eval_untrained": 0, "micro_batch_size": 0, "num_iterations": 1, "steps_per_generation": 1, "max_prompt_tokens": 0,
    "sft_batch_size": 1, "train_top_layers": 0, "dynamic_sampling_max_draws": 1, "eval_top_k": 0,
    "eval_temperature": 0.0, "eval_max_hops": 0, "train_world_seed": -1, "train_worlds": 1,
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


def semantic_problems(values: Mapping[str, Any], ablation_problems: Callable[[Mapping[str, Any]], Problems]) -> Problems:
    """Range and consistency problems of a complete, well-typed parameter set, as (field, message).

    `ablation_problems` checks the ablation's arms and claims, which takes building each arm's config
    (`searchrl.config.run`, beside `RunConfig`)."""
    problems = list(rollout_problems(SimpleNamespace(**values)))
    for name, low in _MINIMUMS.items():
        if values[name] < low:
            problems.append((name, f"{name} must be >= {low}, got {values[name]!r}"))
    for name in _POSITIVE:
        if not values[name] > 0:
            problems.append((name, f"{name} must be > 0, got {values[name]!r}"))
    for name in ("warmup_ratio", "value_warmup_ratio"):
        if not 0 <= values[name] < 1:
            problems.append((name, f"{name} is a share of rl_steps in [0, 1); got {values[name]!r}"))
    problems += _single_response_problems(values)
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
    if values["train_worlds"] > 1 and values["train_world_seed"] < 0:
        problems.append(("train_worlds", "train_worlds > 1 needs train_world_seed >= 0 (the first training world)"))
    first = values["train_world_seed"]
    if first >= 0 and first <= values["world_seed"] < first + values["train_worlds"]:
        why = (f"world_seed {values['world_seed']} is among the training worlds (seeds {first} to "
               f"{first + values['train_worlds'] - 1}): its held-out questions would be trained on")
        problems.append(("train_world_seed", why))
    if values["train_worlds"] > 1 and values["knowledge_internal_frac"]:
        why = "the knowledge split is drawn per world; with train_worlds > 1 keep knowledge_internal_frac at 0"
        problems.append(("train_worlds", why))
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
    problems.extend(ablation_problems(values))
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
    problems += _question_count_problems(values) + _stage1_dataset_problems(values) + _sft_source_problems(values)
    if values["two_stage"] and not 0 < values["stage1_steps"] <= values["rl_steps"]:
        problems.append(
            ("stage1_steps", f"two_stage needs 0 < stage1_steps <= rl_steps, got stage1_steps={values['stage1_steps']}")
        )
    return problems


def _sft_source_problems(values: Mapping[str, Any]) -> list[tuple[str, str]]:
    """`sft_source`: templated, answer_only, rejection:<model> or a trajectory file that exists."""
    source = values["sft_source"]
    if source in ("templated", "answer_only") or (source.startswith("rejection:") and source[len("rejection:"):]):
        return []
    if source.startswith("rejection"):
        why = (f"sft_source {source!r} names no teacher: write rejection:<model> (a model name, hub id or folder) or "
               "rejection:policy")
        return [("sft_source", why)]
    if not Path(source).expanduser().is_file():
        near = difflib.get_close_matches(source, ("templated", "answer_only"), n=1)
        hint = f" (did you mean {near[0]!r}?)" if near else ""
        why = (f"sft_source must be templated, answer_only, rejection:<model> or a trajectory file; no such file "
               f"{source!r}{hint}")
        return [("sft_source", why)]
    return []


def _stage1_dataset_problems(values: Mapping[str, Any]) -> list[tuple[str, str]]:
    """`stage1_dataset`, the first stage's question file, must exist when two_stage reads it (an ablation arm that
    turns two_stage off keeps the setting unread)."""
    value = values["stage1_dataset"]
    if not value or not values["two_stage"]:
        return []
    problem = data_setting_problem("stage1_dataset", value)  # a file, or a catalogue name present when the run loads
    return [("stage1_dataset", problem)] if problem else []


def _single_response_problems(values: Mapping[str, Any]) -> list[tuple[str, str]]:
    """num_generations 1 (one response per prompt) only under the ppo estimator, whose critic is the baseline; every
    other estimator, and the levers that compare a group's rollouts, need groups of at least 2."""
    if values["num_generations"] != 1:  # 0 and below: the minimum's message
        return []
    if values["advantage_estimator"] != "ppo":
        why = (f"num_generations must be >= 2 for advantage_estimator {values['advantage_estimator']!r} (its advantages "
               f"compare a question's rollouts); got {values['num_generations']!r}. 1 is for ppo only")
        return [("num_generations", why)]
    grouped = [name for name in ("drop_zero_variance", "dynamic_sampling") if values[name]]
    if grouped:
        why = (f"num_generations 1 leaves no group whose rewards could differ, which {' and '.join(grouped)} need; "
               f"turn {' and '.join(grouped)} off")
        return [("num_generations", why)]
    if values["prompts_per_step"] * values["steps_per_generation"] < 2:
        return [("num_generations", ("num_generations 1 needs at least 2 rollouts a batch (TRL's sampler): set "
                                     "prompts_per_step >= 2"))]
    return []


def _question_count_problems(values: Mapping[str, Any]) -> list[tuple[str, str]]:
    """Without `benchmarks` a config describes an Experiment (quickstart, the ablations; report reads neither
    count), which stops before training when its training or evaluation questions are none, so a zero count is
    refused here. eval_benchmarks passes n_eval 0 on as "all questions" of a released benchmark, which the synthetic
    one (held_out_rows) does not share."""
    problems = []
    benchmarks = values["benchmarks"]
    if values["n_eval"] == 0 and not benchmarks and not values["eval_sets"]:
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


def _environment_problems(values: Mapping[str, Any]) -> list[tuple[str, str]]:
    """What can be known before any work: data files exist, the device exists, the split exists."""
    problems = []
    if values["dataset"] != SYNTHETIC:
        # A catalogue name is checked here to be known; whether its files are present, when the run loads its data
        # (searchrl.data.catalog), before any model. A catalogue dataset with an empty corpus takes its default one.
        problems += [(name, problem) for name in ("dataset", "corpus") if values[name]
                     and (problem := data_setting_problem(name, values[name]))]
        if not values["dataset"]:
            problems.append(("dataset", "dataset is empty; name a question file, a catalogue entry or synthetic"))
        elif not values["corpus"] and looks_like_path(values["dataset"]):
            problems.append(("corpus", "corpus is empty; dataset is a file, so name the corpus file too"))
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
    problems += replay_fallback_problems(values["retriever"], values["replay_fallback"], RETRIEVERS)
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
    problems += _eval_set_problems(values)
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


def _eval_set_problems(values: Mapping[str, Any]) -> list[tuple[str, str]]:
    """`eval_sets` names released benchmarks. (Their questions are searched in the run's corpus, so a run on the
    synthetic world stops when it loads its data, naming the data to set: a gpu profile that sets them states its
    paper's evaluation while its data are not named yet.)"""
    sets = values["eval_sets"]
    named = [name for name in sets if name != "synthetic"]
    problems = [("eval_sets", f"eval_sets: {p}") for p in map(BENCHMARKS.problem, named) if p]
    problems += [("eval_sets", f"eval_sets: {p}") for p in map(_benchmark_without_questions, named) if p]
    if "synthetic" in sets:
        problems.append(("eval_sets", ("eval_sets names released benchmarks; the synthetic world's questions are the "
                                       "held-out ones an empty eval_sets evaluates")))
    if len(set(sets)) != len(sets):
        problems.append(("eval_sets", f"eval_sets names a benchmark twice: {sets}"))
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

