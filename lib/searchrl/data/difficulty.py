"""Training questions labelled by difficulty and mixed by recipe (R1-Searcher's data selection, section 2.1).

A reference policy answers each question in sampled search rollouts; the number of the rollout that first answers
correctly is the question's difficulty. With the paper's bounds (the defaults here):

    easy        solved at rollout 1-9           (fewer than 10 rollouts)
    medium      solved at rollout 10-20         (10 to 20 rollouts)
    difficult   solved at rollout 21 or later   (more than 20 rollouts)
    unsolved    not solved within difficulty_rollouts rollouts

    labelled = label_difficulty(rows, sampler, cfg)      # metadata["difficulty"], metadata["rollouts_to_solve"]
    train = mix_by_recipe(labelled, {"medium": 0.5, "difficult": 0.5}, seed=0)

This module knows nothing of models: a `RolloutSampler` says which of n fresh rollouts of each question were
correct (`searchrl.experiments.data_selection.PolicySampler` runs the real rollout engine). Outcomes are cached in a JSONL file
keyed by the sampler's identity (policy and rollout settings) and the question, so a second run samples nothing,
and a run with a larger `difficulty_rollouts` only samples the rollouts an unsolved question has not had yet.
Rollouts are drawn independently, so the first correct one among k + m rollouts is found by sampling m more.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import random
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

import pandas as pd

from searchrl.config.difficulty import BUCKETS, DifficultyConfig, _check_recipe
from searchrl.core.progress import progress_bar
from searchrl.data.schema import check_rows

__all__ = ["CACHE_ENV_VAR", "SAVE_EVERY", "DifficultyCache", "RolloutSampler", "bucket_of", "default_cache_path", "difficulty_counts", "label_difficulty", "mix_by_recipe", "mixture_problems", "recipe_counts", "recipe_for_stage"]


CACHE_ENV_VAR = "SEARCHRL_DIFFICULTY_CACHE"


# Questions handed to the sampler at a time within a round; their outcomes are cached as soon as it returns, so an
# interrupted labelling loses at most this many questions' rollouts rather than the whole round.
SAVE_EVERY = 32


def bucket_of(rollouts_to_solve: int | None, cfg: DifficultyConfig) -> str:
    """The bucket of a question first answered correctly at rollout `rollouts_to_solve` (1-based; None: never)."""
    if rollouts_to_solve is None:
        return "unsolved"
    if rollouts_to_solve < cfg.difficulty_easy_below:
        return "easy"
    if rollouts_to_solve <= cfg.difficulty_hard_above:
        return "medium"
    return "difficult"


class RolloutSampler(Protocol):
    """What labelling needs from a policy: fresh sampled rollouts of questions, judged correct or not."""

    identity: Mapping[str, Any]
    """Everything that changes the outcomes (policy, its weights, protocol, retriever, rollout settings, metric),
    JSON-serialisable; it keys the cache."""

    def correct(self, rows: Sequence[Mapping], repeats: int) -> list[list[bool]]:
        """For each row, whether each of `repeats` new independent rollouts answered it correctly, in sampling
        order."""
        ...


def default_cache_path() -> Path:
    """$SEARCHRL_DIFFICULTY_CACHE when set, else ~/.cache/searchrl/difficulty.jsonl."""
    return Path(os.environ.get(CACHE_ENV_VAR) or Path.home() / ".cache" / "searchrl" / "difficulty.jsonl")


class DifficultyCache:
    """Sampled outcomes per (sampler identity, question): rollouts sampled so far and the first correct one.

    A JSONL file, rewritten whole through a temporary file and a rename, so a crash leaves the old file or the new
    one, never half a line; entries written meanwhile by another process are merged in before each write.
    """

    def __init__(self, path: str | Path | None):
        self.path = Path(path).expanduser() if path is not None else None
        self.entries: dict[str, dict[str, Any]] = self._read()

    @staticmethod
    def key(identity: Mapping[str, Any], row: Mapping) -> str:
        """Hash of the sampler identity and the question (id, text, golden answers)."""
        payload = {"sampler": identity, "id": str(row.get("id", "")), "question": row["question"],
                   "golden_answers": list(row["golden_answers"])}
        return hashlib.sha256(json.dumps(payload, sort_keys=True, default=str).encode()).hexdigest()[:32]

    def get(self, key: str) -> dict[str, Any] | None:
        return self.entries.get(key)

    def put(self, key: str, entry: dict[str, Any]) -> None:
        self.entries[key] = entry

    def save(self) -> None:
        if self.path is None:
            return
        merged = self._read()
        for key, entry in self.entries.items():
            if key not in merged or _more_known(entry, merged[key]):
                merged[key] = entry
        self.entries = merged
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_name(f".{self.path.name}.{os.getpid()}.tmp")
        with open(tmp, "w", encoding="utf-8") as out:
            for key, entry in merged.items():
                out.write(json.dumps({"key": key, **entry}, ensure_ascii=False) + "\n")
        os.replace(tmp, self.path)

    def _read(self) -> dict[str, dict[str, Any]]:
        if self.path is None or not self.path.is_file():
            return {}
        entries = {}
        for line in self.path.read_text(encoding="utf-8").splitlines():
            try:
                record = json.loads(line)
            except json.JSONDecodeError:  # a file edited by hand; the rest is still good
                continue
            if isinstance(record, dict) and "key" in record:
                entries[record.pop("key")] = record
        return entries


def _questions_per_call(sampler: RolloutSampler, repeats: int, save_every: int) -> int:
    """`save_every` rounded up to whole batches of a sampler that batches `batch_size` rollouts (whole questions,
    like `searchrl.rollout.loop.rollout_questions`), so that splitting a round leaves no batch part-filled."""
    batch_size = getattr(sampler, "batch_size", None)
    if not isinstance(batch_size, int) or batch_size < 1:
        return save_every
    per_batch = max(1, batch_size // repeats)
    return -(-save_every // per_batch) * per_batch


def _more_known(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    """Whether outcome `a` tells more than `b`: solved where `b` is not, or more rollouts sampled."""
    if (a.get("solved_at") is None) != (b.get("solved_at") is None):
        return a.get("solved_at") is not None
    return int(a.get("sampled", 0)) > int(b.get("sampled", 0))


def label_difficulty(rows: Sequence[Mapping], sampler: RolloutSampler, cfg: DifficultyConfig, *,
                     progress: bool = True, save_every: int = SAVE_EVERY) -> list[dict[str, Any]]:
    """Copies of `rows` with metadata["difficulty"] (a bucket), metadata["rollouts_to_solve"] (the 1-based number
    of the first correct rollout; None when none of the sampled ones was) and metadata["rollouts_sampled"].

    Each round samples `difficulty_chunk` rollouts of every question still unsolved, until it is solved or has had
    `difficulty_rollouts`. Outcomes already cached (`difficulty_cache`) are reused. A round hands the sampler
    `save_every` questions at a time (rounded up to whole sampler batches when the sampler has a `batch_size`) and
    saves their outcomes as soon as it returns, so an interrupted run keeps every part of a round it finished.
    """
    rows = check_rows(rows, "label_difficulty")
    budget = cfg.difficulty_rollouts
    if budget < 1:
        raise ValueError("label_difficulty needs difficulty_rollouts >= 1 (0 means labelling is off)")
    if save_every < 1:
        raise ValueError(f"save_every must be >= 1, got {save_every}")
    cache = DifficultyCache(cfg.difficulty_cache or default_cache_path())
    identity = dict(sampler.identity)
    keys = [DifficultyCache.key(identity, row) for row in rows]
    outcomes = [dict(cache.get(key) or {"solved_at": None, "sampled": 0}) for key in keys]
    todo = [i for i, o in enumerate(outcomes) if o["solved_at"] is None and o["sampled"] < budget]
    bar = progress_bar(total=len(rows), initial=len(rows) - len(todo), desc="difficulty", unit="question",
                       disable=not progress)
    try:
        while todo:
            # One rollout count for the whole round, whatever part of it is sampled at a time.
            repeats = min(cfg.difficulty_chunk, budget - min(outcomes[i]["sampled"] for i in todo))
            step = _questions_per_call(sampler, repeats, save_every)
            still = []
            for lo in range(0, len(todo), step):
                part = todo[lo: lo + step]
                results = sampler.correct([rows[i] for i in part], repeats)
                if len(results) != len(part) or any(len(r) != repeats for r in results):
                    raise RuntimeError(f"the sampler returned {[len(r) for r in results]} outcomes for {len(part)} "
                                       f"questions x {repeats} rollouts; it must return one list of {repeats} per "
                                       "question")
                finished = 0
                for i, correct in zip(part, results):
                    outcome = outcomes[i]
                    usable = correct[: budget - outcome["sampled"]]  # a question that had more before needs fewer
                    first = next((j for j, ok in enumerate(usable) if ok), None)
                    if first is not None:
                        outcome["solved_at"] = outcome["sampled"] + first + 1
                    outcome["sampled"] += len(usable)
                    cache.put(keys[i], {**outcome, "id": str(rows[i].get("id", "")), "question": rows[i]["question"],
                                        "policy": identity.get("policy", "")})
                    if outcome["solved_at"] is None and outcome["sampled"] < budget:
                        still.append(i)
                    else:
                        finished += 1
                cache.save()
                bar.update(finished)
                bar.set_postfix(solved=sum(o["solved_at"] is not None for o in outcomes))
            todo = still
    finally:
        bar.close()
    labelled = []
    for row, outcome in zip(rows, outcomes):
        solved_at = outcome["solved_at"]
        if solved_at is not None and solved_at > budget:  # the cache knew more than this run's budget allows
            solved_at = None
        metadata = {**(row.get("metadata") or {}), "difficulty": bucket_of(solved_at, cfg),
                    "rollouts_to_solve": solved_at, "rollouts_sampled": min(outcome["sampled"], budget)}
        labelled.append({**row, "metadata": metadata})
    return labelled


def recipe_for_stage(recipe: Mapping[str, Any], stage: str) -> Mapping[str, Any]:
    """The recipe an RL stage uses: `recipe` itself, or its entry for `stage` when it holds one recipe per stage."""
    if recipe and all(isinstance(v, Mapping) for v in recipe.values()):
        if stage not in recipe:
            raise ValueError(f"data_recipe has recipes for stages {', '.join(recipe)} but none for {stage!r}")
        return recipe[stage]
    return recipe


def recipe_counts(recipe: Mapping[str, int | float], available: Mapping[str, int],
                  total: int | None = None) -> dict[str, int]:
    """How many questions to take from each bucket.

    Counts are taken as they are. Fractions share `total` questions (largest remainders, so the counts add up to
    it); without `total`, the largest mixture the labelled buckets can supply in those proportions.
    """
    kind = _check_recipe(recipe)
    if kind == "count":
        return {b: int(n) for b, n in recipe.items() if n > 0}
    shares = {b: float(f) for b, f in recipe.items() if f > 0}
    if total is None:
        total = min(math.floor(available.get(b, 0) / f + 1e-9) for b, f in shares.items())
    exact = {b: total * f for b, f in shares.items()}
    counts = {b: math.floor(x + 1e-9) for b, x in exact.items()}
    by_remainder = sorted(shares, key=lambda b: (-(exact[b] - counts[b]), list(shares).index(b)))
    for b in by_remainder[: total - sum(counts.values())]:
        counts[b] += 1
    return counts


def mix_by_recipe(rows: Sequence[Mapping], recipe: Mapping[str, int | float], seed: int = 0, *,
                  total: int | None = None) -> list[Mapping]:
    """A training set drawn from labelled `rows` by difficulty: {bucket: count} or {bucket: fraction} (see
    `recipe_counts`), each bucket's questions drawn at random (`seed`), the result shuffled so buckets interleave.

    Raises ValueError naming the bucket when it holds fewer labelled questions than the recipe asks for.
    """
    rows = check_rows(rows, "mix_by_recipe")
    unlabelled = [str(r.get("id", i)) for i, r in enumerate(rows) if "difficulty" not in (r.get("metadata") or {})]
    if unlabelled:
        raise ValueError(f"mix_by_recipe needs rows labelled by label_difficulty; {len(unlabelled)} are not "
                         f"(first: {unlabelled[0]!r})")
    by_bucket: dict[str, list[Mapping]] = {b: [] for b in BUCKETS}
    for row in rows:
        by_bucket[row["metadata"]["difficulty"]].append(row)
    available = {b: len(v) for b, v in by_bucket.items()}
    counts = recipe_counts(recipe, available, total)
    short = {b: n for b, n in counts.items() if n > available[b]}
    if short:
        wanted = ", ".join(f"{n} {b} (only {available[b]} labelled {b})" for b, n in short.items())
        have = ", ".join(f"{b} {n}" for b, n in available.items())
        raise ValueError(f"the recipe {dict(recipe)} asks for {wanted}; the labelled questions are: {have}. "
                         "Lower the recipe, label more questions, or raise difficulty_rollouts")
    if sum(counts.values()) == 0:
        empty = [b for b in counts if available[b] == 0]
        raise ValueError(f"the recipe {dict(recipe)} selects no question: its bucket(s) {empty} hold no labelled "
                         f"question (labelled: {available}). Drop them from the recipe or raise difficulty_rollouts")
    rng = random.Random(seed)
    chosen = [row for b, n in counts.items() for row in rng.sample(by_bucket[b], n)]
    rng.shuffle(chosen)
    return chosen


def mixture_problems(labelled: Sequence[Mapping], chosen: Sequence[Mapping]) -> list[str]:
    """Sentences on what a recipe's mixture lost: question types of the labelled pool that no chosen question has
    (the reference policy solved none of them in the buckets the recipe takes), with the pool's buckets per type.
    A weak reference policy does this quietly: on the CPU profile's 135M policy, every two-hop question was
    unsolved in 8 rollouts, so a medium/difficult recipe trained on single-hop questions alone."""
    pool = difficulty_counts(labelled, by_type=True)
    lost = sorted(set(pool.columns) - set(difficulty_counts(chosen, by_type=True).columns))
    if not lost:
        return []
    detail = "; ".join(f"{t}: " + ", ".join(f"{b} {int(n)}" for b, n in pool[t].items() if n) for t in lost)
    return [(f"the difficulty recipe kept {len(chosen)} questions and no question of type(s) {', '.join(lost)} "
            f"(their labels: {detail}). RL will not train on them; label with a stronger reference policy "
            "(difficulty_policy), more rollouts (difficulty_rollouts), or add their bucket to data_recipe")]


def difficulty_counts(rows: Sequence[Mapping], by_type: bool = False) -> pd.DataFrame:
    """Questions per bucket (index: the buckets, in order); with `by_type`, one column per question type
    (metadata["type"]), else one column `questions`."""
    buckets = [(r.get("metadata") or {}).get("difficulty", "unlabelled") for r in rows]
    order = list(BUCKETS) + (["unlabelled"] if "unlabelled" in buckets else [])
    if not by_type:
        counts = Counter(buckets)
        return pd.DataFrame({"questions": [counts[b] for b in order]}, index=pd.Index(order, name="difficulty"))
    types = [str((r.get("metadata") or {}).get("type", "unknown")) for r in rows]
    table = pd.crosstab(pd.Series(buckets, name="difficulty"), pd.Series(types, name="type"))
    return table.reindex(order, fill_value=0)
