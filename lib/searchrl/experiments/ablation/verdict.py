"""Verdicts on the papers' claims: does our measured difference between two arms point the way the paper says?

A claim names the arm it says scores higher (`better`), the one it says scores lower (`worse`) and the metric. Our
difference is better - worse over the (seed, question) pairs both arms evaluated, paired by question and seed. Every
seed answers the same held-out questions, so each question's difference is averaged over its seeds and the
percentile bootstrap resamples questions: seeds tend to win and lose the same questions, and resampling (seed,
question) pairs as if independent would narrow the interval by up to the square root of the number of seeds (as in
`searchrl.analysis.pooled`). The verdict is "reproduced" when the interval lies above 0, "opposite" when below,
"inconclusive" when it contains 0.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from searchrl.config.ablation import CLAIM_METRICS, Claim, parse_claims
from searchrl.core.stats import bootstrap_mean

MIN_QUESTIONS = 100  # fewer held-out questions per seed than this: a paper-sized gap may not be resolvable
# An arm's seed averaging fewer searches per held-out question than this answered without searching (RL collapsed
# to guessing, or the arm never searches): its score says how well it guesses, which the verdict should say.
NO_SEARCH = 0.1
# A seed whose greedy held-out answers were well formed less often than this lost the protocol's format in training
# (ablate_algorithm's cpu profile: PPO seed 1 dropped the think block, 0.00 well formed, yet its answers were read
# and scored 0.26 F1): its score is not that of a policy following the protocol, which the verdict should say.
NO_FORMAT = 0.5
# A seed more of whose held-out searches than this found no document searched for nothing (ablate_evidence's cpu
# profile, seed 2: the query "and", 0.39 and 0.80 of the searches, where every other committed arm-seed is at 0.12 or
# less): it keeps the search count of a searching policy, so NO_SEARCH cannot see it.
EMPTY_SEARCHES = 0.25
# Record columns that together say what a policy did with a question: two arms equal in all of them, on every question
# of a seed, behaved alike there (ablate_knowledge's cpu profile, seed 0: the memorization loss and the group reward
# act only on correct searching rollouts, RL stopped searching at step 3, and the three arms trained bit for bit alike).
SAME_ANSWER_COLUMNS = ("completion", "prediction", "queries")
REPRODUCED, OPPOSITE, INCONCLUSIVE, NOT_RUN = "reproduced", "opposite", "inconclusive", "not run"


# A bound this close to 0 is 0: a resampled mean of differences that cancel (+1/3 and -1/3 over three seeds) comes
# out as -5.6e-19 rather than 0, which once turned an interval ending at 0 into an "opposite" verdict.
ROUNDING = 1e-9


def verdict(low: float, high: float) -> str:
    """reproduced (interval above 0), opposite (below 0) or inconclusive (contains 0, up to float rounding)."""
    if np.isnan(low) or np.isnan(high):
        return NOT_RUN
    return REPRODUCED if low > ROUNDING else OPPOSITE if high < -ROUNDING else INCONCLUSIVE


def paired_differences(records: pd.DataFrame, better: str, worse: str, metric: str) -> pd.DataFrame:
    """Rows (seed, id) that both arms evaluated, with the two arms' scores and `difference` = better - worse."""
    def scores(arm: str) -> pd.DataFrame:
        part = records.loc[records["arm"] == arm, ["seed", "id", metric]]
        return part.drop_duplicates(["seed", "id"]).astype({metric: float})

    pairs = scores(better).merge(scores(worse), on=["seed", "id"], suffixes=(" better", " worse"))
    pairs["difference"] = pairs[f"{metric} better"] - pairs[f"{metric} worse"]
    return pairs.dropna(subset=["difference"]).reset_index(drop=True)  # e.g. support_recall where none is known


def verdict_table(records: pd.DataFrame, claims: Sequence[Claim], *, confidence: float = 0.95,
                  n_resamples: int = 10_000, seed: int = 0, min_questions: int = MIN_QUESTIONS) -> pd.DataFrame:
    """One row per claim: paper, claim, metric, the arms, their means over the shared pairs, `difference`
    (better - worse, the mean of the per-question means over seeds), its paired bootstrap interval over questions,
    `verdict`, `questions` (the units the bootstrap resamples), `pairs` ((seed, question) pairs behind them), `seeds`,
    `questions/seed` (fewest over seeds), `per seed` (each seed's mean difference, in seed order) and `warning`
    (fewer than `min_questions` questions, questions only one arm evaluated, a single seed, seeds that point
    against a decided verdict, seeds of either arm that answered without searching, searched for nothing or lost
    the format, seeds in which the two arms wrote the same responses)."""
    pct = round(confidence * 100)
    silent = _seeds_below(records, "searches", NO_SEARCH)
    unformatted = _seeds_below(records, "format_ok", NO_FORMAT)
    hollow = _seeds_searching_nothing(records)
    rows = []
    for claim in claims:
        metric = claim.metric.lower()
        row: dict[str, Any] = {"paper": claim.paper, "claim": claim.text, "metric": metric, "better": claim.better,
                               "worse": claim.worse}
        if metric in records.columns:
            pairs = paired_differences(records, claim.better, claim.worse, metric)
        else:
            pairs = pd.DataFrame(columns=["seed", "id", "difference"])
        if pairs.empty:
            row.update({"better mean": np.nan, "worse mean": np.nan, "difference": np.nan, f"{pct}% low": np.nan,
                        f"{pct}% high": np.nan, "verdict": NOT_RUN, "questions": 0, "pairs": 0, "seeds": 0,
                        "questions/seed": 0, "per seed": "",
                        "warning": "no question was evaluated by both arms (not run yet?)"})
            rows.append(row)
            continue
        # per question, the mean over seeds: the unit the bootstrap resamples
        by_question = pairs.groupby("id", sort=False)[[f"{metric} better", f"{metric} worse", "difference"]].mean()
        mean, low, high = bootstrap_mean(by_question["difference"].to_numpy(), n_resamples=n_resamples,
                                         confidence=confidence, seed=seed)
        low, high = (0.0 if abs(bound) <= ROUNDING else bound for bound in (low, high))  # no "-0.000" in tables
        per_seed = pairs.groupby("seed")["id"].nunique()
        seed_means = pairs.groupby("seed")["difference"].mean()
        warnings = []
        if per_seed.min() < min_questions:
            warnings.append(f"only {int(per_seed.min())} held-out questions per seed (< {min_questions}): the "
                            "interval is wide")
        evaluated = records[records["arm"].isin([claim.better, claim.worse])].drop_duplicates(["arm", "seed", "id"])
        unpaired = len(evaluated) - 2 * len(pairs)
        if unpaired:
            warnings.append(f"{unpaired} question(s) evaluated by only one of the two arms left out")
        if len(per_seed) < 2:
            warnings.append("one seed: the difference may depend on the training run's sampling")
        quiet = _name_seeds(silent, (claim.better, claim.worse))
        if quiet:
            warnings.append(f"answered without searching (< {NO_SEARCH} searches per question): {quiet}")
        empty = _name_seeds(hollow, (claim.better, claim.worse))
        if empty:
            warnings.append(f"searched for nothing (> {EMPTY_SEARCHES:g} of searches found no document): {empty}")
        broken = _name_seeds(unformatted, (claim.better, claim.worse))
        if broken:
            warnings.append(f"lost the answer format (< {NO_FORMAT:g} of answers well formed): {broken}")
        alike = _seeds_answering_alike(records, claim.better, claim.worse)
        if alike:
            warnings.append(f"the two arms wrote the same response to every question in {_seed_list(alike)}: what "
                            "they differ in changed nothing there (did its mechanism ever act in training?)")
        decided = verdict(low, high)
        against = [int(seed) for seed, d in seed_means.items() if np.sign(d) != np.sign(mean)]
        if decided in (REPRODUCED, OPPOSITE) and against:
            # the interval resamples questions of these trained arms: the spread between training runs is not in it
            warnings.append(f"not every seed points this way ({_seed_list(against)}: "
                            f"{', '.join(f'{seed_means[s]:+.3f}' for s in against)}): the interval resamples "
                            "questions, not training runs")
        row.update({"better mean": float(by_question[f"{metric} better"].mean()),
                    "worse mean": float(by_question[f"{metric} worse"].mean()), "difference": mean,
                    f"{pct}% low": low, f"{pct}% high": high, "verdict": decided,
                    "questions": len(by_question), "pairs": len(pairs),
                    "seeds": len(per_seed), "questions/seed": int(per_seed.min()),
                    "per seed": ", ".join(f"{d:+.3f}" for d in seed_means),
                    "warning": "; ".join(warnings)})
        rows.append(row)
    return pd.DataFrame(rows)


def _seeds_below(records: pd.DataFrame, column: str, level: float) -> dict[str, list[int]]:
    """{arm: its seeds whose held-out records average below `level` in `column`} (none when it is not recorded)."""
    if column not in records.columns or records.empty:
        return {}
    means = records.groupby(["arm", "seed"])[column].mean()
    out: dict[str, list[int]] = {}
    for (arm, seed), value in means.items():
        if value < level:
            out.setdefault(arm, []).append(int(seed))
    return out


def _seeds_searching_nothing(records: pd.DataFrame) -> dict[str, list[int]]:
    """{arm: its seeds that still searched (NO_SEARCH or more a question) but more than EMPTY_SEARCHES of whose
    searches found no document}."""
    if not {"searches", "empty_results"} <= set(records.columns) or records.empty:
        return {}
    # per-question means: their ratio is the share of the seed's searches that found nothing
    means = records.groupby(["arm", "seed"])[["searches", "empty_results"]].mean()
    out: dict[str, list[int]] = {}
    for (arm, seed), row in means.iterrows():
        searched = row["searches"] >= NO_SEARCH and row["searches"] > 0
        if searched and row["empty_results"] / row["searches"] > EMPTY_SEARCHES:
            out.setdefault(arm, []).append(int(seed))
    return out


def _seeds_answering_alike(records: pd.DataFrame, first: str, second: str) -> list[int]:
    """The seeds in which arms `first` and `second` gave the same record in every SAME_ANSWER_COLUMNS column present
    to every question both evaluated (none when no such column is recorded)."""
    columns = [c for c in SAME_ANSWER_COLUMNS if c in records.columns]
    if not columns:
        return []
    def answers(arm: str) -> pd.DataFrame:
        part = records.loc[records["arm"] == arm, ["seed", "id", *columns]].drop_duplicates(["seed", "id"])
        return part.assign(**{c: part[c].map(repr) for c in columns})  # lists (queries) compare as text

    both = answers(first).merge(answers(second), on=["seed", "id"], suffixes=(" a", " b"))
    same = np.logical_and.reduce([both[f"{c} a"] == both[f"{c} b"] for c in columns])
    return sorted(int(seed) for seed, alike in pd.Series(same, index=both.index).groupby(both["seed"]).all().items()
                  if alike)


def _name_seeds(seeds: dict[str, list[int]], arms: Sequence[str]) -> str:
    """"ppo seed 1; rloo seeds 0, 2" for the listed `arms` that have seeds in `seeds`."""
    return "; ".join(f"{arm} {_seed_list(seeds[arm])}" for arm in arms if seeds.get(arm))


def _seed_list(seeds: Sequence[int]) -> str:
    """"seed 1" or "seeds 0, 2"."""
    return f"seed{'s' if len(seeds) > 1 else ''} {', '.join(map(str, seeds))}"


__all__ = ["CLAIM_METRICS", "Claim", "paired_differences", "parse_claims", "verdict", "verdict_table"]
