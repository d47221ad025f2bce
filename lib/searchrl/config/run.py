"""`RunConfig`: every field of a run (`searchrl.config.schema.RunFields`) with the building, checking and reading
of a parameter set, and the checks and helpers that build configs themselves (an ablation's arms, cold-start keys,
what a resume changes)."""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from searchrl.config.ablation import (
    COLD_START_ARM,
    COLD_START_OVERRIDES,
    Arm,
    ablation_base,
    arm_name_problem,
    arm_sources,
    cold_start_source_problems,
    parse_claims,
    source_problems,
)
from searchrl.config.checks import semantic_problems
from searchrl.config.errors import ConfigError
from searchrl.config.evaluation import eval_decoding
from searchrl.config.loading import (
    RESERVED_YAML_KEYS,
    coerce,
    copy_value,
    load_params_file,
    show,
    type_name,
    unknown_key_problem,
)
from searchrl.config.names import ADVANTAGE_ESTIMATORS, PROTOCOLS, RETRIEVERS, Choices
from searchrl.config.notebooks import notebook_key_problem, notebook_keys
from searchrl.config.rewards import REWARD_PRESETS, REWARDS
from searchrl.config.rollout import RolloutConfig
from searchrl.config.schema import FIELD_DOCS, FIELD_SECTIONS, FIELD_TYPES, SECTION_ORDER, RunFields

__all__ = ["BOOKKEEPING_SETTINGS", "COMPUTE_ONLY_SETTINGS", "RunConfig", "arm_names", "arm_problems",
           "cold_start_key", "cold_start_settings", "measured_changes", "with_cold_start_arm"]

# Settings that say where a run is recorded and on which machine it runs, not what it computes or measures.
BOOKKEEPING_SETTINGS = ("resume", "output_root", "run_name", "report_to", "device", "keep_resume_state",
                        "evidence_copy_dir")

# Settings that change how a run computes (threads; how a step, a generation batch or an evaluation is cut; what the
# backward pass recomputes) and not what it measures. A resumed run or ablation arm may change them: after a kernel
# was killed for memory, a smaller micro_batch_size is how it continues.
COMPUTE_ONLY_SETTINGS = ("torch_threads", "micro_batch_size", "activation_checkpointing", "max_concurrent_rollouts",
                         "eval_batch_size")


def measured_changes(was: Mapping[str, Any], now: RunConfig) -> dict[str, tuple[Any, Any]]:
    """{name: (was, now)} for each setting whose value in `now` differs from `was` (a run's saved parameters), with
    bookkeeping and compute-only settings left out: what a resume changes about what the run measures. A setting
    added to the schema since `was` was saved counts at its default there (at its default it changes nothing); one
    `was` holds that the schema no longer has counts as changed to None."""
    defaults, current = RunConfig.defaults(), now.to_dict()
    skip = (*BOOKKEEPING_SETTINGS, *COMPUTE_ONLY_SETTINGS)
    names = [*current, *(k for k in was if k not in current)]
    return {k: (was.get(k, defaults.get(k)), current.get(k)) for k in names
            if k not in skip and current.get(k) != was.get(k, defaults.get(k))}



_DESCRIBE_HINT = "list them with: python -m searchrl.config"
# What IPython puts in a notebook's globals besides the user's own names.
_IPYTHON_GLOBALS = frozenset({"In", "Out", "exit", "quit", "get_ipython"})


@dataclass(frozen=True)
class RunConfig(RunFields):
    """All parameters of one run, flat and typed. Build it with :meth:`from_params` or :meth:`from_globals`.

    The rollout settings (max_searches, top_k, max_turn_tokens, max_completion_tokens, temperature, top_p, the
    retriever's timeouts and retries, forced and explored openers, ...) are declared once, in
    :class:`searchrl.rollout.RolloutConfig`, and inherited here so that params files set them flat;
    :meth:`rollout_config` hands them on as that object.
    """

    def __post_init__(self) -> None:
        # Direct construction validates too, so no RunConfig can exist with a wrong type or range.
        values = {name: getattr(self, name) for name in FIELD_TYPES}
        problems: list[str] = []
        normalized = {}
        for name, value in values.items():
            ok, value_or_msg = coerce(name, value)
            if ok:
                normalized[name] = value_or_msg
            else:
                problems.append(value_or_msg)
        if not problems:
            problems = [msg for _, msg in semantic_problems(normalized, _ablation_problems)]
        if problems:
            raise ConfigError("invalid RunConfig:\n  " + "\n  ".join(problems))
        for name, value in normalized.items():
            object.__setattr__(self, name, value)

    # ---------------------------------------------------------------------------------------------- building

    @classmethod
    def from_params(
        cls, params: Mapping[str, Any] | None = None, *yaml_paths: str | Path, **overrides: Any
    ) -> RunConfig:
        """Build a config from defaults < ``yaml_paths`` (in order) < ``params`` < ``overrides``.

        Raises :class:`ConfigError` listing every unknown key (with the nearest valid one), wrongly typed value and
        out-of-range value, each with the place it came from.
        """
        sources: list[tuple[str, Mapping[str, Any]]] = []
        for path in yaml_paths:
            values, _ = load_params_file(path)
            sources.append((str(path), values))
        if params:
            sources.append(("params", params))
        if overrides:
            sources.append(("overrides", overrides))
        return cls.merge(*sources)

    @classmethod
    def merge(cls, *sources: tuple[str, Mapping[str, Any]], notebook: str | None = None) -> RunConfig:
        """Build a config from ``(label, values)`` pairs, later ones winning; labels name the source in errors.

        With `notebook` (its name, e.g. ``quickstart``), a key that only other notebooks read (the eval suite's, the
        ablations', the report's: :mod:`searchrl.config.notebooks`) is refused too."""
        merged: dict[str, Any] = {}
        origin: dict[str, str] = {}
        problems: list[str] = []
        names = notebook_keys(notebook) if notebook is not None else FIELD_TYPES  # what a typo may have meant
        for label, values in sources:
            if not isinstance(values, Mapping):
                problems.append(f"{label}: expected a mapping of parameter names to values, got {show(values)}")
                continue
            for key, value in values.items():
                problem = unknown_key_problem(key, label, names) or notebook_key_problem(key, label, notebook)
                if problem:
                    problems.append(problem)
                    continue
                ok, value_or_msg = coerce(key, value)
                if not ok:
                    problems.append(f"{label}: {value_or_msg}")
                    continue
                merged[key] = value_or_msg
                origin[key] = label
        if not problems:
            full = {**cls.defaults(), **merged}
            problems = [f"{origin.get(name, 'default')}: {msg}" for name, msg in semantic_problems(full, _ablation_problems)]
        if problems:
            raise ConfigError("invalid parameters:\n  " + "\n  ".join(problems) + f"\n({_DESCRIBE_HINT})")
        return cls(**merged)

    @classmethod
    def from_globals(cls, namespace: Mapping[str, Any], *, notebook: str | None = None, **overrides: Any) -> RunConfig:
        """Build a config from a notebook's globals: ``RunConfig.from_globals(globals())``.

        Call it in the cell right after the ``parameters`` cell. At that point the only globals holding plain data
        (number, string, bool, list, dict) are the parameters cell's values and whatever papermill injected, so
        every such global must be a parameter: an unknown name (``lerning_rate``, papermill's ``-p lr 1e-4``)
        raises :class:`ConfigError` with the nearest valid name instead of being silently ignored. Modules,
        functions, classes, other objects, ``_private`` and ALL_CAPS names and IPython's own globals are left
        alone. Values given as text (papermill passes ``-p rewards "[em]"`` as a string) are read as YAML.
        With `notebook` (its name), a key only other notebooks read is refused, as :meth:`merge` does.
        """
        params = {name: namespace[name] for name in FIELD_TYPES if name in namespace}
        problems = []
        for name, value in namespace.items():
            if (name in FIELD_TYPES or name.startswith("_") or name.isupper() or name in _IPYTHON_GLOBALS
                    or name in RESERVED_YAML_KEYS):  # `notebook:` of a params file, passed on by papermill -f
                continue
            if not isinstance(value, (bool, int, float, str, list, tuple, dict)):
                continue
            problems.append(f"{unknown_key_problem(name, 'notebook globals')} (a plain value defined before the "
                            "config is built must be a parameter)")
        if problems:
            raise ConfigError("invalid parameters:\n  " + "\n  ".join(problems) + f"\n({_DESCRIBE_HINT})")
        sources = [("notebook parameters", params)]
        if overrides:
            sources.append(("overrides", overrides))
        return cls.merge(*sources, notebook=notebook)

    def rollout_config(self) -> RolloutConfig:
        """The rollout settings of this run, as the object training, evaluation and rejection sampling take."""
        return RolloutConfig(**{f.name: getattr(self, f.name) for f in dataclasses.fields(RolloutConfig)})

    def eval_rollout_config(self) -> RolloutConfig:
        """The rollout settings every evaluation of this run uses: the run's, with the documents per search and the
        decoding of `eval_decoding` (eval_top_k, eval_temperature; temperature 0 is greedy)."""
        decoding = eval_decoding(self)
        return dataclasses.replace(self.rollout_config(), top_k=decoding["top_k"],
                                   temperature=decoding["temperature"], top_p=decoding["top_p"])

    def replace(self, **changes: Any) -> RunConfig:
        """A copy with ``changes`` applied and validated (the config itself is immutable)."""
        return type(self).merge(("current config", self.to_dict()), ("replace", changes))

    # ---------------------------------------------------------------------------------------------- reading

    @classmethod
    def field_names(cls) -> tuple[str, ...]:
        """Names of all parameters, in schema order."""
        return tuple(FIELD_TYPES)

    @classmethod
    def field_type(cls, name: str) -> type | Any:
        """The declared type of parameter ``name`` (e.g. ``int``, ``list[str]``)."""
        if name not in FIELD_TYPES:
            raise ConfigError(unknown_key_problem(name, "field_type"))
        return FIELD_TYPES[name]

    @classmethod
    def defaults(cls) -> dict[str, Any]:
        """Default value of every parameter (fresh lists, safe to modify)."""
        out = {}
        for f in dataclasses.fields(cls):
            out[f.name] = f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default
        return out

    def to_dict(self) -> dict[str, Any]:
        """All parameters as a plain dict (lists copied), in schema order."""
        return {name: copy_value(getattr(self, name)) for name in FIELD_TYPES}

    def changed(self) -> dict[str, Any]:
        """Only the parameters that differ from their defaults."""
        defaults = self.defaults()
        return {k: v for k, v in self.to_dict().items() if v != defaults[k]}

    def to_yaml(self, path: str | Path | None = None, header: str = "") -> str:
        """The parameters as YAML (schema order), written to ``path`` when given; ``header`` becomes comments."""
        lines = [f"# {line}".rstrip() for line in header.splitlines()]
        body = yaml.safe_dump(self.to_dict(), sort_keys=False, default_flow_style=None, width=120)
        text = "\n".join(lines) + ("\n" if lines else "") + body
        if path is not None:
            Path(path).write_text(text, encoding="utf-8")
        return text

    @classmethod
    def describe(cls) -> str:
        """A table of every parameter (section, name, type, default, documentation), then every registry's names.

        The registries are read where they live (``searchrl.core.registry``), with their entries' descriptions, so
        the entry points (``python -m searchrl.config``, ``searchrl params``) import them first; one not imported
        lists its built-in names only."""
        defaults = cls.defaults()
        rows = [("name", "type", "default", "doc")]
        order = {section: i for i, section in enumerate(SECTION_ORDER)}
        names = sorted(FIELD_TYPES, key=lambda n: order.get(FIELD_SECTIONS.get(n, ""), len(order)))
        for name in names:
            rows.append((name, type_name(FIELD_TYPES[name]), repr(defaults[name]), FIELD_DOCS.get(name, "")))
        widths = [max(len(r[i]) for r in rows) for i in range(3)]

        def fmt(row: tuple[str, ...]) -> str:
            return "  ".join(cell.ljust(widths[i]) for i, cell in enumerate(row[:3])) + "  " + row[3]

        out = [fmt(rows[0])]
        section = None
        for row in rows[1:]:
            if FIELD_SECTIONS.get(row[0]) != section:
                section = FIELD_SECTIONS.get(row[0])
                out.append(f"-- {section} --")
            out.append(fmt(row))
        for title, registry in (("protocol", PROTOCOLS), ("retriever", RETRIEVERS), ("rewards", REWARDS),
                                ("rewards: presets (write preset:<name>)", REWARD_PRESETS),
                                ("advantage_estimator", ADVANTAGE_ESTIMATORS)):
            out += ["", f"== {title} ==", _registry_description(registry)]
        return "\n".join(out)


def _registry_description(choices: Choices) -> str:
    """The live registry's own listing (names and descriptions), else the built-in names one a line."""
    live = choices.live
    return live.describe() if live is not None else "\n".join(f"  {name}" for name in choices.names())



# --------------------------------------------------------------------------------------------------------------
# Ablations: an arm's config is the ablation's with the arm's overrides; the checks that need RunConfig itself.
# --------------------------------------------------------------------------------------------------------------


def _ablation_problems(values: Mapping[str, Any]) -> list[tuple[str, str]]:
    """Each arm's overrides must make a valid config on their own (typos fail naming the arm); claims must name
    arms that exist. The ablation package (searchrl.experiments.ablation) runs ablations with these same checks."""
    if not values["arms"] and not values["claims"]:
        return []
    problems = []
    base = ablation_base(values)
    for arm, overrides in values["arms"].items():
        if not isinstance(overrides, Mapping):
            problems.append(("arms", f"arms: arm {arm!r} must map parameter names to values, got {show(overrides)}"))
            continue
        problems += [("arms", f"arms: {problem}") for problem in arm_problems(base, str(arm), overrides)]
    if not problems:
        problems += [("arms", f"arms: {problem}") for problem in cold_start_source_problems(values)]
    if values["claims"]:
        try:
            parse_claims(values["claims"], arm_names(values))
        except ConfigError as error:
            lines = [line.strip() for line in str(error).splitlines()]
            problems += [("claims", f"claims: {line}") for line in (lines[1:] if len(lines) > 1 else lines)]
    return problems



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


def arm_problems(base: Mapping[str, Any], name: str, overrides: Mapping[str, Any]) -> list[str]:
    """What is wrong with arm `name` (its folder name, a setting no arm may change, or its overrides on top of `base`,
    an ablation's values without its own lists: `ablation_base`), one message a problem, each naming the arm.
    RunConfig's own validation calls this too, so a params file with a bad arm fails before anything runs."""
    arm = Arm(name, dict(overrides))
    problem = arm_name_problem(arm)
    if problem:
        return [problem]
    try:
        RunConfig.merge(("ablation config", base), (f"arm {arm.name!r}", arm.overrides))
    except ConfigError as error:
        # merge's message lists one problem a line under a header, then a hint line "(list them with ...)"
        lines = [line.strip() for line in str(error).splitlines()[1:] if line.startswith("  ")]
        return [line if arm.name in line else f"arm {arm.name!r}: {line}" for line in lines] or [str(error)]
    return []


def arm_names(values: Mapping[str, Any]) -> list[str]:
    """The names of the arms of an ablation's parameter `values`: `arms`' own, then those `cold_start_arm` adds."""
    named = [Arm(str(name), dict(overrides or {})) for name, overrides in values["arms"].items()]
    return [arm.name for arm in (with_cold_start_arm(named, values) if values["cold_start_arm"] else named)]


def with_cold_start_arm(arms: list[Arm], values: Mapping[str, Any]) -> list[Arm]:
    """`arms` and the arms that evaluate cold starts without RL (`values`: the ablation's parameters):

    - `cold_start` (unless an arm is named so): the cold start of the arms that change nothing it reads;
    - `cold_start.<arm>` for every other cold start an arm starts from, evaluated with the settings of `<arm>`, the
      first arm whose own it is (ablate_topk's top_k and max_searches arms each have one).

    So the table shows what RL changed in every arm, not only in those sharing the first cold start.
    """
    everyone = list(arms)
    if not any(arm.name == COLD_START_ARM for arm in arms):
        everyone.append(Arm(COLD_START_ARM, dict(COLD_START_OVERRIDES)))
    by_name = {arm.name: arm for arm in everyone}
    plan = {"arms": {a.name: a.overrides for a in everyone}, "cold_start_arm": False,
            "cold_start_from": values.get("cold_start_from", "")}
    sources, base = arm_sources(plan), ablation_base(values)
    if source_problems(sources):
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
        everyone.append(Arm(f"{COLD_START_ARM}.{source}", {**own, "cold_start_from": "", **COLD_START_OVERRIDES}))
    return everyone


def cold_start_settings(cfg: RunConfig) -> dict[str, Any]:
    """The settings a cold start depends on (everything but RL, evaluation, benchmarks and bookkeeping)."""
    return {name: value for name, value in cfg.to_dict().items()
            if FIELD_SECTIONS.get(name) not in _NOT_COLD_START_SECTIONS and name not in _NOT_COLD_START_FIELDS}


def cold_start_key(cfg: RunConfig) -> str:
    """A short name for `cfg`'s cold start: equal for configs whose cold starts are the same."""
    text = json.dumps(cold_start_settings(cfg), sort_keys=True, default=str)
    return hashlib.sha1(text.encode("utf-8")).hexdigest()[:8]

