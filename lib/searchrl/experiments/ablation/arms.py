"""Arms of an ablation: a name and a set of RunConfig overrides, checked before anything runs.

An arm's config is the ablation's config with the arm's overrides and one seed applied. Arms that differ only in
what RL or evaluation does share one cold start per seed; :func:`cold_start_key` tells which settings a cold start
depends on, so an arm that changes one of those (the model, the protocol, the data) gets a cold start of its own.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from searchrl.config import COMPUTE_ONLY_SETTINGS, FIELD_SECTIONS, ConfigError, RunConfig

# Settings an arm may not change: the ablation itself decides them (seeds, and the ablation's own lists).
ABLATION_FIELDS = ("arms", "seeds", "claims", "cold_start_arm")
COLD_START_ARM = "cold_start"  # the arm `cold_start_arm` adds
# No RL: the arm's evaluation is the shared cold start's (a two-stage schedule would still train its first stage)
_COLD_START_OVERRIDES = {"rl_steps": 0, "two_stage": False}
_ARM_FORBIDDEN = ("seed", *ABLATION_FIELDS)
_ARM_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")  # the arm's folder name

# Settings the cold start does not read. Every other setting (including any added later) keys the shared cold start,
# so an unknown setting costs an extra cold start instead of silently sharing a wrong one.
# The cold start trains on templated trajectories of the run's data: the RL-side data selection, the health checks
# of RL training and the memorization loss (R1-Searcher++'s, added to RL's loss only) do not change it.
_NOT_COLD_START_SECTIONS = ("RL", "eval", "benchmarks", "ablation", "data difficulty", "training health",
                            "memorization")
_NOT_COLD_START_FIELDS = (
    # where the run is recorded, and how it computes
    "run_name", "output_root", "evidence_copy_dir", "resume", "report_to", *COMPUTE_ONLY_SETTINGS,
    # generation engine and sampling: the cold start trains on templated trajectories, it samples nothing
    "use_vllm", "vllm_gpu_memory_utilization", "vllm_mode", "vllm_server_url", "temperature", "top_p",
    # retriever service retries, waits and outages, and the untrained evaluation's subset
    "retriever_timeout_s", "retriever_retries", "retriever_backoff_s", "retriever_outage_s", "service_wait_s",
    "n_eval_untrained",
)  # fmt: skip


@dataclass(frozen=True)
class Arm:
    """One arm: its `name` (also its folder name) and the RunConfig values it changes."""

    name: str
    overrides: dict[str, Any] = field(default_factory=dict)


def parse_arms(cfg: RunConfig, arms: Mapping[str, Mapping[str, Any]] | Iterable[Arm]) -> list[Arm]:
    """The arms, each checked against RunConfig on top of `cfg`.

    Raises ConfigError naming the arm for an unknown key (with the nearest valid one), a value of the wrong type or
    range, a setting an arm may not change (seed, seeds, arms, claims), or a name that cannot be a folder name.
    """
    if isinstance(arms, Mapping):
        parsed = []
        for name, values in arms.items():
            if not isinstance(values, Mapping | None):
                raise ConfigError(f"arm {name!r} must map parameter names to values, got {values!r} "
                                  f"({type(values).__name__})")
            parsed.append(Arm(str(name), dict(values or {})))
    else:
        parsed = list(arms)
        if not all(isinstance(a, Arm) for a in parsed):
            raise ConfigError("arms must be a mapping {arm name: {parameter: value}} or a list of Arm objects")
    if not parsed:
        raise ConfigError("an ablation needs at least one arm; set `arms`, e.g. {em: {rewards: [em]}, f1: "
                          "{rewards: [f1]}}")
    names = [a.name for a in parsed]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise ConfigError(f"arm names must be unique; repeated: {', '.join(duplicates)}")
    base = _base_values(cfg)
    problems = [problem for arm in parsed for problem in arm_problems(base, arm.name, arm.overrides)]
    if problems:
        raise ConfigError("invalid ablation arms:\n  " + "\n  ".join(problems))
    return parsed


def arm_problems(base: Mapping[str, Any], name: str, overrides: Mapping[str, Any]) -> list[str]:
    """What is wrong with arm `name` (its folder name, a setting no arm may change, or its overrides on top of `base`,
    an ablation's values without its own lists: `ablation_base`), one message a problem, each naming the arm.
    RunConfig's own validation calls this too, so a params file with a bad arm fails before anything runs."""
    arm = Arm(name, dict(overrides))
    if not _ARM_NAME.match(arm.name):
        return [(f"arm {arm.name!r}: a name is a folder name: letters, digits, '.', '_' or '-', starting with a "
                 "letter or digit")]
    forbidden = [k for k in arm.overrides if k in _ARM_FORBIDDEN]
    if forbidden:
        return [f"arm {arm.name!r} may not set {', '.join(forbidden)} (the ablation runs every arm with every seed)"]
    try:
        RunConfig.merge(("ablation config", base), (f"arm {arm.name!r}", arm.overrides))
    except ConfigError as error:
        # merge's message lists one problem a line under a header, then a hint line "(list them with ...)"
        lines = [line.strip() for line in str(error).splitlines()[1:] if line.startswith("  ")]
        return [line if arm.name in line else f"arm {arm.name!r}: {line}" for line in lines] or [str(error)]
    return []


def ablation_base(values: Mapping[str, Any]) -> dict[str, Any]:
    """An ablation's parameter values without its own lists (an arm's config describes one run, not the ablation)."""
    return {**values, "arms": {}, "seeds": [], "claims": {}, "cold_start_arm": False}


def arm_names(values: Mapping[str, Any]) -> list[str]:
    """The names of the arms of an ablation's parameter `values`: `arms`' own, then those `cold_start_arm` adds."""
    named = [Arm(str(name), dict(overrides or {})) for name, overrides in values["arms"].items()]
    return [arm.name for arm in (with_cold_start_arm(named, values) if values["cold_start_arm"] else named)]


def cold_start_sources(values: Mapping[str, Any]) -> dict[str, str]:
    """{arm: the arm whose cold start it starts from} for an ablation's parameter `values` (arms, cold_start_arm and
    the base `cold_start_from`); an arm that keeps its own maps to itself. Raises ConfigError for a name that is no
    arm, or for a chain (an arm pointing at one that points at a third)."""
    sources = _sources(values)
    problems = _source_problems(sources)
    if problems:
        raise ConfigError("invalid ablation arms:\n  " + "\n  ".join(problems))
    return sources


def cold_start_source_problems(values: Mapping[str, Any]) -> list[str]:
    """What is wrong with the arms' `cold_start_from`, one message a problem (see `cold_start_sources`)."""
    return _source_problems(_sources(values))


def _source_problems(sources: Mapping[str, str]) -> list[str]:
    problems = []
    for arm, source in sources.items():
        if source not in sources:
            problems.append(f"arm {arm!r}: cold_start_from names no arm: {source!r} (arms: {', '.join(sources)})")
        elif sources[source] != source:
            problems.append(f"arm {arm!r}: cold_start_from {source!r} starts from {sources[source]!r} in turn; name "
                            f"{sources[source]!r} directly")
    return problems


def _sources(values: Mapping[str, Any]) -> dict[str, str]:
    arms = {str(name): dict(overrides or {}) for name, overrides in values["arms"].items()}
    if values["cold_start_arm"] and COLD_START_ARM not in arms:
        arms[COLD_START_ARM] = {}
    default = values.get("cold_start_from", "")
    return {name: (overrides.get("cold_start_from", default) or name) for name, overrides in arms.items()}


def with_cold_start_arm(arms: list[Arm], values: Mapping[str, Any]) -> list[Arm]:
    """`arms` and the arms that evaluate cold starts without RL (`values`: the ablation's parameters):

    - `cold_start` (unless an arm is named so): the cold start of the arms that change nothing it reads;
    - `cold_start.<arm>` for every other cold start an arm starts from, evaluated with the settings of `<arm>`, the
      first arm whose own it is (ablate_topk's top_k and max_searches arms each have one).

    So the table shows what RL changed in every arm, not only in those sharing the first cold start.
    """
    everyone = list(arms)
    if not any(arm.name == COLD_START_ARM for arm in arms):
        everyone.append(Arm(COLD_START_ARM, dict(_COLD_START_OVERRIDES)))
    by_name = {arm.name: arm for arm in everyone}
    plan = {"arms": {a.name: a.overrides for a in everyone}, "cold_start_arm": False,
            "cold_start_from": values.get("cold_start_from", "")}
    sources, base = _sources(plan), ablation_base(values)
    if _source_problems(sources):
        return everyone  # reported by the checks of `cold_start_from`
    try:
        keys = {name: cold_start_key(RunConfig.merge(("ablation config", base), (f"arm {name!r}", arm.overrides)))
                for name, arm in by_name.items()}
    except ConfigError:
        return everyone  # an invalid arm: reported by `arm_problems`
    seen = {keys[sources[COLD_START_ARM]]}
    for arm in arms:
        source = sources[arm.name]
        if keys[source] in seen:
            continue
        seen.add(keys[source])
        own = {k: v for k, v in by_name[source].overrides.items() if k != "cold_start_from"}
        everyone.append(Arm(f"{COLD_START_ARM}.{source}", {**own, "cold_start_from": "", **_COLD_START_OVERRIDES}))
    return everyone


def _base_values(cfg: RunConfig) -> dict[str, Any]:
    return ablation_base(cfg.to_dict())


def arm_config(cfg: RunConfig, arm: Arm, seed: int) -> RunConfig:
    """The config of one arm and seed: `cfg` with the arm's overrides and `seed`, resuming whatever the arm's folder
    holds (a fresh folder holds nothing, so resuming there starts from scratch)."""
    return RunConfig.merge(("ablation config", _base_values(cfg)), (f"arm {arm.name!r}", arm.overrides),
                           ("ablation", {"seed": int(seed), "resume": True}))


def parse_seeds(seeds: Sequence[int]) -> list[int]:
    """The seeds as a list of distinct non-negative ints, in the given order."""
    out = []
    for seed in seeds:
        if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
            raise ConfigError(f"seeds must be non-negative integers, got {seed!r} in {list(seeds)}")
        if seed in out:
            raise ConfigError(f"seed {seed} is listed twice in seeds {list(seeds)}")
        out.append(seed)
    if not out:
        raise ConfigError("an ablation needs at least one seed")
    return out


def cold_start_settings(cfg: RunConfig) -> dict[str, Any]:
    """The settings a cold start depends on (everything but RL, evaluation, benchmarks and bookkeeping)."""
    return {name: value for name, value in cfg.to_dict().items()
            if FIELD_SECTIONS.get(name) not in _NOT_COLD_START_SECTIONS and name not in _NOT_COLD_START_FIELDS}


def cold_start_key(cfg: RunConfig) -> str:
    """A short name for `cfg`'s cold start: equal for configs whose cold starts are the same."""
    text = json.dumps(cold_start_settings(cfg), sort_keys=True, default=str)
    return hashlib.sha1(text.encode("utf-8")).hexdigest()[:8]


def model_on_this_machine(name: str) -> bool:
    """Whether policy `name` loads here without downloading: a bundled model whose package is installed, a tiny test
    policy, a local folder, or a hub id already in the Hugging Face cache (or, with network, on the hub)."""
    from searchrl.models import BUNDLED, TINY_POLICIES, bundled_model_available

    if name in BUNDLED:
        return bundled_model_available(name)
    if name in TINY_POLICIES or Path(name).expanduser().is_dir():
        return True
    try:
        from huggingface_hub import model_info, try_to_load_from_cache

        if isinstance(try_to_load_from_cache(name, "config.json"), str):
            return True
        model_info(name, timeout=5)  # reachable hub: the run may download it
        return True
    except Exception:  # noqa: BLE001 - offline, unknown id or hub error: all mean "not loadable here"
        return False


def require_models(cfg: RunConfig) -> None:
    """Stop before any work when an arm's model cannot be loaded on this machine, naming the arm, the model and what
    to do (a notebook whose comparison needs models no CPU profile can bundle, e.g. a base/instruct pair)."""
    arms = parse_arms(cfg, cfg.arms) or [Arm("(all)", {})]
    missing = [(arm.name, model) for arm in arms
               for model in [arm.overrides.get("model", cfg.model)] if not model_on_this_machine(model)]
    if missing:
        listed = "; ".join(f"arm {arm!r} needs {model!r}" for arm, model in missing)
        raise RuntimeError(
            f"{listed}, which is not on this machine (not bundled, not a local folder, not in the Hugging Face cache, "
            "and the hub is unreachable). Download it where you have the internet (huggingface-cli download <id>) "
            "and point the arm's model at the folder, or run the gpu profile on a machine that reaches the hub.")


__all__ = ["COLD_START_ARM", "Arm", "ablation_base", "arm_config", "arm_names", "arm_problems", "cold_start_key",
           "cold_start_settings", "model_on_this_machine", "parse_arms", "parse_seeds", "require_models",
           "with_cold_start_arm"]
