"""The names a run picks from the registries of higher layers, as plain data, and the checks of those names.

A params file names a protocol, a retriever, an advantage estimator, benchmarks, paper layouts, metrics, baselines
and a judge backend, each an entry of a :class:`~searchrl.core.registry.Registry` built in a higher layer (the
registries of protocols and rewards import torch, those of the evaluation pandas). The schema checks those names
with :class:`Choices`: the live registry of the kind once its module has been imported (so what a notebook cell
registered passes, exactly as the registry itself would say), and otherwise the built-in names listed here, with the
same messages. Import paths (``pkg.mod:obj``, ``file.py:obj``) are imported to check them either way.

Where a registry is built from declarations (its normalising function, its fixed tables), they are declared here and
imported by the registry's module. Where it is built by registering classes or functions (protocols, estimators,
metrics, layouts, benchmarks, baselines, judge backends), the tuple here is the list of those names, and a test
asserts that each tuple equals its registry's names.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable, Collection, Mapping
from typing import Any

from searchrl.config.evidence import tool_argument_problem
from searchrl.config.replay import REPLAY_PREFIX, replay_record
from searchrl.config.service import SEARCH_R1_PREFIX, WEB_SEARCH_PREFIX, search_r1_url, service_url
from searchrl.config.web_search import web_search_url
from searchrl.core.registry import (
    Registry,
    UnknownNameError,
    import_object,
    is_import_path,
    live_registry,
    name_problem,
    resolve_name,
)

__all__ = [
    "ADVANTAGE_ESTIMATORS",
    "BASELINES",
    "BASELINE_ALIASES",
    "BASELINE_NAME_ARGUMENTS",
    "BENCHMARKS",
    "BENCHMARKS_WITHOUT_QUESTIONS",
    "JUDGE_BACKENDS",
    "LAYOUTS",
    "METRICS",
    "NO_JUDGE",
    "PROTOCOLS",
    "RETRIEVERS",
    "SPLITS",
    "Choices",
    "baseline_key",
    "baseline_problem",
    "benchmark_key",
    "check_metric_name",
    "judge_backend_key",
    "judge_setting_problem",
    "layout_key",
    "metric_key",
    "metric_name_key",
    "parse_endpoint_argument",
    "protocol_key",
    "remote_retriever_key",
    "retriever_key",
    "split_baseline_name",
    "split_judge_setting",
    "unknown_metric_message",
]  # fmt: skip


def _strip(name: str) -> str:
    return name.strip()


class Choices:
    """The names of one registry `kind`: the live registry's once its module is imported, else the built-in `names`.

    `normalize` is the registry's own (the spellings people write -> the key); `special`, where the registry answers
    to names beyond its entries (the retrievers' service and web search URLs), gives the key of such a name or None,
    and raises :class:`UnknownNameError` for one that is malformed. `entries` ({name: entry}) lets :meth:`get`
    answer for entries that are plain data (the reward presets' contents).
    """

    def __init__(self, kind: str, names: Collection[str], normalize: Callable[[str], str] = _strip, *,
                 special: Callable[[Any], str | None] | None = None, entries: Mapping[str, Any] | None = None) -> None:
        self.kind = kind
        self.builtin = tuple(names)
        self._normalize = normalize
        self._special = special
        self._entries = entries

    @property
    def live(self) -> Registry | None:
        """The registry of this kind built in this process, or None while its module is not imported."""
        return live_registry(self.kind)

    def names(self) -> list[str]:
        """The known names, sorted."""
        live = self.live
        return live.names() if live is not None else sorted(self.builtin)

    def key(self, name: Any) -> str:
        """The key `name` resolves to, as the registry's ``key`` says (TypeError or UnknownNameError otherwise)."""
        live = self.live
        if live is not None:
            return live.key(name)
        special = self._special(name) if self._special is not None else None
        return special if special is not None else resolve_name(self.kind, name, self.builtin, self._normalize)

    def problem(self, name: Any) -> str | None:
        """What is wrong with `name`, as the registry's ``problem`` says, or None when it resolves."""
        live = self.live
        return live.problem(name) if live is not None else name_problem(self.key, name)

    def get(self, name: Any) -> Any:
        """The entry of `name`: the live registry's, else the plain entry or the object an import path names."""
        live = self.live
        if live is not None:
            return live.get(name)
        key = self.key(name)
        if self._entries is not None and key in self._entries:
            return self._entries[key]
        return import_object(key)

    def __contains__(self, name: object) -> bool:
        live = self.live
        if live is not None:
            return name in live
        return isinstance(name, str) and self._normalize(name) in self.builtin


# ---- protocols ----------------------------------------------------------------------------------------------


def protocol_key(name: str) -> str:
    """Accept the spellings people write: "Search-R1", "r1-searcher++", " R_SEARCH "."""
    return name.strip().lower().replace("++", "_pp").replace("-", "_").replace(" ", "_")


PROTOCOLS = Choices("protocol", ("r1_searcher", "r1_searcher_pp", "r_search", "search_r1", "search_r1_compact"),
                    protocol_key)


# ---- retrievers ---------------------------------------------------------------------------------------------


def retriever_key(name: str) -> str:
    """Retriever kinds are written in any case: "BM25" is bm25."""
    return name.strip().lower()


def remote_retriever_key(name: Any) -> str | None:
    """The key of a retriever name that points at a service (``http://HOST:PORT``), a web search API
    (``web+https://HOST/PATH``), a Search-R1 retriever API (``search_r1+http://HOST:PORT/retrieve``) or a run's
    recorded searches (``replay:<run folder>``), None for any other name; UnknownNameError for one that is malformed
    or for the bare "web", whose API address is part of the name."""
    try:
        url = service_url(name)
        web_url = web_search_url(name)
        search_r1 = search_r1_url(name)
        record = replay_record(name)
    except ValueError as error:
        raise UnknownNameError(str(error)) from None
    if record is not None:
        return REPLAY_PREFIX + str(record)
    if search_r1 is not None:
        return SEARCH_R1_PREFIX + search_r1
    if web_url is not None:
        return WEB_SEARCH_PREFIX + web_url
    if isinstance(name, str) and name.strip().lower() == "web":
        # the obvious guess; the address of the API is part of the name
        raise UnknownNameError("retriever 'web' needs the search API's address: write web+https://HOST/PATH "
                               "(the key comes from $SEARCHRL_SEARCH_API_KEY, see web_key_env)")
    return url


RETRIEVERS = Choices("retriever", ("bm25", "dense"), retriever_key, special=remote_retriever_key)


# ---- advantage estimators ------------------------------------------------------------------------------------

ADVANTAGE_ESTIMATORS = Choices("advantage estimator", ("grpo", "grpo_positive", "ppo", "reinforce_pp", "rloo"))


# ---- the synthetic world's splits -----------------------------------------------------------------------------

SPLITS = ("train", "dev", "test")


# ---- benchmarks and paper layouts ----------------------------------------------------------------------------


def benchmark_key(name: str) -> str:
    """Accept "R1S-2Wiki", " HotpotQA " for r1s_2wiki, hotpotqa."""
    return name.strip().lower().replace("-", "_").replace(" ", "_")


BENCHMARKS = Choices("benchmark", ("bamboogle", "custom", "hotpotqa", "nq", "popqa", "r1s_2wiki", "r1s_bamboogle",
                                   "r1s_hotpotqa", "r1s_musique", "triviaqa"), benchmark_key)
BENCHMARKS_WITHOUT_QUESTIONS = ("custom",)  # built-in benchmarks whose question file is named when they load


def layout_key(name: str) -> str:
    """Accept "Search-R1 Table2" spellings for search_r1_table2."""
    return name.strip().lower().replace("-", "_").replace(" ", "_")


LAYOUTS = Choices("paper table layout", ("r1_searcher_pp_table1", "r1_searcher_table2", "search_r1_table2"),
                  layout_key)


# ---- metrics --------------------------------------------------------------------------------------------------


def metric_key(name: str) -> str:
    # "CEM:R1-Searcher" and "cem:r1_searcher" name the same entry, as protocol names do.
    return name.strip().lower().replace("-", "_")


METRICS = Choices("metric", ("cem", "cem:r1_searcher", "em", "em:r1_searcher", "f1", "f1:r1_searcher",
                             "f1:r_search"), metric_key)


def unknown_metric_message(name: str, known: list[str]) -> str:
    """What a mistyped paper variant ("cem:r1searcher") is told: the nearest of the `known` metrics and all of them."""
    close = difflib.get_close_matches(metric_key(name), known, n=1, cutoff=0.5)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    return f"unknown metric {name!r}{hint}; known: {', '.join(known)}"


def check_metric_name(name: Any, metrics: Any = METRICS) -> None:
    """Raise for a metric name `metrics` (a registry or :data:`METRICS`) cannot answer to before it is looked up:
    TypeError for a name that is no string, UnknownNameError for a mistyped paper variant.

    ``name:paper`` looks like an import path to the registry, so a mistyped variant ("cem:r1searcher") is caught
    here, before it would be imported as module "cem".
    """
    if not isinstance(name, str):
        raise TypeError(f"a metric name must be a string, got {type(name).__name__}")
    if name not in metrics and is_import_path(name.strip()):
        base = metric_key(name).split(":", 1)[0]
        if base in metrics:
            raise UnknownNameError(unknown_metric_message(name, metrics.names()))


def metric_name_key(name: Any) -> str:
    """The metric `name` resolves to (as `searchrl.metrics.scoring.metric` finds it); raises what it raises."""
    check_metric_name(name)
    return METRICS.key(name)


# ---- baselines ------------------------------------------------------------------------------------------------

# The papers' own names for the same rows.
BASELINE_ALIASES = {
    "direct": "naive", "direct_inference": "naive", "naive_generation": "naive", "directly_gen": "naive",
    "llm_w/o_search": "naive", "standard_rag": "rag", "vanilla_rag": "rag", "r1": "rl_no_search",
    "prompted": "prompted_search", "rstool": "evidence_tool", "r_search_as_a_tool": "evidence_tool",
}

# Registered baselines whose name may carry an argument, and the keyword it stands for.
BASELINE_NAME_ARGUMENTS = {"prompted_search": "protocol", "sft": "checkpoint", "rl_no_search": "checkpoint",
                           "evidence_tool": "checkpoint"}


def baseline_key(name: str) -> str:
    """The baselines' spellings: case, '-' and ' ' as '_', and the papers' own names (`BASELINE_ALIASES`)."""
    key = name.strip().lower().replace("-", "_").replace(" ", "_")
    return BASELINE_ALIASES.get(key, key)


BASELINES = Choices("baseline", ("cot", "evidence_tool", "ircot", "naive", "prompted_search", "rag", "rl_no_search",
                                 "sft"), baseline_key)


def split_baseline_name(name: Any) -> tuple[str, str]:
    """(registry key, argument) of a baseline name: "prompted_search:r1_searcher" -> ("prompted_search",
    "r1_searcher"); unknown names raise with the list of known ones."""
    if not isinstance(name, str):
        raise TypeError(f"a baseline name must be a string, got {type(name).__name__}")
    head, sep, arg = name.partition(":")
    if sep and head.strip() and baseline_key(head) in BASELINES:
        key = BASELINES.key(head)
        if key not in BASELINE_NAME_ARGUMENTS:
            raise ValueError(f"baseline {key!r} takes no ':' argument (got {name!r}); only "
                             f"{', '.join(sorted(BASELINE_NAME_ARGUMENTS))} do")
        if not arg.strip():
            raise ValueError(f"{name!r}: name the {BASELINE_NAME_ARGUMENTS[key]} after ':' or drop the ':'")
        return key, arg.strip()
    return BASELINES.key(name), ""


def baseline_problem(name: Any) -> str | None:
    """What is wrong with baseline name `name` (for checking parameters before a run starts), or None. A
    checkpoint named after ':' is checked when the baseline runs (it may not exist yet)."""
    try:
        key, arg = split_baseline_name(name)
        if key == "prompted_search" and arg:
            return PROTOCOLS.problem(arg)
        if key == "evidence_tool" and arg:
            problem = tool_argument_problem(arg)
            return f"{name!r}: {problem}" if problem else None
    except (ValueError, TypeError) as err:  # UnknownNameError is a ValueError
        return str(err)
    except Exception as err:  # noqa: BLE001  (a user's module raised while importing: report it, do not crash)
        return f"{name!r}: importing it failed: {type(err).__name__}: {err}"
    return None


# ---- the judge ------------------------------------------------------------------------------------------------

NO_JUDGE = frozenset({"", "none", "off", "false", "no"})
_MODEL_AT_URL = re.compile(r"^(?P<model>.+?)@(?P<url>https?://\S+)$")


def judge_backend_key(name: str) -> str:
    """Judge backends are written in any case."""
    return name.strip().lower()


JUDGE_BACKENDS = Choices("judge backend", ("local", "openai"), judge_backend_key)


def parse_endpoint_argument(argument: str) -> tuple[str, str | None]:
    """`model@http://host/v1` -> (model, url); a bare `model` -> (model, None). Model names may hold ':' and '/'."""
    argument = argument.strip()
    found = _MODEL_AT_URL.match(argument)
    model, url = (found["model"], found["url"]) if found else (argument, None)
    if not model or model.startswith(("@", "http://", "https://")):
        raise ValueError(f"judge setting 'openai:{argument}' names no model; write openai:<model>@<base URL>, "
                         "e.g. openai:gpt-4o-mini@http://localhost:8000/v1")
    return model, url


def split_judge_setting(setting: str) -> tuple[str, str]:
    """`backend:argument` -> (registered backend key, argument); raises UnknownNameError with a suggestion."""
    backend, _, argument = setting.strip().partition(":")
    return JUDGE_BACKENDS.key(backend), argument.strip()


def judge_setting_problem(setting: str | None) -> str | None:
    """What is wrong with a setting, checked without loading a model or contacting a server; None when fine."""
    if setting is None or (isinstance(setting, str) and setting.strip().lower() in NO_JUDGE):
        return None
    if not isinstance(setting, str):
        return f"judge must be a string like 'local:smollm2-135m-instruct', got {type(setting).__name__}"
    try:
        backend, argument = split_judge_setting(setting)
        if backend == "openai":
            parse_endpoint_argument(argument)
    except ValueError as err:  # UnknownNameError is a ValueError
        return f"judge {setting!r}: {err}"
    return None
