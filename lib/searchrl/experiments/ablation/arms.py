"""Arms of an ablation: a name and a set of RunConfig overrides, checked before anything runs.

An arm's config is the ablation's config with the arm's overrides and one seed applied. Arms that differ only in
what RL or evaluation does share one cold start per seed; :func:`cold_start_key` tells which settings a cold start
depends on, so an arm that changes one of those (the model, the protocol, the data) gets a cold start of its own.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from searchrl.config import (
    ConfigError,
    RunConfig,
    arm_names,
    arm_problems,
    cold_start_key,
    cold_start_settings,
    with_cold_start_arm,
)
from searchrl.config.ablation import COLD_START_ARM, Arm, ablation_base, cold_start_sources
from searchrl.config.models import BUNDLED, TINY_POLICIES

# The checks of an ablation's keys are the schema's own (searchrl.config.ablation and searchrl.config), so that a
# params file with a bad arm fails before anything runs; this module builds and checks arms for running them.


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


def model_on_this_machine(name: str) -> bool:
    """Whether policy `name` loads here without downloading: a bundled model whose package is installed, a tiny test
    policy, a local folder, or a hub id already in the Hugging Face cache (or, with network, on the hub)."""
    from searchrl.models import bundled_model_available

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
           "cold_start_settings", "cold_start_sources", "model_on_this_machine", "parse_arms", "parse_seeds",
           "require_models", "with_cold_start_arm"]
