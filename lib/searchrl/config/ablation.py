"""The ablation keys of the schema (`arms`, `claims`, `cold_start_arm`, `cold_start_from`), checked without the
ablation machinery: arms, their names and the settings they may not set, which arm's cold start each starts from,
and the papers' claims about pairs of arms.

`searchrl.experiments.ablation` runs ablations with these; the checks that build an arm's config
(`arm_problems`, `with_cold_start_arm`, `cold_start_key`) are RunConfig's own, in `searchrl.config`.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from searchrl.config.errors import ConfigError

__all__ = ["ABLATION_FIELDS", "ARM_FORBIDDEN", "CLAIM_KEYS", "CLAIM_METRICS", "COLD_START_ARM", "COLD_START_OVERRIDES",
           "Arm", "Claim", "ablation_base", "arm_name_problem", "arm_sources", "cold_start_source_problems",
           "cold_start_sources", "parse_claims", "source_problems"]

# Settings an arm may not change: the ablation itself decides them (seeds, and the ablation's own lists).
ABLATION_FIELDS = ("arms", "seeds", "claims", "cold_start_arm")
COLD_START_ARM = "cold_start"  # the arm `cold_start_arm` adds
# No RL: the arm's evaluation is the shared cold start's (a two-stage schedule would still train its first stage)
COLD_START_OVERRIDES = {"rl_steps": 0, "two_stage": False}
ARM_FORBIDDEN = ("seed", *ABLATION_FIELDS)
_ARM_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")  # the arm's folder name


@dataclass(frozen=True)
class Arm:
    """One arm: its `name` (also its folder name) and the RunConfig values it changes."""

    name: str
    overrides: dict[str, Any] = field(default_factory=dict)


def arm_name_problem(arm: Arm) -> str | None:
    """What is wrong with `arm` before its overrides are checked: a name that cannot be a folder name, or a setting
    no arm may change; None when neither."""
    if not _ARM_NAME.match(arm.name):
        return (f"arm {arm.name!r}: a name is a folder name: letters, digits, '.', '_' or '-', starting with a "
                "letter or digit")
    forbidden = [k for k in arm.overrides if k in ARM_FORBIDDEN]
    if forbidden:
        return f"arm {arm.name!r} may not set {', '.join(forbidden)} (the ablation runs every arm with every seed)"
    return None


def ablation_base(values: Mapping[str, Any]) -> dict[str, Any]:
    """An ablation's parameter values without its own lists (an arm's config describes one run, not the ablation)."""
    return {**values, "arms": {}, "seeds": [], "claims": {}, "cold_start_arm": False}


def cold_start_sources(values: Mapping[str, Any]) -> dict[str, str]:
    """{arm: the arm whose cold start it starts from} for an ablation's parameter `values` (arms, cold_start_arm and
    the base `cold_start_from`); an arm that keeps its own maps to itself. Raises ConfigError for a name that is no
    arm, or for a chain (an arm pointing at one that points at a third)."""
    sources = arm_sources(values)
    problems = source_problems(sources)
    if problems:
        raise ConfigError("invalid ablation arms:\n  " + "\n  ".join(problems))
    return sources


def cold_start_source_problems(values: Mapping[str, Any]) -> list[str]:
    """What is wrong with the arms' `cold_start_from`, one message a problem (see `cold_start_sources`)."""
    return source_problems(arm_sources(values))


def source_problems(sources: Mapping[str, str]) -> list[str]:
    """What is wrong with `sources` ({arm: the arm whose cold start it starts from}), one message a problem."""
    problems = []
    for arm, source in sources.items():
        if source not in sources:
            problems.append(f"arm {arm!r}: cold_start_from names no arm: {source!r} (arms: {', '.join(sources)})")
        elif sources[source] != source:
            problems.append(f"arm {arm!r}: cold_start_from {source!r} starts from {sources[source]!r} in turn; name "
                            f"{sources[source]!r} directly")
    return problems


def arm_sources(values: Mapping[str, Any]) -> dict[str, str]:
    """{arm: the arm whose cold start it starts from, as named} for an ablation's parameter `values`, unchecked."""
    arms = {str(name): dict(overrides or {}) for name, overrides in values["arms"].items()}
    if values["cold_start_arm"] and COLD_START_ARM not in arms:
        arms[COLD_START_ARM] = {}
    default = values.get("cold_start_from", "")
    return {name: (overrides.get("cold_start_from", default) or name) for name, overrides in arms.items()}


# Per-question record columns a claim can be about (searchrl.evaluation.evaluate.score_trajectory).
CLAIM_METRICS = ("em", "f1", "cem", "searches", "model_tokens", "total_tokens", "format_ok", "answered",
                 "support_recall")
CLAIM_KEYS = {"better", "worse", "metric", "source"}  # what a claim in the `claims` parameter may say


@dataclass(frozen=True)
class Claim:
    """A paper's claim that arm `better` scores higher than arm `worse` on `metric` (a per-question record column:
    em, f1, cem, searches, model_tokens, ...); `text` says it in words, `paper` where it is made."""

    text: str
    better: str
    worse: str
    metric: str = "f1"
    paper: str = ""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def parse_claims(claims: Mapping[str, Mapping[str, Any]] | Iterable[Claim], arms: Sequence[str]) -> list[Claim]:
    """Claims as :class:`Claim` objects, from a list of them or the `claims` parameter ({label: {better, worse,
    metric, source}}); each must name two different arms among `arms` and a known metric."""
    if isinstance(claims, Mapping):
        parsed = []
        for label, spec in claims.items():
            if not isinstance(spec, Mapping) or not {"better", "worse"} <= set(spec) or set(spec) - CLAIM_KEYS:
                raise ConfigError(f"claim {label!r} must be a mapping with better, worse and optionally metric and "
                                  f"source; got {spec!r}")
            parsed.append(Claim(text=str(label), better=str(spec["better"]), worse=str(spec["worse"]),
                                metric=str(spec.get("metric", "f1")), paper=str(spec.get("source", ""))))
    else:
        parsed = list(claims)
    problems = []
    for claim in parsed:
        if not isinstance(claim, Claim):
            problems.append(f"expected a Claim, got {claim!r}")
            continue
        for side in (claim.better, claim.worse):
            if side not in arms:
                problems.append(f"claim {claim.text!r} names arm {side!r}, which is not among the arms "
                                f"({', '.join(arms)})")
        if claim.better == claim.worse:
            problems.append(f"claim {claim.text!r} compares arm {claim.better!r} with itself")
        if claim.metric.lower() not in CLAIM_METRICS:
            near = difflib.get_close_matches(claim.metric.lower(), CLAIM_METRICS, n=1, cutoff=0.5)
            hint = f" (did you mean {near[0]!r}?)" if near else ""
            problems.append(f"claim {claim.text!r}: metric {claim.metric!r} is not one of "
                            f"{', '.join(CLAIM_METRICS)}{hint}")
    if problems:
        raise ConfigError("invalid claims:\n  " + "\n  ".join(problems))
    return parsed
