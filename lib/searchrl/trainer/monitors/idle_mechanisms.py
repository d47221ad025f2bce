"""Mechanisms that never acted in an RL stage, read from its logged metrics when it ends.

A reward that gave every rollout of each step the same value told no rollouts apart, so it moved no advantage. The
memorization loss (R1-Searcher++) acts only on rollouts that searched, answered correctly and were rewritten: with
none, it added nothing. Arms of an ablation that differ only in such a mechanism then train alike (ablate_knowledge's
cpu profile, seed 0: RL stopped searching at step 3, the group reward and the memorization loss never acted, and the
three arms trained bit for bit alike). Saying so when the stage ends keeps a user from reading a verdict about a
mechanism that never ran.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

REWARD_PREFIX, STD_SUFFIX = "rewards/", "/std"  # TRL logs rewards/<function name>/mean and /std each step
REWRITES_KEPT = "memorization/rewrites_kept"


def _numbers(rows: Sequence[Mapping[str, Any]], key: str) -> list[float]:
    values = []
    for row in rows:
        value = row.get(key)
        if isinstance(value, (int, float)) and not math.isnan(float(value)):
            values.append(float(value))
    return values


def _steps(n: int) -> str:
    return f"{n} logged step{'' if n == 1 else 's'}"


def idle_mechanisms(rows: Sequence[Mapping[str, Any]], memorization_coef: float = 0.0) -> list[str]:
    """One line per mechanism that never acted in the logged `rows` of one stage (empty when every one did).

    A reward is idle when its logged spread over each step's rollouts was 0 at every step; the memorization loss when
    `memorization_coef` > 0 and no rewrite was kept in any step."""
    lines = []
    keys = dict.fromkeys(k for row in rows for k in row if k.startswith(REWARD_PREFIX) and k.endswith(STD_SUFFIX))
    for key in keys:
        spreads = _numbers(rows, key)
        if spreads and all(s == 0.0 for s in spreads):
            name = key[len(REWARD_PREFIX):-len(STD_SUFFIX)]
            means = sorted(set(_numbers(rows, f"{REWARD_PREFIX}{name}/mean")))
            value = f" ({means[0]:g})" if len(means) == 1 else ""
            lines.append(f"reward {name} gave every rollout the same value{value} in each of {_steps(len(spreads))}: "
                         "it told no rollouts apart, so it moved no advantage")
    kept = _numbers(rows, REWRITES_KEPT)
    if memorization_coef > 0 and kept and sum(kept) == 0:
        lines.append(f"the memorization loss (memorization_coef {memorization_coef:g}) never acted: in "
                     f"{_steps(len(kept))} no rollout that searched and answered correctly was rewritten and kept")
    return lines


__all__ = ["idle_mechanisms"]
