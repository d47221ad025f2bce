"""Cold-start trajectories written from the synthetic world's answer chains, in any protocol's format.

Each hop of a question gets a short thought, a natural query, the REAL retriever's documents for that query and a
one-line reading of them; then the answer. The hops come from the row's metadata (`hop_subjects`, `hop_keys`,
`hop_answers`, written by the question generator), and each protocol renders the steps in its own tags
(`protocol.render`). A row is kept only when every hop's answer is in what the retriever returned, so the cold
start never teaches the model to answer something the documents do not say.

    items = templated_trajectories(world.questions("train", "single_hop", limit=64), protocol, retriever,
                                   tokenizer=tokenizer)
"""

from __future__ import annotations

import logging
import random
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from searchrl.data.schema import Finish, Search, Think, check_rows

if TYPE_CHECKING:  # annotation only: the data layer imports nothing below it
    from searchrl.rollout.base import RolloutConfig

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Hop:
    """One fact to look up: the `key` fact of the entity named `subject`, whose value is `answer`."""

    subject: str
    key: str
    answer: str


# How each fact is named in thoughts ("the director of X") and searched for. The query phrasings keep the verb of
# the corpus's fact sentences ("born", "directed", "founded"), which is what a sensible searcher would type and
# what lets BM25 prefer the passage that states the fact.
RELATION_NOUNS: dict[str, str] = {
    "birth_year": "birth year", "birthplace": "birthplace", "occupation": "occupation", "father": "father",
    "mother": "mother", "spouse": "spouse", "director": "director", "release_year": "release year",
    "filmed_in": "filming location", "author": "author", "publication_year": "publication year",
    "set_in": "setting", "founder": "founder", "founded_year": "founding year", "headquarters": "headquarters",
    "country": "country", "capital": "capital",
}
QUERY_FORMS: dict[str, tuple[str, ...]] = {
    "birth_year": ("{s} birth year born", "when was {s} born"),
    "birthplace": ("{s} birthplace born", "where was {s} born"),
    "occupation": ("{s} occupation worked as", "what did {s} work as"),
    "father": ("{s} father", "father of {s}"),
    "mother": ("{s} mother", "mother of {s}"),
    "spouse": ("{s} spouse married", "who was {s} married to"),
    "director": ("{s} director directed", "who directed {s}"),
    "release_year": ("{s} release year released", "when was {s} released"),
    "filmed_in": ("{s} filmed in", "where was {s} filmed"),
    "author": ("{s} author written by", "who wrote {s}"),
    "publication_year": ("{s} publication year published", "when was {s} published"),
    "set_in": ("{s} setting set in", "where is {s} set"),
    "founder": ("{s} founder founded by", "who founded {s}"),
    "founded_year": ("{s} founding year founded", "when was {s} founded"),
    "headquarters": ("{s} headquarters", "where is {s} headquartered"),
    "country": ("{s} country located in", "which country is {s} in"),
    "capital": ("{s} capital", "capital of {s}"),
}
FIRST_THOUGHTS = (
    "I need to find the {noun} of {s}.",
    "The question asks for the {noun} of {s}. I will search for it.",
    "To answer this, I should look up the {noun} of {s}.",
)
NEXT_THOUGHTS = (
    "Now I need the {noun} of {s}.",
    "Next, I will search for the {noun} of {s}.",
)
READINGS = (
    "The results say that the {noun} of {s} is {a}.",
    "According to the documents, the {noun} of {s} is {a}.",
    "From the retrieved passages, the {noun} of {s} is {a}.",
)


def hop_plan(row: Mapping) -> list[Hop] | None:
    """The facts a synthetic-world question needs, in reading order, or None for rows that do not record them."""
    meta = row.get("metadata") or {}
    subjects, keys, answers = (list(meta.get(name) or []) for name in ("hop_subjects", "hop_keys", "hop_answers"))
    if not subjects or not len(subjects) == len(keys) == len(answers):
        return None
    return [Hop(str(s), str(k), str(a)) for s, k, a in zip(subjects, keys, answers)]


def _conclusion(row: Mapping, hops: list[Hop], gold: str) -> str:
    """The last reasoning sentence before the answer: comparisons spell out the years they compare."""
    qtype = (row.get("metadata") or {}).get("type")
    if qtype == "comparison":
        noun = RELATION_NOUNS[hops[0].key]
        return (f"The {noun} of {hops[0].subject} is {hops[0].answer} and that of {hops[1].subject} is "
                f"{hops[1].answer}, so the answer is {{answer}}.")
    if qtype == "bridge_comparison":
        return (f"{hops[1].subject} was born in {hops[1].answer} and {hops[3].subject} in {hops[3].answer}, "
                f"so the answer is {{answer}}.")
    return "So the answer is {answer}."


def _mentions(text: str, phrase: str) -> bool:
    """Whether `phrase` occurs in `text` as whole words, ignoring case."""
    return re.search(rf"(?<!\w){re.escape(phrase.lower())}(?!\w)", text.lower()) is not None


def _evidence_sentence(docs, hop: Hop) -> str | None:
    """The retrieved sentence that states a hop's fact (mentions both its subject and its answer)."""
    for doc in docs:
        for sentence in re.split(r"(?<=[.!?])\s+", doc.text):
            if _mentions(sentence, hop.answer) and _mentions(sentence, hop.subject):
                return sentence.strip()
    return None


def templated_trajectories(
    rows: Sequence[Mapping],
    protocol,
    retriever,
    *,
    rollout: RolloutConfig | None = None,
    tokenizer=None,
    chat: bool = True,
    seed: int = 0,
) -> list[dict[str, Any]]:
    """Cold-start trajectories in `protocol`'s format (a `SearchProtocol`), one per usable synthetic-world row.

    Each item: {"prompt": text, "segments": [(text, trainable), ...], "id", "question", "golden_answers", "qtype",
    "hops", "queries", "doc_ids"}. Observation segments (exactly the text the rollout engine appends) are not
    trainable. `tokenizer` and `chat` build the prompt the way evaluation and RL do (pass the policy's tokenizer:
    without it the prompt is the plain, template-free one). `rollout` (the run's RolloutConfig) gives the documents
    per search (`top_k`, default 3) and the search budget (`max_searches`, default: no limit). Rows are skipped when
    their metadata records no hops, when they need more searches than the budget, or when any hop's answer is
    missing from the retrieved documents.
    """
    top_k = rollout.top_k if rollout is not None else 3
    max_searches = rollout.max_searches if rollout is not None else None
    rows = check_rows(rows, "templated_trajectories")
    skipped: Counter = Counter()
    plans: list[tuple[Mapping, list[Hop], random.Random]] = []
    for row in rows:
        hops = hop_plan(row)
        if hops is None or any(h.key not in QUERY_FORMS for h in hops):
            skipped["no hop plan (not a synthetic-world row?)"] += 1
        elif max_searches is not None and len(hops) > max_searches:
            skipped[f"needs more than {max_searches} searches"] += 1
        else:
            # One generator per row, seeded by the row's id: wording does not depend on which other rows are given.
            plans.append((row, hops, random.Random(f"{seed}:{row.get('id', row['question'])}")))
    queries = [rng.choice(QUERY_FORMS[h.key]).format(s=h.subject) for _, hops, rng in plans for h in hops]
    results = iter(retriever.search(queries, top_k) if queries else [])
    query_iter = iter(queries)

    items = []
    for row, hops, rng in plans:
        hop_docs = [(next(query_iter), next(results)) for _ in hops]
        if not all(any(_mentions(d.as_text(), h.answer) for d in docs) for h, (_, docs) in zip(hops, hop_docs)):
            skipped["a hop's answer is not in the retrieved documents"] += 1
            continue
        gold = str(row["golden_answers"][0])
        steps: list = []
        previous: Hop | None = None
        for i, (hop, (query, docs)) in enumerate(zip(hops, hop_docs)):
            noun = RELATION_NOUNS[hop.key]
            thought = rng.choice(FIRST_THOUGHTS if i == 0 else NEXT_THOUGHTS).format(noun=noun, s=hop.subject)
            if previous is not None:
                thought = _reading(rng, previous) + " " + thought
            steps += [Think(thought), Search(query, list(docs))]
            previous = hop
        reasoning = _reading(rng, previous) + " " + _conclusion(row, hops, gold)
        evidence = [s for s in (_evidence_sentence(docs, h) for h, (_, docs) in zip(hops, hop_docs)) if s]
        steps.append(Finish(reasoning, gold, list(dict.fromkeys(evidence))))
        segments = protocol.render(steps)
        parsed = protocol.parse("".join(text for text, _ in segments))
        if not parsed.format_ok or parsed.answer is None:
            raise ValueError(f"templated_trajectories wrote an invalid trajectory for protocol {protocol.name!r} "
                             f"(row {row.get('id')}); check that protocol's render_* methods against its parse()")
        items.append({
            "id": row.get("id", ""),
            "question": row["question"],
            "golden_answers": list(row["golden_answers"]),
            "qtype": str((row.get("metadata") or {}).get("type", "unknown")),
            "hops": len(hops),
            "prompt": protocol.build_prompt(row["question"], tokenizer, chat=chat),
            "segments": segments,
            "queries": [q for q, _ in hop_docs],
            "doc_ids": [[d.id for d in docs] for _, docs in hop_docs],
        })
    if skipped:
        logger.info("templated_trajectories: kept %d of %d rows; skipped %s", len(items), len(rows), dict(skipped))
    if not items:
        raise ValueError(f"templated_trajectories kept none of the {len(rows)} rows: {dict(skipped)}. Use rows of "
                         "the synthetic world (searchrl.data.synthetic) and a retriever over its corpus, or a larger "
                         "top_k.")
    return items


def _reading(rng: random.Random, hop: Hop) -> str:
    return rng.choice(READINGS).format(noun=RELATION_NOUNS[hop.key], s=hop.subject, a=hop.answer)


__all__ = ["QUERY_FORMS", "RELATION_NOUNS", "Hop", "hop_plan", "templated_trajectories"]
