"""An experiment's reinforcement learning: the RL stages of the run's schedule, R1-Searcher's difficulty labels and
data recipe, training health's rollback, the fixed probe set, and resuming a stage where it stopped.
"""

from __future__ import annotations

import warnings
from pathlib import Path

from searchrl.core.files import read_json, write_json
from searchrl.core.quiet import tied_weights_resume_note
from searchrl.runs.checkpoints import last_complete_checkpoint
from searchrl.runs.history import history_callback
from searchrl.runs.memory import measured, memory_callback

__all__ = ["STAGE_STEPS", "ExperimentRL"]


STAGE_STEPS = "stage_steps.json"  # beside a stage's final policy: how many steps it trained


class ExperimentRL:
    """RL over the run's schedule. A mixin of `searchrl.experiments.experiment.Experiment`, which builds what it reads
    (cfg, run_dir, protocol, retriever, tokenizer, the question rows, results, history)."""

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
        """The training questions of one RL stage: the first stage's own file (stage1_dataset) when it has one; with a
        data_recipe, the labelled questions mixed by it."""
        from searchrl.data.difficulty import mix_by_recipe, mixture_problems, recipe_for_stage

        cfg = self.cfg
        if cfg.two_stage and cfg.stage1_dataset and stage.name == "rl_stage1":
            from searchrl.data.catalog import resolve_questions
            from searchrl.data.loaders import load_qa

            rows = load_qa(resolve_questions(cfg.stage1_dataset, "train"))
            print(f"{stage.name}: {len(rows)} training questions of stage1_dataset {cfg.stage1_dataset}")
            return rows
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
        data = prompt_dataset(self._stage_rows(stage), self.protocol, self.tokenizer, chat=cfg.chat_prompt,
                              max_prompt_tokens=cfg.max_prompt_tokens)
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
            from searchrl.trainer.monitors.health import HealthCallback

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
        """Warn about each reward or loss that never acted in `stage` (searchrl.trainer.monitors.idle_mechanisms)."""
        from searchrl.trainer.monitors.idle_mechanisms import idle_mechanisms

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
        """The fixed probe set's callback for one RL stage (`searchrl.trainer.monitors.probe`): greedy scores of the first
        `probe_questions` held-out questions of the trained types, logged into the metrics history."""
        from searchrl.evaluation.evaluate import evaluate
        from searchrl.trainer.monitors.probe import probe_callback, probe_records_path, probe_rows

        cfg = self.cfg
        rows = probe_rows(self.eval_rows, cfg.train_question_types, cfg.probe_questions)
        if not rows:
            raise ValueError(f"probe_every is on but no evaluation question has a trained type "
                             f"({cfg.train_question_types}); widen n_eval or turn the probe off (probe_every: 0)")

        rollout = cfg.eval_rollout_config()

        def score(model, step):
            return evaluate(model, self.tokenizer, self.protocol, self.retriever, rows, rollout=rollout,
                            greedy=rollout.temperature == 0, batch_size=cfg.eval_batch_size, chat=cfg.chat_prompt,
                            desc=f"probe: {stage.name} step {step}",
                            records_path=probe_records_path(self.run_dir, stage.name, step)).records

        return probe_callback(cfg.probe_every, score, lambda metrics, step: self.history.append(
            {**metrics, "stage": stage.name}, step=stage.offset + step))

    def _roll_back(self, trainer, output_dir, trained):
        """After training health stopped a collapsed run: the policy of the last good checkpoint (its record names
        it), or the collapsed one, with a warning, when no checkpoint was saved before the collapse."""
        from searchrl.trainer.monitors.health import rollback_checkpoint

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
