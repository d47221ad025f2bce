"""One experiment as notebooks run it: data, retriever, evaluation, cold start, RL, tables and figures.

Notebooks stay thin by calling these methods; every method writes what it produced into the run folder, so an
interrupted run keeps everything done so far.
"""

from __future__ import annotations

import random
import shutil
import warnings
from collections import defaultdict
from pathlib import Path

import pandas as pd
import torch

from searchrl.config import RunConfig
from searchrl.core.files import read_json, save_figure, write_json
from searchrl.core.quiet import tied_weights_resume_note
from searchrl.core.threads import apply_torch_threads
from searchrl.runs.checkpoints import last_complete_checkpoint, release_resume_state
from searchrl.runs.folder import current_run_dir, stage_trajectories_path
from searchrl.runs.history import MetricsHistory, history_callback
from searchrl.runs.memory import format_memory, measured, memory_callback, read_memory
from searchrl.runs.status import mark_status

STAGE_STEPS = "stage_steps.json"  # beside a stage's final policy: how many steps it trained


def seed_everything(seed: int) -> None:
    random.seed(seed)
    torch.manual_seed(seed)
    try:
        import numpy as np

        np.random.seed(seed)
    except ImportError:  # pragma: no cover
        pass


def balanced_take(rows: list, n: int, types: list[str] | None = None, seed: int = 0, max_hops: int = 0,
                  weights: dict[str, int] | None = None) -> list:
    """Up to `n` rows with question types interleaved (round robin), so small subsets still cover every type;
    only `types` (all when empty) and, when `max_hops` > 0, only questions of at most that many hops. `weights`
    gives a type that many rows per round (others 1)."""
    by_type: dict[str, list] = defaultdict(list)
    for row in rows:
        qtype = str(row["metadata"].get("type", "unknown"))
        if max_hops and int(row["metadata"].get("hops", 1)) > max_hops:
            continue
        if not types or qtype in types:
            by_type[qtype].append(row)
    rng = random.Random(seed)
    for group in by_type.values():
        rng.shuffle(group)
    weights = weights or {}
    out, queues = [], [(list(g), weights.get(t, 1)) for t, g in sorted(by_type.items())]
    while len(out) < n and any(q for q, _ in queues):
        for q, weight in queues:
            for _ in range(weight):
                if q and len(out) < n:
                    out.append(q.pop())
    return out


def held_out_rows(rows: list, cfg: RunConfig) -> list:
    """The run's `n_eval` evaluation questions out of `rows`, balanced over types. They depend on the data
    (world_seed), never on the training seed, so runs over seeds and an ablation's arms are scored on the same
    questions and can be paired question by question."""
    return balanced_take(rows, cfg.n_eval, None, cfg.world_seed + 1)


class Experiment:
    """Everything one run needs, built from a validated `RunConfig`."""

    def __init__(self, cfg: RunConfig, notebook: str = "interactive", run_dir: str | Path | None = None):
        from searchrl.models import load_tokenizer
        from searchrl.protocols import get_protocol
        from searchrl.retrieval import make_retriever
        from searchrl.retrieval.service import service_options

        self.cfg = cfg
        self.notebook = notebook
        # An ablation gives each arm its own folder inside its run; a notebook gets a new run folder.
        self.run_dir = Path(run_dir) if run_dir is not None else current_run_dir(notebook, cfg)
        self.run_dir.mkdir(parents=True, exist_ok=True)
        seed_everything(cfg.seed)
        apply_torch_threads(cfg.torch_threads)
        self.protocol = get_protocol(cfg.protocol)
        self.corpus, self.train_rows, self.eval_rows = self._load_data()
        self.retriever = make_retriever(cfg.retriever, self.corpus, **service_options(cfg))
        wait_until_up = getattr(self.retriever, "wait_until_up", None)
        if wait_until_up is not None:  # a shared service may still be loading its index: wait before any search
            wait_until_up(cfg.service_wait_s, say=lambda line: print(line, flush=True))
        self.tokenizer = load_tokenizer(cfg.model)
        self.results: dict = {}
        self.history = MetricsHistory(self.run_dir)
        summary = self.data_summary()
        if cfg.dataset == "synthetic" and cfg.rl_steps > 0:
            summary["answer_budget"] = self.check_answer_budget()
        write_json(self.run_dir / "data.json", summary)

    # ---- data -------------------------------------------------------------------------------------------------

    def _load_data(self):
        cfg = self.cfg
        if cfg.dataset == "synthetic":
            from searchrl.data.synthetic import world_of

            world = world_of(cfg)
            self.world = world
            train, evaluation, corpus = world.splits["train"], world.splits[cfg.eval_split], world.corpus
            eval_source, eval_fix = f"the synthetic world's {cfg.eval_split!r} split", "raise n_eval or world_entities"
        else:
            from searchrl.data.loaders import load_corpus, load_qa

            if not cfg.corpus:
                raise ValueError("dataset is a file, so `corpus` must name a passage file (jsonl or tsv)")
            rows = load_qa(cfg.dataset)
            random.Random(0).shuffle(rows)  # the held-out cut must not move with the training seed
            cut = max(1, len(rows) - cfg.n_eval)
            train, evaluation, corpus = rows[:cut], rows[cut:], load_corpus(cfg.corpus)
            eval_source = f"{cfg.dataset} ({len(rows)} questions, at least one of them kept for training)"
            eval_fix = "raise n_eval, or give a dataset file with more questions"
        train = balanced_take(train, cfg.n_train, cfg.train_question_types or None, cfg.seed, cfg.train_max_hops)
        evaluation = held_out_rows(evaluation, cfg)
        if not evaluation:
            raise ValueError(f"no evaluation questions: n_eval={cfg.n_eval} took none from {eval_source}; {eval_fix}")
        if not train:
            fix = ("raise n_train" if cfg.n_train == 0 else
                   "widen train_question_types (empty: all types) or raise train_max_hops (0: no limit)")
            raise ValueError(f"no training questions: n_train={cfg.n_train} with "
                             f"train_question_types={cfg.train_question_types} and "
                             f"train_max_hops={cfg.train_max_hops} kept none; {fix}")
        return corpus, train, evaluation

    def data_summary(self) -> dict:
        def types(rows):
            return pd.Series([r["metadata"].get("type", "unknown") for r in rows]).value_counts().to_dict()

        return {"corpus_passages": len(self.corpus), "train_questions": len(self.train_rows),
                "eval_questions": len(self.eval_rows), "train_types": types(self.train_rows),
                "eval_types": types(self.eval_rows)}

    def check_answer_budget(self) -> dict:
        """Whether a correct answer to each type of training question fits the rollout's token budget (measured on
        its templated trajectory); warns, naming the setting to change, for each type whose answers do not."""
        from searchrl.data.synthetic.budget import answer_budget, budget_problems

        cfg = self.cfg
        report = answer_budget(self.train_rows, self.protocol, self.retriever, rollout=cfg.rollout_config(),
                               tokenizer=self.tokenizer, chat=cfg.chat_prompt, seed=cfg.seed,
                               plan=cfg.sft_plan_thought)
        for line in budget_problems(report, cfg.max_completion_tokens, what="RL training questions"):
            warnings.warn(line, stacklevel=2)
        return report

    # ---- models -----------------------------------------------------------------------------------------------

    def load_model(self, path: str | None = None):
        from searchrl.models import load_policy

        # The policy that trains is stored in float32 even with bf16 on: bf16 is mixed precision (the trainers
        # autocast the forward pass), and the weights and Adam's moments must stay float32, because an update of
        # lr ~1e-5 is below half a bfloat16 ulp of most weights and rounds away. Measured on an H100 (docs/lab/LOG.md,
        # 2026-11-27): the cpu_long cold start stored in bf16 scored F1 0.076 and format 0.04 on 100 questions, the
        # same recipe in float32 F1 0.430 and format 0.94. Inference-only loads (eval_suite, baselines) may use bf16.
        model, _ = load_policy(path or self.cfg.model, dtype=torch.float32, device=self.cfg.device)
        return model

    def save_model(self, model, name: str) -> Path:
        from accelerate import PartialState

        from searchrl.models import save_policy

        # Under several processes (accelerate launch) each holds the same weights: one writes them, and every
        # process waits for the files before going on, since the next RL stage loads its start from this folder (two
        # writers, or a reader early, saw a half-written config.json).
        state = PartialState()
        folder = self.run_dir / "checkpoints" / name
        if state.is_main_process:
            folder = save_policy(model, self.tokenizer, folder)
        state.wait_for_everyone()
        return folder

    # ---- evaluation -------------------------------------------------------------------------------------------

    def evaluate(self, model, stage: str, *, max_searches: int | None = None, n_questions: int = 0):
        """Greedy search rollouts on the evaluation questions; saves eval/<stage>.json and trajectories.
        `max_searches` overrides the run's search budget for this stage only (0: answer without searching);
        `n_questions` > 0 evaluates only the first that many questions (the notebooks pass `n_eval_untrained`)."""
        import dataclasses

        from searchrl.evaluation.evaluate import evaluate

        cfg = self.cfg
        rollout = cfg.rollout_config()  # `evaluate` itself stops at a retriever outage, whatever the run allows
        if max_searches is not None:
            rollout = dataclasses.replace(rollout, max_searches=max_searches)
        slug = stage.replace(" ", "_")
        # eval_rows interleave the types, so a prefix covers them all
        rows = self.eval_rows[:n_questions] if n_questions > 0 else self.eval_rows
        with measured(self.run_dir, f"evaluate: {stage}"):
            result = evaluate(model, self.tokenizer, self.protocol, self.retriever, rows,
                              rollout=rollout, batch_size=cfg.eval_batch_size, chat=cfg.chat_prompt,
                              desc=f"evaluate: {stage}", records_path=stage_trajectories_path(self.run_dir, stage),
                              resume=cfg.resume)
        result.to_json(self.run_dir / "eval" / f"{slug}.json")
        result.trajectories_jsonl(stage_trajectories_path(self.run_dir, stage))
        self.results[stage] = result
        return result

    def no_search_baseline(self, model, stage: str = "no search"):
        """The same policy answering with a search budget of 0 (its first search request gets the budget notice),
        when `eval_no_search` is on: a type whose F1 after RL is no better than this was won by guessing, not by
        searching. Returns None when the parameter is off."""
        if not self.cfg.eval_no_search:
            print("eval_no_search is off: no no-search baseline")
            return None
        return self.evaluate(model, stage, max_searches=0)

    def stage_table(self) -> pd.DataFrame:
        from searchrl.evaluation.evaluate import stage_table

        table = stage_table(self.results)
        write_json(self.run_dir / "eval" / "table.json", table.reset_index().to_dict("records"))
        return table

    def type_table(self, before: str = "after cold start", after: str = "after RL",
                   no_search: str = "no search") -> pd.DataFrame | None:
        """Per question type, `before` -> `after`: F1 with the paired interval of its change, searches, and (when
        the no-search stage ran) whether a rise came without search being shown to help (`searchrl.evaluation.type_table`);
        saved as eval/type_table.json, drawn in figures/type_changes.png. None, with a note, when `before` or
        `after` was not evaluated."""
        from searchrl.analysis.plots import type_change_bars
        from searchrl.evaluation.type_table import type_table

        missing = [s for s in (before, after) if s not in self.results]
        if missing:
            print(f"type table: stage(s) {', '.join(missing)} not evaluated in this run")
            return None
        table = type_table(self.results, before, after, no_search if no_search in self.results else None)
        write_json(self.run_dir / "eval" / "type_table.json", table.reset_index().to_dict("records"))
        fig = type_change_bars(table, title=f"{before} -> {after}")
        save_figure(fig, self.run_dir / "figures" / "type_changes.png")
        _show(fig)
        return table

    def learning_checks(self) -> pd.DataFrame:
        """Did RL learn in this run (`searchrl.analysis.learning_checks`: F1 gain with its interval, reward trend, searches
        by hop count, format, guessing), read from the tables the cells above saved; printed and saved as
        eval/checks.json. Run it after `stage_table`, `curves` and `type_table`."""
        from searchrl.analysis.learning_checks import format_checks, learning_checks

        table = learning_checks({self.cfg.seed: self.run_dir})
        write_json(self.run_dir / "eval" / "checks.json", table.reset_index().to_dict("records"))
        print(format_checks(table))
        return table

    # ---- cold start -------------------------------------------------------------------------------------------

    def cold_start_items(self) -> list:
        """What the cold start trains on: `sft_examples` templated trajectories, then (R1-Searcher++'s internal
        knowledge, with `sft_fact_repeats`) the synthetic world's internal facts as short statements, each item
        with `qtype` ("fact" for a statement)."""
        from searchrl.data.synthetic.trajectories import templated_trajectories

        cfg = self.cfg
        rows = balanced_take(self.train_rows if cfg.dataset != "synthetic" else self.world.splits["train"],
                             cfg.sft_examples * 2, cfg.sft_question_types or None, cfg.seed + 2,
                             weights=cfg.sft_type_weights)
        items = templated_trajectories(rows, self.protocol, self.retriever, rollout=cfg.rollout_config(),
                                       tokenizer=self.tokenizer, chat=cfg.chat_prompt, seed=cfg.seed,
                                       plan=cfg.sft_plan_thought)
        items = items[: cfg.sft_examples]
        if cfg.dataset == "synthetic" and cfg.sft_fact_repeats:
            # R1-Searcher++'s internal knowledge, made: the internal facts are taught as short statements (inside
            # the protocol's internal-answer span when it has one), so the model can answer them without searching.
            from searchrl.data.synthetic.trajectories import fact_statement_items

            items = items + fact_statement_items(self.world, cfg, self.protocol)
        return items

    def cold_start(self, model):
        """SFT on templated trajectories with retrieved tokens masked out of the loss (R1-Searcher++ eq. 2)."""
        from searchrl.data.synthetic.budget import budget_problems, items_budget
        from searchrl.sft import sft_train
        from searchrl.trainer.arguments import sft_args

        cfg = self.cfg
        if cfg.sft_examples <= 0:
            return model
        done = self.run_dir / "checkpoints" / "cold_start"
        if cfg.resume and (done / "config.json").exists():
            return self.load_model(str(done))  # a resumed run keeps the cold start it already paid for
        items = self.cold_start_items()
        budget = items_budget(items, self.tokenizer, cfg.max_completion_tokens)  # fact statements are not counted
        write_json(self.run_dir / "sft" / "budget.json", budget)
        for line in budget_problems(budget, cfg.max_completion_tokens, what="cold-start demonstrations"):
            warnings.warn(line, stacklevel=2)  # the cold start would teach trajectories that rollouts cut off
        trainer_dir = self.run_dir / "sft"
        resume = last_complete_checkpoint(trainer_dir)[0] if cfg.resume else None
        if resume is not None:
            print(f"resume: the cold start continues from {resume.name}")
        with measured(self.run_dir, "cold start"):
            log = sft_train(model, self.tokenizer, items, sft_args(cfg, trainer_dir, checkpoints=True),
                            stage_bar="cold start", resume_from_checkpoint=str(resume) if resume else None)
        write_json(trainer_dir / "history.json", log)
        self.save_model(model, "cold_start")
        for checkpoint in trainer_dir.glob("checkpoint-*"):  # a resume now takes the finished cold start instead
            shutil.rmtree(checkpoint, ignore_errors=True)
        return model

    # ---- reinforcement learning -------------------------------------------------------------------------------

    def train_rl(self, model):
        """RL with search rollouts over the run's schedule (one stage, or R1-Searcher's two: `two_stage`), each
        stage starting from the previous one's weights; returns the trained model."""
        from searchrl.trainer.schedules import rl_schedule

        if self.cfg.difficulty_rollouts:
            self.label_difficulty(model)
        for stage in rl_schedule(self.cfg):
            model = self.train_stage(model, stage)
        return model

    def label_difficulty(self, model=None) -> list:
        """R1-Searcher's data selection: label each training question easy / medium / difficult (/ unsolved) by the
        rollout of the reference policy (`difficulty_policy`, else the current `model`) that first answers it;
        outcomes are cached across runs. Saves data/difficulty.jsonl and figures/difficulty.png."""
        from searchrl.core.files import save_figure, write_trajectories
        from searchrl.data.difficulty import label_difficulty
        from searchrl.experiments.data_selection import PolicySampler, difficulty_histogram

        cfg = self.cfg
        reference = None if cfg.difficulty_policy else model
        sampler = PolicySampler.from_run(cfg, self.protocol, self.retriever, model=reference,
                                         tokenizer=self.tokenizer)
        self.labelled_rows = label_difficulty(self.train_rows, sampler, cfg)
        write_trajectories(self.run_dir / "data" / "difficulty.jsonl", self.labelled_rows)
        save_figure(difficulty_histogram(self.labelled_rows), self.run_dir / "figures" / "difficulty.png")
        return self.labelled_rows

    def _stage_rows(self, stage) -> list:
        """The training questions of one RL stage: with a data_recipe, the labelled questions mixed by it."""
        from searchrl.data.difficulty import mix_by_recipe, mixture_problems, recipe_for_stage

        cfg = self.cfg
        if not (cfg.difficulty_rollouts and cfg.data_recipe):
            return getattr(self, "labelled_rows", None) or self.train_rows
        recipe = recipe_for_stage(cfg.data_recipe, stage.name)
        rows = mix_by_recipe(self.labelled_rows, recipe, seed=cfg.seed)
        print(f"{stage.name}: {len(rows)} training questions by recipe {recipe}")
        for line in mixture_problems(self.labelled_rows, rows):
            warnings.warn(f"{stage.name}: {line}", stacklevel=2)
        return rows

    def train_stage(self, model, stage):
        """One RL stage (`searchrl.trainer.schedules.Stage`). The policy is saved first so that TRL can rebuild the
        KL reference model from its path; a resumed run continues from the stage's last complete checkpoint."""
        from searchrl.core.progress import attach_stage_bar
        from searchrl.rewards import expand_rewards, make_rewards
        from searchrl.trainer import SearchGRPOTrainer, prompt_dataset
        from searchrl.trainer.arguments import grpo_args, lora_config

        cfg = self.cfg
        finished = self._finished_stage(stage)
        if finished is not None:
            print(f"resume: {stage.name} finished earlier; loading its policy")
            return self.load_model(str(finished))
        used = {name for name, _ in expand_rewards(stage.rewards)}
        options = {k: v for k, v in cfg.reward_options.items() if k in used}
        if "evidence_r_search" in used:  # the evidence answerer is a run setting (evidence_answerer), not an option
            options["evidence_r_search"] = {"config": cfg, "policy_model": cfg.model,
                                            **options.get("evidence_r_search", {})}
        funcs, weights = make_rewards(stage.rewards, self.protocol, stage.reward_weights or None, options)
        start = self.save_model(model, f"{stage.name}_start")
        args = grpo_args(cfg, self.run_dir / "checkpoints" / stage.name, max_steps=stage.steps,
                         reward_weights=weights, rollout_log_dir=self.run_dir / "trajectories" / "train" / stage.name)
        data = prompt_dataset(self._stage_rows(stage), self.protocol, self.tokenizer, chat=cfg.chat_prompt)
        if cfg.balance_question_types:
            # Equal numbers of each question type, so one type cannot dominate the batch (and its advantages).
            from datasets import concatenate_datasets

            groups = [data.filter(lambda t, q=q: t == q, input_columns="qtype") for q in sorted(set(data["qtype"]))]
            size = min(len(g) for g in groups)
            data = concatenate_datasets([g.shuffle(seed=cfg.seed).select(range(size)) for g in groups])
        # memory first: it adds its columns to the logged row that the history callback then keeps
        callbacks = [memory_callback(), history_callback(self.history, offset=stage.offset, stage=stage.name)]
        health = None
        if cfg.health_action != "off":
            from searchrl.trainer.health import HealthCallback

            health = HealthCallback(cfg, sink=print)
            callbacks.append(health)
        if cfg.probe_every > 0:
            callbacks.append(self._probe_callback(stage))
        trainer = SearchGRPOTrainer(model=str(start), reward_funcs=funcs, args=args, train_dataset=data,
                                    retriever=self.retriever, protocol=self.protocol, processing_class=self.tokenizer,
                                    peft_config=lora_config(cfg), callbacks=callbacks)
        attach_stage_bar(trainer, stage.name, {"reward": "reward", "search/searches_per_sample": "searches"})
        resume = None
        if cfg.resume:
            resume, skipped = last_complete_checkpoint(args.output_dir)
            for folder, why in skipped:
                print(f"resume: skipping {folder.name}: {why}")
            if resume is not None:
                print(f"resume: {stage.name} continues from {resume.name}")
                resume = str(resume)
        resumed_at = int(Path(resume).name.split("-")[1]) if resume else 0
        if resume and resumed_at < stage.steps:  # rows logged after the checkpoint are logged again
            self.history.truncate_after(stage.offset + resumed_at)
        if resume and resumed_at >= stage.steps:
            # transformers checks its stop flag only after a step, so resuming from the stage's last checkpoint
            # would train one step past max_steps; that checkpoint already holds the stage's policy.
            print(f"resume: {stage.name} had trained all {stage.steps} steps by {Path(resume).name}; using its policy")
            trained = self._checkpoint_policy(trainer.accelerator.unwrap_model(trainer.model), Path(resume))
        else:
            with measured(self.run_dir, stage.name), tied_weights_resume_note(trainer.model):
                trainer.train(resume_from_checkpoint=resume)
            trained = trainer.accelerator.unwrap_model(trainer.model)
        if health is not None and health.stopped_at is not None:
            trained = self._roll_back(trainer, args.output_dir, trained)
        self._warn_idle_mechanisms(stage)
        if cfg.use_peft:
            trained = trained.merge_and_unload()
        folder = self.save_model(trained, stage.name)
        if trainer.accelerator.is_main_process:
            write_json(folder / STAGE_STEPS, {"steps": max(trainer.state.global_step, resumed_at)})
        return trained

    def _warn_idle_mechanisms(self, stage) -> None:
        """Warn about each reward or loss that never acted in `stage` (searchrl.trainer.idle_mechanisms)."""
        from searchrl.trainer.idle_mechanisms import idle_mechanisms

        rows = [row for row in self.history.rows if row.get("stage") == stage.name]
        for line in idle_mechanisms(rows, self.cfg.memorization_coef):
            warnings.warn(f"{stage.name}: {line}", stacklevel=2)

    def _finished_stage(self, stage) -> Path | None:
        """On resume, the policy of a stage that already trained all its steps and kept no trainer checkpoint to
        fast-forward through (a completed run drops them: `keep_resume_state`); None when the stage must train."""
        folder = self.run_dir / "checkpoints" / stage.name
        if not self.cfg.resume or not (folder / "config.json").is_file():  # config.json is written last
            return None
        if last_complete_checkpoint(folder)[0] is not None:
            return None  # TRL resumes from it, and trains on when the stage was given more steps
        trained = (read_json(folder / STAGE_STEPS) or {}).get("steps", stage.steps)
        if trained < stage.steps:
            raise RuntimeError(
                f"{stage.name} trained {trained} steps and this resume asks for {stage.steps}, but its trainer "
                f"checkpoints were removed when the run completed (keep_resume_state: false), so it cannot go on "
                f"where it stopped. Start a new run from its policy: -p model {folder}")
        return folder

    def _probe_callback(self, stage):
        """The fixed probe set's callback for one RL stage (`searchrl.trainer.probe`): greedy scores of the first
        `probe_questions` held-out questions of the trained types, logged into the metrics history."""
        from searchrl.evaluation.evaluate import evaluate
        from searchrl.trainer.probe import probe_callback, probe_records_path, probe_rows

        cfg = self.cfg
        rows = probe_rows(self.eval_rows, cfg.train_question_types, cfg.probe_questions)
        if not rows:
            raise ValueError(f"probe_every is on but no evaluation question has a trained type "
                             f"({cfg.train_question_types}); widen n_eval or turn the probe off (probe_every: 0)")

        def score(model, step):
            return evaluate(model, self.tokenizer, self.protocol, self.retriever, rows,
                            rollout=cfg.rollout_config(), batch_size=cfg.eval_batch_size, chat=cfg.chat_prompt,
                            desc=f"probe: {stage.name} step {step}",
                            records_path=probe_records_path(self.run_dir, stage.name, step)).records

        return probe_callback(cfg.probe_every, score, lambda metrics, step: self.history.append(
            {**metrics, "stage": stage.name}, step=stage.offset + step))

    def _roll_back(self, trainer, output_dir, trained):
        """After training health stopped a collapsed run: the policy of the last good checkpoint (its record names
        it), or the collapsed one, with a warning, when no checkpoint was saved before the collapse."""
        from searchrl.trainer.health import rollback_checkpoint

        good = rollback_checkpoint(output_dir)
        if good is None:
            print("training health stopped the run, but no checkpoint was saved before the collapse; keeping the "
                  "last policy (lower save_steps to have one to roll back to)")
            return trained
        print(f"training health stopped the run; rolling back to {good.name}")
        return self._checkpoint_policy(trained, good)

    def _checkpoint_policy(self, trained, checkpoint: Path):
        """The policy saved in a trainer checkpoint: its adapter loaded into `trained` (LoRA), or its full model."""
        if self.cfg.use_peft:
            from peft import set_peft_model_state_dict
            from safetensors.torch import load_file

            set_peft_model_state_dict(trained, load_file(str(checkpoint / "adapter_model.safetensors")))
            return trained
        return self.load_model(str(checkpoint))

    # ---- reporting --------------------------------------------------------------------------------------------

    def curves(self):
        from searchrl.analysis.plots import (
            opener_choice_curves,
            opener_payoff_curves,
            search_advantage_curves,
            search_payoff_curves,
            training_curves,
        )
        from searchrl.trainer.probe import PROBE_METRICS

        frame = self.history.to_frame()
        if frame.empty:
            print("No training steps were logged (rl_steps: 0?), so there are no training curves.")
            return None
        trends = curve_trends(frame)
        write_json(self.run_dir / "eval" / "curve.json", trends)
        for metric, trend in trends.items():
            print(f"{metric}: first quarter of steps {trend['first']:.3f}, last {trend['last']:.3f}, "
                  f"gain {trend['gain']:+.3f} ({trend['points']} points)")
        scheduled = ("search/scheduled_reward",) if "search/scheduled_reward" in frame else ()  # dynamic sampling
        fig = training_curves({self.cfg.run_name or self.run_dir.name: frame},
                              metrics=("reward", *scheduled, "completions/model_tokens", "search/searches_per_sample"))
        save_figure(fig, self.run_dir / "figures" / "training_curves.png")
        terms = [c for c in frame.columns if c.startswith("rewards/") and c.endswith("/mean")]
        if len(terms) > 1:  # each reward term on its own (R-Search's evidence reward, a format term, ...)
            save_figure(training_curves(frame, metrics=terms, title="reward terms (unweighted means)"),
                        self.run_dir / "figures" / "reward_terms.png")
        probes = [c for c in PROBE_METRICS if c in frame.columns]
        if probes:  # the fixed probe set's greedy scores: learning, without the per-step question draw
            save_figure(training_curves(frame, metrics=probes, smooth=0.0, title="fixed probe set (greedy)"),
                        self.run_dir / "figures" / "probe_curve.png")
        payoff = search_payoff_curves(frame)
        if payoff is not None:  # does a second search pay? (shown here, returned figure stays the curves)
            save_figure(payoff, self.run_dir / "figures" / "search_payoff.png")
            _show(payoff)
        openers = opener_payoff_curves(frame, self.cfg.explore_openers)
        if openers is not None:  # which choice the explore openers write pays (explore_openers)
            save_figure(openers, self.run_dir / "figures" / "opener_payoff.png")
        choice = opener_choice_curves(frame, self.cfg.explore_openers)
        if choice is not None:  # how the choice between the openers moved, per type (opener_anchor)
            save_figure(choice, self.run_dir / "figures" / "opener_choice.png")
        by_type = search_advantage_curves(frame)
        if by_type is not None:  # ... and on which question types (GRPO's push, within groups)
            save_figure(by_type, self.run_dir / "figures" / "search_advantage_by_type.png")
        return fig

    def bars(self, table: pd.DataFrame):
        from searchrl.analysis.plots import eval_bars

        metrics = [c for c in ("EM", "F1", "F1 multi-hop", "searches/question", "format-valid rate") if c in table]
        fig = eval_bars(table.reset_index() if "stage" not in table.columns else table, metrics=metrics)
        save_figure(fig, self.run_dir / "figures" / "eval_bars.png")
        return fig

    def show_trajectories(self, stage: str, n: int | None = None):
        """HTML of `n` trajectories of one stage, retrieved spans marked (for display in the notebook)."""
        from searchrl.evaluation.render import render_trajectory

        records = self.results[stage].records
        n = n or self.cfg.n_trajectories_shown
        # Prefer trajectories that searched, so the marked retrieved spans are visible.
        chosen = records.sort_values("searches", ascending=False, kind="stable").head(n)
        html = "".join(render_trajectory(rec, self.protocol) for rec in chosen.to_dict("records"))
        (self.run_dir / "figures").mkdir(parents=True, exist_ok=True)
        (self.run_dir / "figures" / f"trajectories_{stage.replace(' ', '_')}.html").write_text(html)
        return html

    def show_training_rollouts(self, step: int | None = None, groups_per_type: int = 1) -> str:
        """HTML of what RL sampled at one step (default: the last logged), `groups_per_type` groups of each question
        type, every rollout of a group with its reward and advantage (GRPO compares them within the group); saved as
        figures/training_rollouts_step<N>.html. Needs `save_train_rollouts`. Also prints the per-step summary."""
        from searchrl.evaluation.render import render_trajectory
        from searchrl.trainer.rollout_log import read_rollouts, step_summary

        rollouts = read_rollouts(self.run_dir / "trajectories" / "train")
        if rollouts.empty:
            print("no training rollouts were logged (save_train_rollouts off, or no RL step ran)")
            return ""
        print(step_summary(rollouts).round(3).to_string())
        step = int(rollouts["step"].max()) if step is None else step
        at = rollouts[(rollouts["step"] == step) & (rollouts["draw"] == 0)]
        if at.empty:
            raise ValueError(f"no rollouts logged at step {step}; logged steps: {sorted(rollouts['step'].unique())}")
        chosen = [g for _, part in at.groupby("qtype", sort=True) for g in part["group"].unique()[:groups_per_type]]
        html = "".join(f"<h4>step {step}, {row['qtype']}, group {row['group']}</h4>" * (i == 0)
                       + render_trajectory(row, self.protocol)
                       for g in chosen for i, row in enumerate(at[at["group"] == g].to_dict("records")))
        (self.run_dir / "figures").mkdir(parents=True, exist_ok=True)
        (self.run_dir / "figures" / f"training_rollouts_step{step}.html").write_text(html)
        return html

    def finish(self) -> Path:
        mark_status(self.run_dir, "completed")
        print(format_memory(read_memory(self.run_dir)))
        if not self.cfg.keep_resume_state:
            release_resume_state(self.run_dir)
        print(f"Results in {self.run_dir}")
        return self.run_dir


CURVE_METRICS = ("reward", "search/scheduled_reward", "search/searches_per_sample", "completions/model_tokens",
                 "probe/f1", "probe/searches")


def curve_trends(frame: pd.DataFrame) -> dict[str, dict]:
    """First-quarter and last-quarter means of each logged curve in CURVE_METRICS (`searchrl.core.stats.quarter_gain`),
    in step order: the "does the curve rise" number a seed report compares."""
    from searchrl.core.stats import quarter_gain

    ordered = frame.sort_values("step") if "step" in frame else frame
    return {m: quarter_gain(ordered[m].to_numpy(dtype=float)) for m in CURVE_METRICS
            if m in ordered and ordered[m].notna().sum() >= 2}


def _show(fig) -> None:
    """Display a figure beside the cell's result in a notebook (papermill or JupyterLab); nothing elsewhere."""
    try:
        from IPython import get_ipython
        from IPython.display import display
    except ImportError:
        return
    if get_ipython() is not None:
        display(fig)
