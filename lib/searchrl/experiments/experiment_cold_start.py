"""An experiment's cold start: SFT on the demonstrations of `sft_source` (templated trajectories by default; and,
with `sft_fact_repeats`, the synthetic world's internal facts as short statements) before RL; a resumed run keeps the
cold start it already finished.
"""

from __future__ import annotations

import gc
import shutil
import warnings

from searchrl.core.files import write_json
from searchrl.experiments.experiment_data import balanced_take
from searchrl.runs.checkpoints import last_complete_checkpoint
from searchrl.runs.memory import measured

__all__ = ["ExperimentColdStart"]


class ExperimentColdStart:
    """The cold start. A mixin of `searchrl.experiments.experiment.Experiment`, which builds what it reads (cfg,
    run_dir, protocol, retriever, tokenizer, the question rows, results, history)."""

    def cold_start_items(self, model=None) -> list:
        """What the cold start trains on: `sft_examples` demonstrations from `sft_source` (templated trajectories by
        default; `model` is the policy, which rejection:policy samples), then (R1-Searcher++'s internal knowledge,
        with `sft_fact_repeats`) the synthetic world's internal facts as short statements, each item with `qtype`
        ("fact" for a statement)."""
        from searchrl.sft import sources

        cfg = self.cfg
        if cfg.sft_source == sources.TEMPLATED:  # templates need a hop plan: `_demonstration_source` says where from
            source, retriever = self._demonstration_source()
        else:  # the other sources answer the run's own training questions
            source = self.train_rows if cfg.dataset != "synthetic" else self.world.splits["train"]
            retriever = self.retriever
        rows = balanced_take(source, cfg.sft_examples * 2, cfg.sft_question_types or None, cfg.seed + 2,
                             weights=cfg.sft_type_weights)
        if cfg.sft_source == sources.TEMPLATED:
            from searchrl.data.synthetic.trajectories import templated_trajectories

            items = templated_trajectories(rows, self.protocol, retriever, rollout=cfg.rollout_config(),
                                           tokenizer=self.tokenizer, chat=cfg.chat_prompt, seed=cfg.seed,
                                           plan=cfg.sft_plan_thought)
        elif cfg.sft_source == sources.ANSWER_ONLY:
            items = sources.answer_only_items(rows, self.protocol, self.tokenizer, chat=cfg.chat_prompt)
        elif cfg.sft_source.startswith(sources.REJECTION_PREFIX):
            items = self._teacher_items(rows, cfg.sft_source[len(sources.REJECTION_PREFIX):], model, retriever)
        else:
            items = sources.trajectory_file_items(cfg.sft_source, self.protocol, self.tokenizer, chat=cfg.chat_prompt)
        if not items:
            raise ValueError(f"sft_source {cfg.sft_source!r} gave no demonstrations for the cold start")
        print(f"cold start: {min(len(items), cfg.sft_examples)} demonstrations from sft_source {cfg.sft_source!r}")
        items = items[: cfg.sft_examples]
        if cfg.dataset == "synthetic" and cfg.sft_fact_repeats:
            # R1-Searcher++'s internal knowledge, made: the internal facts are taught as short statements (inside
            # the protocol's internal-answer span when it has one), so the model can answer them without searching.
            from searchrl.data.synthetic.trajectories import fact_statement_items

            items = items + fact_statement_items(self.world, cfg, self.protocol)
        return items

    def _teacher_items(self, rows: list, teacher: str, model, retriever) -> list:
        """Rejection sampling from `teacher` ("policy": `model`, the run's own): up to one correct, well-formed
        trajectory a question of `rows`, of 4 sampled, as text under the policy's own prompt."""
        from searchrl.models import load_policy, load_tokenizer
        from searchrl.sft.rejection import rejection_sampled_trajectories
        from searchrl.sft.sources import as_text_item

        cfg = self.cfg
        if teacher == "policy":
            teacher_model, teacher_tokenizer = model if model is not None else self.load_model(), self.tokenizer
        else:
            dtype = "bfloat16" if cfg.bf16 else "float32"  # the teacher only generates
            teacher_model = load_policy(teacher, dtype=dtype, device=cfg.device)[0]
            teacher_tokenizer = load_tokenizer(teacher)
        with measured(self.run_dir, "cold start: rejection sampling"):
            sampled = rejection_sampled_trajectories(teacher_model, teacher_tokenizer, self.protocol, retriever,
                                                     rows, rollout=cfg.rollout_config(), max_per_question=1,
                                                     batch_size=cfg.eval_batch_size, chat=cfg.chat_prompt,
                                                     seed=cfg.seed)
        items = [as_text_item(item, teacher_tokenizer,
                              self.protocol.build_prompt(item["question"], self.tokenizer, chat=cfg.chat_prompt))
                 for item in sampled]
        del teacher_model  # a teacher of its own is freed before the policy trains
        gc.collect()
        return items
    def _demonstration_source(self):
        """The rows templated demonstrations are written for, and the retriever that finds their passages. Templated
        trajectories follow a row's hop plan, which only synthetic-world rows carry: on a real dataset the cold start
        teaches the protocol's format on the synthetic world (world_* settings, its own BM25 index), then RL trains
        on the real questions."""
        from searchrl.data.synthetic import world_of

        if self.cfg.dataset == "synthetic":
            return self.world.splits["train"], self.retriever
        from searchrl.retrieval import make_retriever

        world = world_of(self.cfg)
        print(f"cold start: {self.cfg.dataset} rows carry no hop plan, so the templated demonstrations of the format "
              f"come from the synthetic world ({len(world.corpus)} passages)", flush=True)
        return world.splits["train"], make_retriever("bm25", world.corpus)

    def cold_start(self, model):
        """SFT on the cold start's items (`cold_start_items`) with retrieved tokens masked out of the loss
        (R1-Searcher++ eq. 2)."""
        from searchrl.data.synthetic.budget import budget_problems, items_budget
        from searchrl.data.tokenize import tokenize_sft
        from searchrl.sft import sft_train
        from searchrl.trainer.arguments import sft_args

        cfg = self.cfg
        if cfg.sft_examples <= 0:
            return model
        done = self.run_dir / "checkpoints" / "cold_start"
        if cfg.resume and (done / "config.json").exists():
            return self.load_model(str(done))  # a resumed run keeps the cold start it already paid for
        items = self.cold_start_items(model)
        budget = items_budget(items, self.tokenizer, cfg.max_completion_tokens)  # fact statements are not counted
        write_json(self.run_dir / "sft" / "budget.json", budget)
        for line in budget_problems(budget, cfg.max_completion_tokens, what="cold-start demonstrations"):
            warnings.warn(line, stacklevel=2)  # the cold start would teach trajectories that rollouts cut off
        trainer_dir = self.run_dir / "sft"
        resume = last_complete_checkpoint(trainer_dir)[0] if cfg.resume else None
        if resume is not None:
            print(f"resume: the cold start continues from {resume.name}")
        args = sft_args(cfg, trainer_dir, checkpoints=True)
        # written observations are cut to max_observation_tokens as rollouts cut them, so SFT shows what RL will
        dataset = tokenize_sft(items, self.tokenizer, args.max_length or 1024,
                               max_observation_tokens=cfg.max_observation_tokens,
                               observation_frame=self.protocol.observation_frame())
        with measured(self.run_dir, "cold start"):
            log = sft_train(model, self.tokenizer, dataset, args, stage_bar="cold start",
                            resume_from_checkpoint=str(resume) if resume else None)
        write_json(trainer_dir / "history.json", log)
        self.save_model(model, "cold_start")
        for checkpoint in trainer_dir.glob("checkpoint-*"):  # a resume now takes the finished cold start instead
            shutil.rmtree(checkpoint, ignore_errors=True)
        return model
