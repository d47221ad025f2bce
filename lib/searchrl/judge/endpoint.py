"""A judge behind any OpenAI-compatible chat-completions endpoint (OpenAI, vLLM, llama.cpp, Ollama, ...).

Standard library only (urllib), so the judge adds no dependency. Requests are sent a few at a time from threads;
the first one goes alone, so an unreachable endpoint fails once with a clear message rather than once per thread.
Connection errors, timeouts, 408, 429 and 5xx are retried with exponential backoff (honouring Retry-After); other
HTTP errors (a wrong key, model or URL) are raised at once, with what to fix.
"""

from __future__ import annotations

import http.client
import json
import os
import random
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from searchrl.judge.base import Chat, Judge

DEFAULT_BASE_URL = "https://api.openai.com/v1"
BASE_URL_ENV = "OPENAI_BASE_URL"
# The first of these that is set holds the API key; local servers (vLLM, llama.cpp) usually need none.
API_KEY_ENVS = ("SEARCHRL_JUDGE_API_KEY", "OPENAI_API_KEY")
_RETRY_STATUS = frozenset({408, 409, 425, 429, 500, 502, 503, 504})


class JudgeEndpointError(RuntimeError):
    """The judge endpoint could not give a verdict (unreachable, refused the request, or answered nonsense).

    `completed` holds the replies that other requests of the same `complete` call got, by chat index: they were
    answered (and paid for), so a caller can keep them and ask only the rest again."""

    completed: dict[int, str]

    def __init__(self, *args: object) -> None:
        super().__init__(*args)
        self.completed = {}


class _Retryable(Exception):
    def __init__(self, message: str, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


def chat_completions_url(base_url: str) -> str:
    """`http://host:port/v1` -> `http://host:port/v1/chat/completions` (a full completions URL is kept)."""
    url = base_url.strip().rstrip("/")
    if not url.startswith(("http://", "https://")):
        raise ValueError(f"judge endpoint {base_url!r} must start with http:// or https:// (e.g. http://localhost:8000/v1)")
    return url if url.endswith("/chat/completions") else url + "/chat/completions"


def api_key_from_env(names: Sequence[str] = API_KEY_ENVS) -> str | None:
    return next((os.environ[n] for n in names if os.environ.get(n)), None)


class EndpointJudge(Judge):
    """Verdicts from `model` served at `base_url` (greedy: temperature 0).

    `timeout` is per request in seconds; `max_retries` retries follow the first try, waiting `backoff * 2**attempt`
    seconds (jittered, at most `max_backoff`). `concurrency` requests are in flight at once. `max_tokens` caps the
    reply: raise it for reasoning models, whose <think> block comes before the verdict. `extra_body` is merged into
    every request (e.g. {"seed": 0}).
    """

    def __init__(self, model: str, base_url: str | None = None, *, api_key: str | None = None,
                 api_key_envs: Sequence[str] = API_KEY_ENVS, timeout: float = 60.0, max_retries: int = 4,
                 backoff: float = 1.0, max_backoff: float = 30.0, concurrency: int = 8, batch_size: int = 32,
                 max_tokens: int = 32, temperature: float = 0.0, extra_body: dict[str, Any] | None = None) -> None:
        if not model or not str(model).strip():
            raise ValueError("the judge endpoint needs a model name, e.g. 'openai:gpt-4o-mini@http://localhost:8000/v1'")
        self.model = str(model).strip()
        self.url = chat_completions_url(base_url or os.environ.get(BASE_URL_ENV) or DEFAULT_BASE_URL)
        self.api_key = api_key if api_key is not None else api_key_from_env(api_key_envs)
        self.timeout, self.max_retries = float(timeout), int(max_retries)
        self.backoff, self.max_backoff = float(backoff), float(max_backoff)
        self.concurrency, self.batch_size = max(1, int(concurrency)), int(batch_size)
        self.max_tokens, self.temperature = max_tokens, temperature
        self.extra_body = dict(extra_body or {})
        self.name = f"openai:{self.model}"

    def payload(self, chat: Chat) -> dict[str, Any]:
        """The JSON body of one request."""
        body: dict[str, Any] = {"model": self.model, "messages": chat, "temperature": self.temperature}
        if self.max_tokens is not None:
            body["max_tokens"] = int(self.max_tokens)
        body.update(self.extra_body)
        return body

    def complete(self, chats: Sequence[Chat]) -> list[str]:
        if not chats:
            return []
        first = self.ask(chats[0])  # alone: an unreachable endpoint fails here, once
        replies = {0: first}
        if len(chats) == 1 or self.concurrency == 1:
            for i, chat in enumerate(chats[1:], 1):
                try:
                    replies[i] = self.ask(chat)
                except JudgeEndpointError as err:
                    err.completed = replies
                    raise
            return [replies[i] for i in range(len(chats))]
        with ThreadPoolExecutor(max_workers=min(self.concurrency, len(chats) - 1)) as pool:
            futures = [pool.submit(self.ask, chat) for chat in chats[1:]]
        # Leaving the pool waited for every request, failed or not: keep each answer before reporting a failure.
        failure: BaseException | None = None
        for i, future in enumerate(futures, 1):
            if future.exception() is None:
                replies[i] = future.result()
            elif failure is None:
                failure = future.exception()
        if failure is not None:
            if isinstance(failure, JudgeEndpointError):
                failure.completed = replies
            raise failure
        return [replies[i] for i in range(len(chats))]

    def ask(self, chat: Chat) -> str:
        """The reply text to one chat, retrying transient failures."""
        data = json.dumps(self.payload(chat)).encode("utf-8")
        last: _Retryable | None = None
        for attempt in range(self.max_retries + 1):
            try:
                return self._post(data)
            except _Retryable as err:
                last = err
                if attempt < self.max_retries:
                    time.sleep(self._delay(attempt, err.retry_after))
        raise JudgeEndpointError(
            f"judge endpoint {self.url} failed {self.max_retries + 1} times; last error: {last}. Is the server "
            f"running and is the URL in the judge setting right (it should end in /v1)?"
        )

    def _delay(self, attempt: int, retry_after: float | None) -> float:
        if retry_after is not None:
            return min(retry_after, self.max_backoff)
        return min(self.backoff * 2**attempt, self.max_backoff) * random.uniform(0.5, 1.0)  # jitter spreads threads

    def _post(self, data: bytes) -> str:
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        request = urllib.request.Request(self.url, data=data, headers=headers, method="POST")
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                body = response.read()
        except urllib.error.HTTPError as err:
            detail = err.read()[:500].decode("utf-8", "replace")
            if err.code in _RETRY_STATUS:
                raise _Retryable(f"HTTP {err.code}: {detail}", _retry_after(err.headers)) from None
            raise JudgeEndpointError(f"judge endpoint {self.url} answered HTTP {err.code}: {detail}"
                                     f"{_http_hint(err.code, self)}") from None
        except urllib.error.URLError as err:
            raise _Retryable(f"cannot connect ({err.reason})") from None
        except (TimeoutError, ConnectionError, http.client.HTTPException) as err:
            raise _Retryable(f"no complete answer (timeout {self.timeout:g} s; {type(err).__name__}: {err})") from None
        try:
            return _reply_text(json.loads(body))
        except (ValueError, KeyError, IndexError, TypeError) as err:
            # Proxies and overloaded servers sometimes return a truncated or HTML body: worth another try.
            raise _Retryable(f"unreadable response ({type(err).__name__}: {err}): {body[:200]!r}") from None


def _reply_text(response: dict[str, Any]) -> str:
    message = response["choices"][0]["message"]
    content = message.get("content")
    if isinstance(content, list):  # some servers return content parts
        content = "".join(part.get("text", "") for part in content if isinstance(part, dict))
    return "" if content is None else str(content)


def _retry_after(headers: Any) -> float | None:
    try:
        return max(0.0, float(headers.get("Retry-After")))
    except (TypeError, ValueError):
        return None


def _http_hint(code: int, judge: EndpointJudge) -> str:
    if code in (401, 403):
        return f" -- set the API key in ${API_KEY_ENVS[0]} (or ${API_KEY_ENVS[1]})"
    if code == 404:
        return (f" -- check the base URL (usually ends in /v1; requests go to {judge.url}) and that the server "
                f"serves model {judge.model!r}")
    if code == 400:
        return f" -- the server rejected the request; check that it serves model {judge.model!r}"
    return ""


__all__ = ["API_KEY_ENVS", "DEFAULT_BASE_URL", "EndpointJudge", "JudgeEndpointError", "api_key_from_env",
           "chat_completions_url"]
