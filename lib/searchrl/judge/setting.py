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

from collections.abc import Callable
from typing import Any

from searchrl.config.names import NO_JUDGE, judge_backend_key, judge_setting_problem, parse_endpoint_argument
from searchrl.config.names import split_judge_setting as split_setting
from searchrl.core.registry import Registry
from searchrl.judge.base import Judge
from searchrl.judge.endpoint import EndpointJudge
from searchrl.judge.local import DEFAULT_LOCAL_JUDGE, LocalJudge

JudgeFactory = Callable[..., Judge]
JUDGE_BACKENDS: Registry[JudgeFactory] = Registry("judge backend", normalize=judge_backend_key)


def _local(argument: str, **options: Any) -> Judge:
    return LocalJudge.load(argument or DEFAULT_LOCAL_JUDGE, **options)


def _endpoint(argument: str, **options: Any) -> Judge:
    model, url = parse_endpoint_argument(argument)
    return EndpointJudge(model, url, **options)


JUDGE_BACKENDS.register("local", _local, doc="a local causal LM, greedy (local:<model name, folder or hub id>)")
JUDGE_BACKENDS.register("openai", _endpoint,
                        doc="an OpenAI-compatible chat-completions server (openai:<model>@<base URL>)")


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


__all__ = ["JUDGE_BACKENDS", "NO_JUDGE", "judge_setting_problem", "make_judge", "parse_endpoint_argument",
           "split_setting"]
