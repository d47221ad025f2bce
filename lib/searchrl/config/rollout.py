"""The rollout's settings: search and token budgets, decoding, the retriever's timeouts and retries, and the
exploration openers, with their checks."""

from __future__ import annotations

from dataclasses import dataclass, field, fields, replace
from typing import Any

from searchrl.core.settings import raise_problems

__all__ = ["RolloutConfig", "rollout_problems"]


@dataclass(frozen=True)
class RolloutConfig:
    """Budgets and sampling of one search rollout. Greedy evaluation uses the same object with sampling off."""

    # == rollout ==
    max_searches: int = 2
    """Most searches one rollout may issue; a query beyond this gets a budget notice instead of documents."""
    top_k: int = 3
    """Documents returned per search."""
    max_turn_tokens: int = 128
    """Tokens one generation turn may sample; a longer turn ends the sample (0: only the total budget applies).
    A batch turn lasts as long as its longest row, so this keeps one rambling sample from holding up the batch."""
    max_completion_tokens: int = 256
    """Most tokens in a whole completion, sampled and retrieved together (TRL's max_completion_length)."""
    max_observation_tokens: int = 0
    """Most tokens of each block of retrieved documents appended after a search (Search-R1's code cuts at 500,
    max_obs_length; R-Search's at 1800). A longer block is cut inside its frame: the documents lose their end, the
    protocol's closing tag stays, and the block, tags included, takes exactly this many tokens (a limit smaller than
    the tags alone cuts the block itself). The retrieved-token mask covers exactly what is appended. Notices (search
    budget, failed search) are never cut. The cold start's written demonstrations are cut by the same rule. 0: off,
    blocks are appended whole."""
    max_concurrent_rollouts: int = 0
    """Rollouts generated together; 0: a step's whole generation batch at once. Every row being generated holds its
    KV cache (SmolLM2-135M in float32: about 46 KB a token), so a CPU step of 256 rollouts of ~1,000 tokens holds
    ~12 GB at its end; a smaller value runs the batch in chunks of this many, one after another: the same
    distribution of rollouts, a lower memory peak, smaller batches. vLLM's generation (collective) ignores it."""
    max_query_chars: int = 300
    """Longer queries are refused with an observation saying so (nothing is searched)."""
    budget_notice: str = "Search budget used up: answer now with what you found."
    """The observation appended when a rollout asks for more than max_searches searches."""
    retriever_timeout_s: float = 60.0
    """Seconds one retriever call may take before it counts as failed (0: wait forever)."""
    retriever_retries: int = 2
    """Failed retriever calls retried (with doubling waits from retriever_backoff_s) before the run stops loudly."""
    retriever_backoff_s: float = 1.0
    """Wait before the first retry of a failed retriever call; each further retry waits twice as long."""
    retriever_outage_s: float = 0.0
    """Seconds rollouts ride out a retriever that stays down mid-run: a search batch that still fails after its
    retries is answered with a "search failed" notice instead of documents (counted: search/failed_searches) and
    the rollouts go on, until the retriever has answered nothing for this long; then the run stops loudly, keeping
    its checkpoints. 0: the first batch that fails stops the run. `Experiment.evaluate` always uses 0, so that a
    failed search never changes a score."""
    temperature: float = 1.0
    """Sampling temperature of training rollouts (0: greedy). Evaluation decodes greedily unless told otherwise."""
    top_p: float = 1.0
    """Nucleus sampling: sample from the smallest set of tokens whose probability reaches top_p (1: all)."""
    query_temperature: float = 0.0
    """Training rollouts only: sampling temperature inside a search query (from the protocol's query opener to its
    close tag); 0: the same as `temperature`. At temperature 0.7 a group of rollouts writes nearly the same query
    and retrieves the same passages, so GRPO never compares phrasings; a hotter query span varies what a group
    retrieves while the reasoning and the answer stay as cool as before. The loss still scores those tokens at
    `temperature`: they are exploration, sampled a little off the policy. Needs the cached transformers generator
    (the CPU path); vLLM and the uncached generator refuse it. Not from the papers."""
    forced_searches: int = 0
    """Training rollouts only (evaluation never forces): every other rollout of a batch that closes an answer
    having searched fewer than this many times loses the answer tag and what follows, and gets the query opener
    instead, so it goes on to search. That turn's kept reasoning and the opener are masked (not trained): they were
    written, or put, on the way to a choice the model did not make. A group then holds rollouts that searched more
    beside rollouts that chose when to stop, and GRPO compares the two even once the policy's own search count has
    settled on one value (0: off; at most max_searches). Not from the papers."""
    train_forced_opener: bool = False
    """With forced_searches: train the query opener put on a forced rollout (mask 1; its reasoning stays masked), as
    if the policy had chosen to search again there. The opener is the very choice the forced search tests, so its
    advantage says per question whether searching again paid: where it did, the policy learns to open a search at
    that point; where group mates that answered earlier did better, it learns not to. Off-policy by one appended
    tag, whose probability under a cold start that searches again half the time is near a sampled token's."""
    explore_openers: list[str] = field(default_factory=list)
    """Training rollouts only (evaluation never uses them): the rollouts of each group start, in turn, from these
    completion openers (rollout i from explore_openers[i % n]; "" leaves that rollout to the model), which are then
    trained as if the model had written them, with the rollout's advantage. A group thus compares the choices its
    openers make, such as the plan-first cold start's "<think> This needs one fact" against "... two facts", so a
    decision the policy has settled on and no longer samples still gets a reward signal both ways. Off-policy on the
    opener's tokens: an opener the policy finds unlikely gets a large push when it pays. End each opener at the word
    that makes the choice ("... This needs one" / "... This needs two"): every opener token is trained, so a word
    after the choice (" facts") is pushed down wherever that choice lost, and the policy learns to garble it.
    Openers are reasoning text (no query or answer tag); num_generations must be a multiple of their number; the
    cached transformers generator only (vLLM's importance-sampling correction needs every trained token's sampling
    log-probability). Not from the papers."""
    center_opener_advantage: bool = False
    """With explore_openers: train each opener's tokens with its rollout's advantage minus the batch's mean advantage
    of the rollouts started from the same opener (the tokens after it keep the rollout's own). Every opener's summed
    push is then zero at every step, and what the opener itself learns is how much better it did on this question
    than on the others (measured: docs/levers.md). Not from the papers."""
    opener_anchor: float = 0.0
    """With two explore_openers: the weight of a loss term that holds how often the policy picks the second over the
    step's questions (the mean of p(opener 1) / (p(opener 0) + p(opener 1))) at the rate the reference had on the same
    questions: weight * (rate now - reference rate)^2. The rewards still move each question's choice against the
    others (per-question judgement); the shift every question shares (the prior) is pulled back. Costs a forward
    over the step's prompts with each opener under the policy and the reference (TRL's reference model when
    beta > 0, the adapter switched off with PEFT, otherwise a frozen copy of the starting policy), and a backward
    through the openers' positions. Logged as `search/opener_rate_shift` (before the step's update) and
    `search/opener_log_odds/<qtype>`. 0: off. Not from the papers."""

    def __post_init__(self) -> None:
        raise_problems("RolloutConfig", rollout_problems(self))

    def replace(self, **changes: Any) -> RolloutConfig:
        """A copy with `changes` applied (and checked)."""
        return replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        """The settings as a plain dict (for JSON records of an evaluation)."""
        return {f.name: getattr(self, f.name) for f in fields(RolloutConfig)}


# Inclusive lower bounds of the numeric settings.
_MINIMUMS = {"max_searches": 0, "top_k": 1, "max_turn_tokens": 0, "max_completion_tokens": 1, "max_observation_tokens": 0,
             "max_query_chars": 1,
             "max_concurrent_rollouts": 0,
             "temperature": 0.0, "query_temperature": 0.0, "retriever_timeout_s": 0.0, "retriever_retries": 0,
             "retriever_backoff_s": 0.0, "retriever_outage_s": 0.0, "forced_searches": 0,
             "opener_anchor": 0.0}


def rollout_problems(values: Any) -> list[tuple[str, str]]:
    """(field, message) for every out-of-range rollout setting of `values` (an object with the field names)."""
    problems = []
    for name, low in _MINIMUMS.items():
        value = getattr(values, name)
        if isinstance(value, (int, float)) and value < low:
            problems.append((name, f"{name} must be >= {low}, got {value!r}"))
    forced, budget = values.forced_searches, values.max_searches
    if isinstance(forced, int) and isinstance(budget, int) and forced > budget:
        message = (f"forced_searches ({forced}) must not exceed max_searches ({budget}): a rollout cannot be made "
                   "to search more often than it may")
        problems.append(("forced_searches", message))
    if values.train_forced_opener is True and forced == 0:
        message = ("train_forced_opener trains the opener that forced_searches puts on a rollout; set forced_searches "
                   ">= 1 as well (it is 0, so nothing would be trained)")
        problems.append(("train_forced_opener", message))
    openers = values.explore_openers
    if values.center_opener_advantage is True and not any(openers or []):
        message = ("center_opener_advantage centres the advantages of explore_openers' tokens; give explore_openers "
                   "(e.g. [\"<think> This needs one\", \"<think> This needs two\"]) or leave it off")
        problems.append(("center_opener_advantage", message))
    anchor = values.opener_anchor
    if isinstance(anchor, (int, float)) and anchor > 0 and not (
            isinstance(openers, (list, tuple)) and len(openers) == 2 and all(openers)):
        message = ("opener_anchor holds the choice between two explore_openers; give exactly two non-empty ones "
                   f"(e.g. [\"<think> This needs one\", \"<think> This needs two\"]), got {openers!r}")
        problems.append(("opener_anchor", message))
    if isinstance(openers, (list, tuple)):
        if not all(isinstance(o, str) for o in openers):
            problems.append(("explore_openers", f"explore_openers must be a list of strings, got {openers!r}"))
        elif openers and not any(openers):
            why = "explore_openers holds only empty openers, which change nothing; give one text, or leave it empty"
            problems.append(("explore_openers", why))
    top_p = values.top_p
    if isinstance(top_p, (int, float)) and not 0 < top_p <= 1:
        problems.append(("top_p", f"top_p must be in (0, 1], got {top_p!r}"))
    return problems
