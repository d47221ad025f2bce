"""The judge setting string: which backend judges, picked by name like every other ablation axis.

    none | off | ""                          no judge
    local                                    the bundled smollm2-135m-instruct
    local:<model name, folder or hub id>     any causal LM `searchrl.models.load_policy` loads
    openai:<model>@<base URL>                an OpenAI-compatible server, e.g. openai:gpt-4o-mini@http://host:8000/v1
    openai:<model>                           the same at $OPENAI_BASE_URL (default https://api.openai.com/v1)

The API key comes from $SEARCHRL_JUDGE_API_KEY, else $OPENAI_API_KEY (servers that need none ignore it).
A new backend registers a factory `(argument: str, **options) -> Judge` in `JUDGE_BACKENDS`.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from searchrl.core.registry import Registry
from searchrl.judge.base import Judge
from searchrl.judge.endpoint import EndpointJudge
from searchrl.judge.local import DEFAULT_LOCAL_JUDGE, LocalJudge

JudgeFactory = Callable[..., Judge]
JUDGE_BACKENDS: Registry[JudgeFactory] = Registry("judge backend", normalize=lambda name: name.strip().lower())
NO_JUDGE = frozenset({"", "none", "off", "false", "no"})
_MODEL_AT_URL = re.compile(r"^(?P<model>.+?)@(?P<url>https?://\S+)$")


def _local(argument: str, **options: Any) -> Judge:
    return LocalJudge.load(argument or DEFAULT_LOCAL_JUDGE, **options)


def parse_endpoint_argument(argument: str) -> tuple[str, str | None]:
    """`model@http://host/v1` -> (model, url); a bare `model` -> (model, None). Model names may hold ':' and '/'."""
    argument = argument.strip()
    found = _MODEL_AT_URL.match(argument)
    model, url = (found["model"], found["url"]) if found else (argument, None)
    if not model or model.startswith(("@", "http://", "https://")):
        raise ValueError(f"judge setting 'openai:{argument}' names no model; write openai:<model>@<base URL>, "
                         "e.g. openai:gpt-4o-mini@http://localhost:8000/v1")
    return model, url


def _endpoint(argument: str, **options: Any) -> Judge:
    model, url = parse_endpoint_argument(argument)
    return EndpointJudge(model, url, **options)


JUDGE_BACKENDS.register("local", _local, doc="a local causal LM, greedy (local:<model name, folder or hub id>)")
JUDGE_BACKENDS.register("openai", _endpoint,
                        doc="an OpenAI-compatible chat-completions server (openai:<model>@<base URL>)")


def split_setting(setting: str) -> tuple[str, str]:
    """`backend:argument` -> (registered backend key, argument); raises UnknownNameError with a suggestion."""
    backend, _, argument = setting.strip().partition(":")
    return JUDGE_BACKENDS.key(backend), argument.strip()


def make_judge(setting: str | Judge | None, **options: Any) -> Judge | None:
    """The judge a setting names (None for none/off/empty); a Judge passes through. `options` go to the backend
    (LocalJudge: batch_size, max_new_tokens, device, dtype; EndpointJudge: timeout, max_retries, backoff,
    concurrency, max_tokens, api_key, ...)."""
    if setting is None or isinstance(setting, Judge):
        return setting
    if not isinstance(setting, str):
        raise TypeError(f"a judge setting is a string like 'local:smollm2-135m-instruct', got {type(setting).__name__}")
    if setting.strip().lower() in NO_JUDGE:
        return None
    backend, argument = split_setting(setting)
    return JUDGE_BACKENDS.get(backend)(argument, **options)


def judge_setting_problem(setting: str | None) -> str | None:
    """What is wrong with a setting, checked without loading a model or contacting a server; None when fine."""
    if setting is None or (isinstance(setting, str) and setting.strip().lower() in NO_JUDGE):
        return None
    if not isinstance(setting, str):
        return f"judge must be a string like 'local:smollm2-135m-instruct', got {type(setting).__name__}"
    try:
        backend, argument = split_setting(setting)
        if backend == "openai":
            parse_endpoint_argument(argument)
    except ValueError as err:  # UnknownNameError is a ValueError
        return f"judge {setting!r}: {err}"
    return None


__all__ = ["JUDGE_BACKENDS", "NO_JUDGE", "judge_setting_problem", "make_judge", "parse_endpoint_argument",
           "split_setting"]
