"""The run's evaluation settings, the eval suite's, the ablations' and the report's. `RunConfig` inherits each class;
each field's documentation is the string under it.

Most settings are read by every notebook. The benchmarks, ablation and report sections are read by some notebooks
only, named here in `NOTEBOOKS_OF` (`searchrl.config.notebooks` checks a notebook's parameters against it)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["ABLATION_NOTEBOOKS", "EVAL_SUITE_NOTEBOOKS", "EXPERIMENT_NOTEBOOKS", "NOTEBOOKS_OF", "REPORT_NOTEBOOKS",
           "AblationSettings", "BenchmarkSettings", "EvalSetSettings", "EvalSettings", "ReportSettings",
           "eval_decoding"]


@dataclass(frozen=True)
class EvalSettings:
    """How every run evaluates: batches, the no-search baseline, the trajectories shown."""

    # == eval ==
    eval_batch_size: int = 16
    """Questions evaluated together in one batch."""
    eval_no_search: bool = False
    """Also evaluate the final policy with a search budget of 0 (stage "no search"): the answer-without-searching
    baseline per question type, which shows whether a type's F1 comes from searching or from guessing."""
    n_trajectories_shown: int = 3
    """Example trajectories printed in the notebook after evaluation."""
    eval_top_k: int = 0
    """Documents returned per search at evaluation (every evaluation stage, the probe, the eval suite's policies and
    baselines); 0: top_k, the same as training. R-Search trains with 3 and evaluates with 5 (R-Search 4.3)."""
    eval_temperature: float = 0.0
    """Sampling temperature at evaluation; 0: greedy decoding (R1-Searcher's released evaluation: --temp 0.0). Above
    0, evaluation samples at this temperature with the run's top_p, seeded by `seed` (R-Search evaluates at 0.1,
    A.3)."""


@dataclass(frozen=True)
class EvalSetSettings:
    """Which questions an experiment or an ablation arm is evaluated on: held out from `dataset`, or benchmark sets.
    Read by the quickstart and the ablation notebooks (the eval suite names its own `benchmarks`)."""

    # == eval ==
    eval_sets: list[str] = field(default_factory=list)
    """Benchmarks every evaluation stage scores instead of questions held out from `dataset`, by name
    (searchrl.data.benchmarks: hotpotqa, nq, triviaqa, popqa, bamboogle, r1s_hotpotqa, r1s_2wiki, r1s_musique,
    r1s_bamboogle), n_eval questions of each (0: all), the same ones for every seed and arm; `dataset` then trains on
    all its rows. Each question is searched in the run's own `corpus`, as the papers evaluate in the corpus they train
    with, and its question type is its benchmark's name, so the per-type table is the per-benchmark one. An
    ablation's claims compare the mean over all these questions: the papers' benchmark average when every set gives
    n_eval questions. Empty: held-out questions of `dataset`. Needs a dataset file (not synthetic)."""


@dataclass(frozen=True)
class BenchmarkSettings:
    """What the eval suite (`searchrl.experiments.eval_suite`, the eval_benchmarks notebook) evaluates
    on which benchmarks, and where their files and indexes are."""

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


@dataclass(frozen=True)
class AblationSettings:
    """An ablation's arms, seeds, cold-start arms and claims (`searchrl.experiments.ablation.Ablation`)."""

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


@dataclass(frozen=True)
class ReportSettings:
    """The report notebook's runs. Listed under the ablation section (`RunConfig.describe()`), which it reads."""

    # == ablation ==
    report_runs: list[str] = field(default_factory=list)
    """Ablation run folders the report notebook collects; empty: the newest finished run of each ablation notebook
    under output_root."""


# The project's notebooks by what they run (each name a file notebooks/<name>.ipynb).
EXPERIMENT_NOTEBOOKS = ("quickstart",)  # one Experiment (searchrl.experiments.experiment)
ABLATION_NOTEBOOKS = ("ablate_algorithm", "ablate_data", "ablate_evidence", "ablate_knowledge", "ablate_mask",
                      "ablate_reward", "ablate_stages", "ablate_topk", "base_vs_instruct", "response_length",
                      "sft_vs_rl")  # an Ablation (searchrl.experiments.ablation)
EVAL_SUITE_NOTEBOOKS = ("eval_benchmarks",)  # an EvalSuite (searchrl.experiments.eval_suite)
REPORT_NOTEBOOKS = ("report",)  # the report over ablation runs (searchrl.experiments.ablation.report)

# The sections only some notebooks read: {section: (who reads it, those notebooks)}. A notebook named here but not
# for a section refuses its keys; every other section is every notebook's, and a notebook the project does not have
# (a copy under another name, a test's) takes every key.
NOTEBOOKS_OF: dict[type, tuple[str, tuple[str, ...]]] = {
    EvalSetSettings: ("the experiments", (*EXPERIMENT_NOTEBOOKS, *ABLATION_NOTEBOOKS)),
    BenchmarkSettings: ("the eval suite", EVAL_SUITE_NOTEBOOKS),
    AblationSettings: ("the ablation notebooks", ABLATION_NOTEBOOKS),
    ReportSettings: ("the report notebook", REPORT_NOTEBOOKS),
}


def eval_decoding(values: Any) -> dict[str, Any]:
    """How a run with settings `values` (a RunConfig, or any object or mapping with its field names) decodes at
    evaluation: {"top_k": documents per search, "greedy": bool, "temperature": 0.0 when greedy, "top_p": 1.0 when
    greedy}. Every evaluation of a run decodes so (`RunConfig.eval_rollout_config`), and its records state it."""
    get = values.get if isinstance(values, Mapping) else lambda name: getattr(values, name)
    temperature = float(get("eval_temperature"))
    greedy = temperature == 0
    return {"top_k": int(get("eval_top_k") or get("top_k")), "greedy": greedy,
            "temperature": 0.0 if greedy else temperature, "top_p": 1.0 if greedy else float(get("top_p"))}
