"""Did RL learn, seed by seed? The bar a search-RL run on a small budget is held to, checked from its run folder.

    checks = learning_checks({0: run_dir_0, 1: run_dir_1})     # one row per seed, one column per check
    print(format_checks(checks))                               # each check: value per seed, met in k of n seeds

A gain counts when the RL stage itself makes it (F1 after RL minus after the cold start on the same questions, paired
interval above 0), the training curve shows it, the search count follows the question (more searches where more
hops are needed), nothing breaks (format), and no question type gains by guessing. The values come from what every
run folder already holds: eval/table.json (stage table), eval/curve.json (curve trends) and the per-type table.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from searchrl.core.files import read_json
from searchrl.evaluation.protocol import stage_rows
from searchrl.runs.folder import stage_trajectories_path

TYPE_STAGES = ("after cold start", "after RL", "no search")


@dataclass(frozen=True)
class LearningTargets:
    """Thresholds of the checks; the defaults are the project's bar for "RL learns on a CPU"."""

    min_f1_gain: float = 0.10
    """F1 after RL minus after the cold start, on the same questions; its paired 95% interval must also lie above 0."""
    min_reward_gain: float = 0.10
    """Mean training reward of the last quarter of steps minus the first quarter's."""
    min_multi_hop_searches: float = 1.5
    """Searches per question after RL on multi-hop questions, at least."""
    max_single_hop_searches: float = 1.2
    """Searches per question after RL on single-hop questions, at most."""
    min_format_rate: float = 0.95
    """Greedy format-valid rate after RL, at least (and never below the cold start's)."""


# The curve a reward trend is read from: the scheduled questions' reward when dynamic sampling logged it (TRL's own
# reward also averages the random extra draws), else TRL's.
REWARD_CURVES = ("search/scheduled_reward", "reward")


def _stage(rows: list[dict], name: str) -> dict:
    return next((r for r in rows if r.get("stage") == name), {})


def _num(value) -> float:
    return float("nan") if value is None else float(value)


def seed_checks(run_dir: Path, before: str = "after cold start", after: str = "after RL",
                targets: LearningTargets = LearningTargets(), types: pd.DataFrame | None = None) -> dict:
    """One seed's values and checks (a check is None where the run lacks what it needs). `types`: the run's per-type
    table when the caller has it already (else read, or rebuilt, by `run_type_table`)."""
    rows = stage_rows(read_json(Path(run_dir) / "eval" / "table.json"))
    cold, rl = _stage(rows, before), _stage(rows, after)
    if types is None:
        types = run_type_table(Path(run_dir))
    overall = next((r for r in types.to_dict("records") if r["qtype"] == "all"), {}) if types is not None else {}
    curves = read_json(Path(run_dir) / "eval" / "curve.json") or {}
    curve = next((c for c in REWARD_CURVES if c in curves), None)
    out = {"ΔF1": _num(overall.get("ΔF1")), "ΔF1 95% low": _num(overall.get("ΔF1 95% low")),
           "reward curve": curve or "", "reward gain": _num(curves[curve]["gain"]) if curve else math.nan,
           "searches multi-hop": _num(rl.get("searches multi-hop")),
           "searches single-hop": _num(rl.get("searches single-hop")),
           "format after": _num(rl.get("format-valid rate")), "format before": _num(cold.get("format-valid rate"))}
    guessed = ([str(r["qtype"]) for r in types.to_dict("records") if r["qtype"] not in ("all", "all but guessed types")
                and r.get("gained by guessing") in (True, 1)] if types is not None else [])
    known = types is not None and "F1 no search" in types
    out["types gained by guessing"] = ", ".join(guessed)

    def check(ok: bool, *values: float) -> bool | None:
        return None if any(math.isnan(v) for v in values) else bool(ok)

    out["F1 gain"] = check(out["ΔF1"] >= targets.min_f1_gain and out["ΔF1 95% low"] > 0,
                           out["ΔF1"], out["ΔF1 95% low"])
    out["reward rises"] = check(out["reward gain"] >= targets.min_reward_gain, out["reward gain"])
    out["multi-hop searches"] = check(out["searches multi-hop"] >= targets.min_multi_hop_searches,
                                      out["searches multi-hop"])
    out["single-hop searches"] = check(out["searches single-hop"] <= targets.max_single_hop_searches,
                                       out["searches single-hop"])
    out["format kept"] = check(out["format after"] >= max(targets.min_format_rate, out["format before"]),
                               out["format after"], out["format before"])
    out["no guessing"] = (not guessed) if known else None
    return out


CHECKS = ("F1 gain", "reward rises", "multi-hop searches", "single-hop searches", "format kept", "no guessing")
# The value(s) each check is read from, as shown beside it.
SHOWN = {"F1 gain": ("ΔF1", "ΔF1 95% low"), "reward rises": ("reward gain",),
         "multi-hop searches": ("searches multi-hop",), "single-hop searches": ("searches single-hop",),
         "format kept": ("format before", "format after"), "no guessing": ("types gained by guessing",)}


def learning_checks(run_dirs: dict[int, Path], targets: LearningTargets = LearningTargets(),
                    type_tables: dict[int, pd.DataFrame | None] | None = None) -> pd.DataFrame:
    """One row per seed (index `seed`): the values and each check in CHECKS (True, False, or None: not measured).
    `type_tables`: each seed's per-type table, when the caller has read them already."""
    type_tables = type_tables or {}
    table = pd.DataFrame.from_dict(
        {seed: seed_checks(d, targets=targets, types=type_tables.get(seed)) for seed, d in run_dirs.items()},
        orient="index")
    table.index.name = "seed"
    return table


def format_checks(table: pd.DataFrame) -> str:
    """Each check on one line: its values per seed and in how many seeds it was met."""
    lines = []
    for name in CHECKS:
        results = table[name]
        cells = []
        for seed, row in table.iterrows():
            shown = []
            for col in SHOWN[name]:
                value = row[col]
                shown.append(f"{value:.3f}" if isinstance(value, float) else (str(value) or "none"))
            cells.append(f"seed {seed} " + " / ".join(shown))
        measured = results.notna().sum()
        met = int(results.isin([True]).sum())
        lines.append(f"{name:<20} met in {met} of {len(results)} seeds"
                     + (f" ({len(results) - measured} not measured)" if measured < len(results) else "")
                     + ": " + "; ".join(cells))
    return "\n".join(lines)


__all__ = ["CHECKS", "TYPE_STAGES", "LearningTargets", "format_checks", "learning_checks", "run_type_table", "seed_checks"]


def run_type_table(run_dir: Path) -> pd.DataFrame | None:
    """A run's per-type table: its eval/type_table.json, or, for a run folder made before that file existed, rebuilt
    from its saved trajectories; None when the run did not evaluate both "after cold start" and "after RL"."""
    rows = read_json(Path(run_dir) / "eval" / "type_table.json")
    if rows:
        return pd.DataFrame(rows)
    from searchrl.evaluation.evaluate import EvalResult
    from searchrl.evaluation.type_table import type_table

    files = {stage: stage_trajectories_path(run_dir, stage) for stage in TYPE_STAGES}
    results = {stage: EvalResult(pd.read_json(path, lines=True)) for stage, path in files.items() if path.is_file()}
    if not {"after cold start", "after RL"} <= set(results):
        return None
    before, after, no_search = TYPE_STAGES
    return type_table(results, before, after, no_search if no_search in results else None).reset_index()
