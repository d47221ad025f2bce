"""The search rollout: generate, stop at a closed query, retrieve for the whole batch at once, append, continue.

One engine serves training (through TRL's `rollout_func`), evaluation and rejection sampling. The protocol decides
tags and parsing; the engine knows nothing of any paper. The code that appends retrieved tokens is the code that
writes their zeros into `env_mask`: nothing re-derives the mask from decoded text.

The retriever contract is checked here, in one place (`SearchRollout.search`): one list of documents per query or a
`RetrieverError`; empty lists are counted (`Trajectory.empty_results`, logged as `search/empty_results`); a call
that raises or outlasts `retriever_timeout_s` is retried `retriever_retries` times with doubling waits, and a
retriever that stays down stops the run with an error that says so, instead of training on missing documents.
A replay asked what its record lacks (`ReplayMissError`) stops the run at once: no retry could answer it.
With `retriever_outage_s` > 0 a mid-run outage is ridden out for that long: a batch that still fails after its
retries gets a "search failed" notice in place of documents, counted (`Trajectory.failed_searches`, logged as
`search/failed_searches`), and the run stops only once the retriever has answered nothing for that long.

With `forced_searches` > 0 and `explore=True` (the trainer's engine only), every other rollout that closes an
answer too early is sent back to search: its turn is cut where the answer tag begins and the query opener is
appended; the kept part of that turn and the opener are both masked as environment text (`Trajectory.forced`,
logged as `search/forced_searches`), unless `train_forced_opener` trains the opener.

With `explore_openers` and `explore=True`, each rollout of a group starts from its opener in turn, appended before
the first turn as tokens the model is trained on (`Trajectory.opener`).

With `max_observation_tokens` > 0, each block of retrieved documents longer than that is cut where its tokens are
appended (`_document_ids`): the documents lose their end, the block keeps its closing tag, and `env_mask` holds
exactly one 0 per appended token (`Trajectory.truncated_observations` counts the blocks cut).
"""

from __future__ import annotations

import concurrent.futures
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from searchrl.config.rollout import RolloutConfig
from searchrl.core.progress import progress_bar
from searchrl.data.tokenize import cut_observation
from searchrl.protocols.base import SearchProtocol
from searchrl.retrieval.replay import ReplayMissError
from searchrl.rollout.base import TurnGenerator, first_stop_end, shortest_prefix

# The observation in place of documents when the retriever stayed down: it names the failure, so that it is not
# mistaken for (or trained as) a search that found nothing.
SEARCH_FAILED_NOTICE = "Search failed: the search engine did not answer. Answer with what you know."
EMPTY_QUERY_NOTICE = "Empty query: nothing searched."
LONG_QUERY_NOTICE = "Query longer than {chars} characters."


def engine_notices(cfg: RolloutConfig) -> tuple[str, ...]:
    """Every observation text the engine writes in place of documents under `cfg`: what a reader of observations
    (the memorization loss) must not take for retrieved knowledge."""
    return (cfg.budget_notice, EMPTY_QUERY_NOTICE, LONG_QUERY_NOTICE.format(chars=cfg.max_query_chars),
            SEARCH_FAILED_NOTICE)


@dataclass
class Trajectory:
    """One sample's rollout: tokens, which of them the model sampled, and what it searched."""

    prompt_ids: list[int]
    completion_ids: list[int] = field(default_factory=list)
    env_mask: list[int] = field(default_factory=list)  # 1 = sampled by the model, 0 = appended by the environment
    logprobs: list[float] = field(default_factory=list)  # sampling logprobs (NaN on appended tokens) when known
    queries: list[str] = field(default_factory=list)  # valid queries sent to the retriever
    doc_ids: list[list[str]] = field(default_factory=list)  # ids retrieved for each query
    invalid_queries: int = 0  # empty or over-long queries, answered with a refusal
    empty_results: int = 0  # searches the retriever answered with no document
    failed_searches: int = 0  # searches the retriever never answered (down past its retries): a notice instead
    truncated_observations: int = 0  # blocks of documents cut to max_observation_tokens
    hit_search_budget: bool = False  # asked for more searches than allowed
    hit_length_budget: bool = False  # the token budget ended the rollout
    finish: str = ""  # "answer" (closed answer / other stop), "eos", "length"
    min_searches: int = 0  # searches to make before an answer is accepted (forced_searches, on forced rows)
    forced_spans: list[tuple[int, int]] = field(default_factory=list)  # [start, end) of each forced, untrained span
    query_opened: bool = False  # the environment just appended the query opener: the next turn is the query itself
    opener: str = ""  # the explore_openers text this rollout was started from (trained as sampled; "" for none)
    opener_index: int = -1  # its position in explore_openers (identical openers stay apart); -1 when started free
    done: bool = False
    budget: int = 256  # completion tokens allowed, sampled and appended together

    @property
    def num_searches(self) -> int:
        return len(self.queries)

    @property
    def forced(self) -> int:
        """Answers cut and replaced by a query opener to reach min_searches."""
        return len(self.forced_spans)

    @property
    def budget_left(self) -> int:
        return self.budget - len(self.completion_ids)

    def append(self, ids: list[int], sampled: bool, logprobs: list[float] | None = None) -> None:
        self.completion_ids.extend(ids)
        self.env_mask.extend([1 if sampled else 0] * len(ids))
        self.logprobs.extend(logprobs if logprobs is not None else [float("nan")] * len(ids))


class RetrieverError(RuntimeError):
    """The retriever broke its contract (wrong number of result lists, not documents) or stayed down."""


class RetrieverDownError(RetrieverError):
    """Every attempt of one retriever call failed; `down_s`: seconds since the retriever last answered (since the
    first failure of this outage)."""

    def __init__(self, message: str, down_s: float) -> None:
        super().__init__(message)
        self.down_s = down_s


class SearchRollout:
    """Batched multi-turn search rollouts over any `TurnGenerator` and `Retriever`."""

    def __init__(self, protocol: SearchProtocol, retriever, tokenizer, generator: TurnGenerator,
                 config: RolloutConfig | None = None, *, collective: bool = False, progress: bool = False,
                 explore: bool = False, on_turn: Callable[[int, int, int], None] | None = None):
        self.protocol, self.retriever, self.tokenizer, self.generator = protocol, retriever, tokenizer, generator
        self.config = config or RolloutConfig()
        # Forcing searches changes what a rollout does; only training asks for it, so a score never depends on it.
        self.explore = explore
        # Multi-process vLLM generation is collective: every process then runs every turn, even with nothing to do.
        self.collective = collective
        self.progress = progress
        # Told (turns done, most turns, rollouts still writing) before the first turn and after each: a caller whose
        # batch takes minutes (a training step on a CPU) shows where it is.
        self.on_turn = on_turn
        self.retrieval_s = 0.0  # time spent in the retriever, summed over rollouts
        self.failed_searches = 0  # searches answered with SEARCH_FAILED_NOTICE, summed over rollouts
        self.truncated_observations = 0  # document blocks cut to max_observation_tokens, summed over rollouts
        self._down_since: float | None = None  # when the current outage began (its first failed attempt)
        # Checked and encoded once here, not per rollout: the openers are fixed for the engine's life.
        self._opener_ids = [self._encode_opener(o) if o else [] for o in self.config.explore_openers] if explore else []

    @property
    def opener_ids(self) -> list[list[int]]:
        """The tokens of each of explore_openers, as put at the start of a completion ([] for "")."""
        return [list(ids) for ids in self._opener_ids]

    @property
    def opener_lengths(self) -> list[int]:
        """The token count of each of explore_openers, as put at the start of a completion (0 for "")."""
        return [len(ids) for ids in self._opener_ids]

    def encode_observation(self, text: str) -> list[int]:
        return self.tokenizer(text, add_special_tokens=False)["input_ids"]

    def run(self, prompt_ids: list[list[int]]) -> list[Trajectory]:
        cfg = self.config
        forced = cfg.forced_searches if self.explore else 0
        # Every other row: GRPO's sampler lays a group's rollouts side by side, so each group gets forced and free ones.
        trajs = [Trajectory(prompt_ids=list(p), budget=cfg.max_completion_tokens, min_searches=forced * (i % 2))
                 for i, p in enumerate(prompt_ids)]
        n_openers = len(self._opener_ids)
        for i, traj in enumerate(trajs):  # rows side by side share a group, so each group gets every opener in turn
            if n_openers and self._opener_ids[i % n_openers]:
                self._start_with(traj, i % n_openers)
        # Collective generation must run the same turns on every process, so it takes the batch whole.
        chunk = len(trajs) if self.collective or cfg.max_concurrent_rollouts <= 0 else cfg.max_concurrent_rollouts
        for lo in range(0, len(trajs), max(1, chunk)):
            self._run_turns(trajs[lo: lo + chunk])
        for t in trajs:  # the last turn's queries got their documents but no turn to use them
            if not t.done:
                t.done, t.finish, t.hit_length_budget = True, "length", t.hit_length_budget or t.budget_left <= 0
        return trajs

    def _run_turns(self, trajs: list[Trajectory]) -> None:
        """Generate `trajs` together, turn by turn, until each has answered or run out of turns."""
        # One turn per allowed search, one to answer, and one after a budget notice.
        max_turns = self.config.max_searches + 2
        bar = progress_bar(total=max_turns, desc="rollout turns", disable=not self.progress, leave=False)
        # A generator may keep state between the turns of a rollout (a KV cache); it must not outlive the rollout.
        reset = getattr(self.generator, "reset", None)
        if reset:
            reset()
        try:
            for turn in range(max_turns):
                active = [t for t in trajs if not t.done]
                if self.on_turn is not None:
                    self.on_turn(turn, max_turns, len(active))
                if not active and not self.collective:
                    break
                outputs = self.generator.generate_turn(
                    [t.prompt_ids + t.completion_ids for t in active], [self._turn_budget(t) for t in active]
                )
                pending: list[tuple[Trajectory, str]] = []
                for traj, out in zip(active, outputs):
                    self._take_turn(traj, out, pending)
                self._retrieve_and_append(pending)
                bar.update(1)
        finally:
            bar.close()
            if reset:
                reset()

    def _encode_opener(self, opener: str) -> list[int]:
        """`opener`'s tokens, after checking it is reasoning text that leaves room for the model's own turns."""
        tags = [t for t in (self.protocol.query_open, self.protocol.answer_open) if t and t in opener]
        if tags:
            raise ValueError(f"explore_openers must be reasoning text, but {opener!r} holds the protocol's tag "
                             f"{tags[0]!r}; end the opener before any query or answer")
        ids = self.encode_observation(opener)
        if len(ids) >= self.config.max_completion_tokens:
            raise ValueError(f"the explore opener {opener!r} ({len(ids)} tokens) leaves no room in "
                             f"max_completion_tokens={self.config.max_completion_tokens}")
        return ids

    def _start_with(self, traj: Trajectory, index: int) -> None:
        """Put explore opener `index` at the start of the completion as if sampled (mask 1, trained; no sampling
        log-probs)."""
        traj.append(list(self._opener_ids[index]), sampled=True)
        traj.opener, traj.opener_index = self.config.explore_openers[index], index

    def _turn_budget(self, traj: Trajectory) -> int:
        # A batch turn lasts as long as its longest row; capping a turn stops one rambling sample from holding up
        # the whole batch.
        cap = self.config.max_turn_tokens
        return max(min(traj.budget_left, cap) if cap > 0 else traj.budget_left, 1)

    def _take_turn(self, traj: Trajectory, out, pending: list) -> None:
        cfg = self.config
        if traj.num_searches < traj.min_searches and out.finish == "stop" and self._send_back_to_search(traj, out):
            return
        traj.append(out.token_ids, sampled=True, logprobs=out.logprobs)
        if out.finish == "eos":
            traj.done, traj.finish = True, "eos"
            return
        if traj.budget_left <= 0:
            traj.done, traj.finish, traj.hit_length_budget = True, "length", True
            return
        segment = self.tokenizer.decode(out.token_ids, skip_special_tokens=True)
        if traj.query_opened:  # the opener is in the completion already, as environment text
            segment, traj.query_opened = self.protocol.query_open + segment, False
        query = self.protocol.extract_query(_through_first_stop(segment, self.protocol.stop_strings))
        if out.finish != "stop" or query is None:
            # A closed answer (or any other stop) ends the sample; an unfinished turn ran out of its budget.
            traj.done, traj.finish = True, "answer" if out.finish == "stop" else "length"
            traj.hit_length_budget = out.finish == "length"
            return
        if traj.num_searches >= cfg.max_searches:
            traj.hit_search_budget = True
            self._append_observation(traj, self.protocol.invalid_query_observation(cfg.budget_notice))
        elif not query.strip():
            traj.invalid_queries += 1
            self._append_observation(traj, self.protocol.invalid_query_observation(EMPTY_QUERY_NOTICE))
        elif len(query) > cfg.max_query_chars:
            traj.invalid_queries += 1
            self._append_observation(
                traj, self.protocol.invalid_query_observation(LONG_QUERY_NOTICE.format(chars=cfg.max_query_chars))
            )
        else:
            pending.append((traj, query.strip()))

    def _send_back_to_search(self, traj: Trajectory, out) -> bool:
        """If this turn closed an answer, keep what the model wrote before the answer tag, append the query opener,
        both as environment text (masked), and return True: the next turn writes a query. False when the turn did
        not answer."""
        protocol, ids = self.protocol, out.token_ids
        segment = _through_first_stop(self.tokenizer.decode(ids, skip_special_tokens=True), protocol.stop_strings)
        if protocol.extract_query(segment) is not None or protocol.answer_open not in segment:
            return False
        # The longest run of whole tokens that ends before the tag. A tag may span several tokens and a token may
        # straddle its start ("><"): the text that token held before the tag is given back with the opener.
        tag_at = segment.index(protocol.answer_open)
        reaches_tag = shortest_prefix(ids, lambda p: len(self.tokenizer.decode(p, skip_special_tokens=True)) > tag_at)
        keep = len(ids) if reaches_tag is None else reaches_tag - 1
        kept_chars = len(self.tokenizer.decode(ids[:keep], skip_special_tokens=True))
        # Kept as context but not trained (mask 0): this reasoning was written on the way to an answer ("so the
        # answer is X"), and training it with the forced rollout's advantage would teach answering early whenever
        # the forced search pays.
        start = len(traj.completion_ids)
        traj.append(ids[:keep], sampled=False)
        reasoning_end = len(traj.completion_ids)
        self._append_observation(traj, segment[kept_chars:tag_at] + protocol.query_open)
        if self.config.train_forced_opener:  # the choice itself is trained with this rollout's advantage
            opened = len(traj.completion_ids)
            traj.env_mask[reasoning_end:opened] = [1] * (opened - reasoning_end)
            traj.forced_spans.append((start, reasoning_end))
        else:
            traj.forced_spans.append((start, len(traj.completion_ids)))
        traj.query_opened = True
        return True

    def _retrieve_and_append(self, pending: list) -> None:
        if not pending:
            return
        # One retriever call for every pending query of the batch.
        try:
            results = self.search([q for _, q in pending])
        except RetrieverDownError as down:
            if down.down_s >= self.config.retriever_outage_s:
                raise
            self._answer_failed_searches(pending, down)
            return
        for (traj, query), docs in zip(pending, results, strict=True):
            traj.queries.append(query)
            traj.doc_ids.append([d.id for d in docs])
            traj.empty_results += not docs
            self._append_environment_ids(traj, self._document_ids(traj, docs))

    def _document_ids(self, traj: Trajectory, docs: list) -> list[int]:
        """The tokens of the observation showing `docs`, cut to max_observation_tokens (0: whole) inside its frame."""
        ids, cut = cut_observation(self.protocol.format_observation(docs), self.encode_observation,
                                   self.config.max_observation_tokens, self.protocol.observation_frame())
        traj.truncated_observations += cut
        self.truncated_observations += cut
        return ids

    def search(self, queries: list[str]) -> list[list]:
        """The retriever's documents for `queries`, checked: one list per query, retried on failure or timeout.

        Raises `RetrieverDownError` (saying how long the retriever has answered nothing) when every attempt failed.
        """
        cfg = self.config
        failures: list[str] = []
        for attempt in range(cfg.retriever_retries + 1):
            if attempt:
                time.sleep(cfg.retriever_backoff_s * 2 ** (attempt - 1))
            started = time.perf_counter()
            try:
                results = self._call_retriever(queries)
            except ReplayMissError:
                raise  # a replay's record lacks a query: no retry or outage allowance can answer it
            except Exception as err:  # noqa: BLE001  (any failure of the retriever counts; the last one is raised)
                failures.append(f"{type(err).__name__}: {err}")
                if self._down_since is None:
                    self._down_since = time.monotonic()
                continue
            finally:
                self.retrieval_s += time.perf_counter() - started
            self._down_since = None
            return self._checked(results, queries)
        down_s = time.monotonic() - self._down_since
        raise RetrieverDownError(
            f"the retriever {self.retriever!r} failed {len(failures)} times in a row for a batch of {len(queries)} "
            f"queries (last: {failures[-1]}); it has answered nothing for {down_s:.1f} s (retriever_outage_s="
            f"{cfg.retriever_outage_s:g}); check it is up, or raise retriever_timeout_s / retriever_retries / "
            "retriever_outage_s", down_s)

    def _answer_failed_searches(self, pending: list, down: RetrieverDownError) -> None:
        """Within retriever_outage_s: each pending query is a search that failed, answered with a notice."""
        for traj, query in pending:
            traj.queries.append(query)  # the model asked: the search counts against its budget, as any other
            traj.doc_ids.append([])
            traj.failed_searches += 1
            self._append_observation(traj, self.protocol.invalid_query_observation(SEARCH_FAILED_NOTICE))
        self.failed_searches += len(pending)
        # said on stderr as it happens: the per-step metric only appears once the step is logged
        print(f"retriever down for {down.down_s:.1f} s of retriever_outage_s={self.config.retriever_outage_s:g}: "
              f"{len(pending)} searches answered 'search failed' ({self.failed_searches} so far); rollouts go on",
              file=sys.stderr, flush=True)

    def _call_retriever(self, queries: list[str]):
        timeout = self.config.retriever_timeout_s
        if not timeout:
            return self.retriever.search(queries, self.config.top_k)
        # A worker thread, so that a hung retriever cannot hang the run; a call that times out is abandoned.
        pool = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="retriever")
        try:
            return pool.submit(self.retriever.search, queries, self.config.top_k).result(timeout=timeout)
        except concurrent.futures.TimeoutError:
            raise TimeoutError(f"no answer within retriever_timeout_s={timeout}") from None
        finally:
            pool.shutdown(wait=False)

    def _checked(self, results, queries: list[str]) -> list[list]:
        if not isinstance(results, (list, tuple)) or len(results) != len(queries):
            got = f"{len(results)} result lists" if isinstance(results, (list, tuple)) else type(results).__name__
            raise RetrieverError(f"the retriever {self.retriever!r} returned {got} for {len(queries)} queries; it "
                                 "must return one list of documents per query, in order (empty when nothing matched)")
        for docs in results:
            if not isinstance(docs, (list, tuple)) or not all(hasattr(d, "id") and hasattr(d, "text") for d in docs):
                raise RetrieverError(f"the retriever {self.retriever!r} returned {type(docs).__name__} for a query; "
                                     "each result must be a list of Doc")
        return [list(docs) for docs in results]

    def _append_observation(self, traj: Trajectory, text: str) -> None:
        self._append_environment_ids(traj, self.encode_observation(text))

    def _append_environment_ids(self, traj: Trajectory, ids: list[int]) -> None:
        """Append `ids` as environment tokens (mask 0); when they leave no room to answer, what fits, and end."""
        if len(ids) >= traj.budget_left:
            # No room left to answer after the documents: keep what fits and end the sample.
            traj.append(ids[: max(traj.budget_left, 0)], sampled=False)
            traj.done, traj.finish, traj.hit_length_budget = True, "length", True
            return
        traj.append(ids, sampled=False)


def _through_first_stop(text: str, stop_strings: list[str]) -> str:
    """The segment up to and including its first stop string (a token can run a few characters past a tag)."""
    end = first_stop_end(text, stop_strings)
    return text if end is None else text[:end]


def summarize(trajs: list[Trajectory]) -> dict[str, float]:
    """Batch statistics logged every step."""
    n = max(len(trajs), 1)
    tokens = sum(len(t.env_mask) for t in trajs)
    return {
        "search/searches_per_sample": sum(t.num_searches for t in trajs) / n,
        "search/frac_searched": sum(t.num_searches > 0 for t in trajs) / n,
        "search/invalid_queries_per_sample": sum(t.invalid_queries for t in trajs) / n,
        "search/empty_results": sum(t.empty_results for t in trajs) / n,
        "search/failed_searches": sum(t.failed_searches for t in trajs) / n,
        "search/hit_search_budget": sum(t.hit_search_budget for t in trajs) / n,
        "search/hit_length_budget": sum(t.hit_length_budget for t in trajs) / n,
        "search/forced_searches": sum(t.forced for t in trajs) / n,
        "search/masked_token_frac": sum(m == 0 for t in trajs for m in t.env_mask) / max(tokens, 1),
        "completions/model_tokens": sum(sum(t.env_mask) for t in trajs) / n,
        "completions/total_tokens": tokens / n,
    }
