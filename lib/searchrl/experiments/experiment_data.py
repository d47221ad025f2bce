"""An experiment's questions: the training and held-out rows a run takes from its dataset, and the checks on them.

`balanced_take` interleaves question types so that small subsets still cover every type; `held_out_rows` are the
evaluation questions, which depend on the data (world_seed) and never on the training seed.
"""

from __future__ import annotations

import random
import warnings
from collections import defaultdict

import pandas as pd
import torch

from searchrl.config import RunConfig

__all__ = ["ExperimentData", "balanced_take", "benchmark_rows", "held_out_rows", "seed_everything"]


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
    return balanced_take(rows, cfg.n_eval, cfg.eval_question_types or None, cfg.world_seed + 1, cfg.eval_max_hops)


def _apart(world, prefix: str):
    """`world` with `prefix` on every passage id (and on the rows' supporting ids), so that its passages can join
    another world's in one corpus, whose ids must be unique."""
    import dataclasses

    def row(r):
        meta = r["metadata"]
        return {**r, "metadata": {**meta, "supporting_ids": [prefix + i for i in meta.get("supporting_ids", [])]}}

    corpus = [dataclasses.replace(d, id=prefix + d.id) for d in world.corpus]
    splits = {name: [row(r) for r in rows] for name, rows in world.splits.items()}
    entities = [dataclasses.replace(e, fact_docs={k: prefix + v for k, v in e.fact_docs.items()}) for e in world.entities]
    return dataclasses.replace(world, corpus=corpus, splits=splits, entities=entities)


def _merged(worlds: dict):
    """One world holding every passage, split row and entity of `worlds` ({prefix: world}), each world set `_apart`
    by its prefix; with more than one, each row's id takes its world's prefix too, so that ids stay unique."""
    import dataclasses

    apart = {prefix: _apart(world, prefix) for prefix, world in worlds.items()}
    if len(apart) == 1:
        return next(iter(apart.values()))
    first = next(iter(apart.values()))
    splits = {name: [{**row, "id": prefix + str(row["id"])} for prefix, w in apart.items() for row in w.splits[name]]
              for name in first.splits}
    return dataclasses.replace(first, corpus=[d for w in apart.values() for d in w.corpus], splits=splits,
                               entities=[e for w in apart.values() for e in w.entities])


def benchmark_rows(cfg: RunConfig) -> list:
    """The evaluation questions of `cfg.eval_sets`: `n_eval` of each benchmark (0: all), subsampled with one fixed
    seed so that every training seed and arm is scored on the same questions, and interleaved so that a prefix
    (n_eval_untrained) covers every set. Ids are prefixed with the benchmark's name (unique across sets) and the
    question type is the benchmark's name (its own type kept as `benchmark_type`), so the per-type tables are per
    benchmark. Their own corpora are not loaded: the run's retriever searches the run's corpus."""
    from itertools import chain, zip_longest

    from searchrl.data.benchmarks import load_benchmark

    sets = []
    for name in cfg.eval_sets:
        bench = load_benchmark(name, data_dir=cfg.data_dir or None, limit=cfg.n_eval, seed=0, corpus="none")
        rows = []
        for i, row in enumerate(bench.rows):
            meta = dict(row.get("metadata") or {})
            meta["benchmark_type"], meta["type"] = meta.get("type", "unknown"), name
            rows.append({**row, "id": f"{name}/{row.get('id') or i}", "metadata": meta})
        sets.append(rows)
    return [row for row in chain.from_iterable(zip_longest(*sets)) if row is not None]


class ExperimentData:
    """Loading the run's corpus and questions, and what is written about them (data.json). A mixin of
    `searchrl.experiments.experiment.Experiment`, which builds what it reads (cfg, run_dir, protocol, retriever,
    tokenizer, the question rows, results, history)."""

    def _load_data(self):
        cfg = self.cfg
        if cfg.dataset == "synthetic" and cfg.eval_sets:
            raise ValueError(f"eval_sets {cfg.eval_sets} are searched in the run's corpus, and dataset 'synthetic' "
                             "has only the fictional world's: set dataset and corpus to the paper's data, or "
                             "-p eval_sets '[]' to evaluate held-out questions of the world")
        if cfg.dataset == "synthetic":
            from searchrl.data.synthetic import world_of

            world = world_of(cfg)
            train, evaluation, corpus = world.splits["train"], world.splits[cfg.eval_split], world.corpus
            if cfg.train_world_seed >= 0:  # train on worlds of their own; every world's passages are searchable
                seeds = range(cfg.train_world_seed, cfg.train_world_seed + cfg.train_worlds)
                alone = {"train_world_seed": -1, "train_worlds": 1}  # each training world on its own
                world = _merged({f"w{s}:": world_of(cfg.replace(world_seed=s, **alone)) for s in seeds})
                train, corpus = world.splits["train"], corpus + world.corpus
            self.world = world  # the world the cold start and RL train on
            eval_source, eval_fix = f"the synthetic world's {cfg.eval_split!r} split", "raise n_eval or world_entities"
        else:
            from searchrl.data.catalog import eval_split_of, resolve_corpus, resolve_index, resolve_questions
            from searchrl.data.corpus_file import CorpusFile
            from searchrl.data.loaders import load_corpus, load_qa

            # Every file is resolved (a missing catalogue entry fails here, naming its fetch command) before any
            # file is read and before any model loads.
            train_file = resolve_questions(cfg.dataset, "train")
            split = eval_split_of(cfg.dataset, cfg.eval_split)
            eval_file = resolve_questions(cfg.dataset, split) if split and not cfg.eval_sets else None
            corpus_file = resolve_corpus(cfg.corpus, cfg.dataset)
            index_file = resolve_index(cfg.retriever_index) if cfg.retriever_index else None
            rows = load_qa(train_file)
            if eval_file is not None:
                train, evaluation = rows, load_qa(eval_file)
                eval_source, eval_fix = f"{cfg.dataset}'s {split!r} split ({eval_file})", "raise n_eval"
            else:
                random.Random(0).shuffle(rows)  # the held-out cut must not move with the training seed
                cut = len(rows) if cfg.eval_sets else max(1, len(rows) - cfg.n_eval)
                train, evaluation = rows[:cut], rows[cut:]
                eval_source = f"{cfg.dataset} ({len(rows)} questions, at least one of them kept for training)"
                eval_fix = "raise n_eval, or give a dataset file with more questions"
            # a prebuilt index comes with a passage file that may not fit in memory: read it by offset instead
            corpus = CorpusFile(corpus_file) if index_file is not None else load_corpus(corpus_file)
            self.data_files = {"train": str(train_file), "eval": str(eval_file or train_file),
                               "corpus": str(corpus_file), **({"index": str(index_file)} if index_file else {})}
        train = balanced_take(train, cfg.n_train, cfg.train_question_types or None, cfg.seed, cfg.train_max_hops)
        if cfg.eval_sets:
            evaluation = benchmark_rows(cfg)
            eval_source, eval_fix = f"eval_sets {cfg.eval_sets}", "check the benchmarks' question files"
        else:
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

        return {"dataset": self.cfg.dataset, "files": getattr(self, "data_files", {}),
                "corpus_passages": len(self.corpus), "train_questions": len(self.train_rows),
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
