"""Cold-start trajectories written from the synthetic world's answer chains, in any protocol's format.

Each hop of a question gets a short thought, a natural query, the REAL retriever's documents for that query and a
one-line reading of them; then the answer. The hops come from the row's metadata (`hop_subjects`, `hop_keys`,
`hop_answers`, written by the question generator), and each protocol renders the steps in its own tags
(`protocol.render`). A row is kept only when every hop's answer is in what the retriever returned, so the cold
start never teaches the model to answer something the documents do not say.

In a world with a knowledge split (`knowledge.py`), a protocol with internal-answer tags (R1-Searcher++) answers
each hop about an internal fact from memory instead: a short thought and the fact in an internal-answer span, with
no search; only the external hops are searched (and checked against the documents). Protocols without such tags
search every hop, as before. `fact_statement_items` writes the plain statements that teach the internal facts.

    items = templated_trajectories(world.questions("train", "single_hop", limit=64), protocol, retriever,
                                   tokenizer=tokenizer)
"""

from __future__ import annotations

import itertools
import logging
import random
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from searchrl.config.knowledge import KnowledgeConfig
from searchrl.data.schema import Finish, Search, Think, check_rows
from searchrl.data.synthetic.knowledge import INTERNAL, knowledge_config

if TYPE_CHECKING:  # annotation only: the data layer imports nothing below it
    from searchrl.config.rollout import RolloutConfig
    from searchrl.data.synthetic.world import World

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Hop:
    """One fact to look up: the `key` fact of the entity named `subject`, whose value is `answer`. `known`: the fact
    is internal (the model is taught it), so a protocol with internal-answer tags recalls it instead of searching."""

    subject: str
    key: str
    answer: str
    known: bool = False


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

# The qtype of a cold-start item that states one taught fact (no question, no rollout): R1-Searcher++'s internal
# knowledge is taught through these, and code that counts or budgets trajectories skips them.
FACT_QTYPE = "fact"

FIRST_THOUGHTS = (
    "I need to find the {noun} of {s}.",
    "The question asks for the {noun} of {s}. I will search for it.",
    "To answer this, I should look up the {noun} of {s}.",
)
NEXT_THOUGHTS = (
    "Now I need the {noun} of {s}.",
    "Next, I will search for the {noun} of {s}.",
)
RECALL_THOUGHTS = (
    "I need the {noun} of {s}, and I already know it.",
    "The {noun} of {s} is something I know.",
    "I can answer the {noun} of {s} from memory.",
)
READINGS = (
    "The results say that the {noun} of {s} is {a}.",
    "According to the documents, the {noun} of {s} is {a}.",
    "From the retrieved passages, the {noun} of {s} is {a}.",
)


def hop_plan(row: Mapping) -> list[Hop] | None:
    """The facts a synthetic-world question needs, in reading order, or None for rows that do not record them.
    A hop is `known` when the row's `hop_knowledge` labels it internal."""
    meta = row.get("metadata") or {}
    subjects, keys, answers = (list(meta.get(name) or []) for name in ("hop_subjects", "hop_keys", "hop_answers"))
    if not subjects or not len(subjects) == len(keys) == len(answers):
        return None
    labels = list(meta.get("hop_knowledge") or [])
    if labels and len(labels) != len(subjects):
        raise ValueError(f"row {row.get('id')}: hop_knowledge has {len(labels)} labels for {len(subjects)} hops")
    known = [label == INTERNAL for label in labels] or [False] * len(subjects)
    return [Hop(str(s), str(k), str(a), bool(n)) for s, k, a, n in zip(subjects, keys, answers, known)]


def fact_sentence(hop: Hop) -> str:
    """The fact of one hop as a plain sentence: what an internal-answer span says, and what the cold start's fact
    statements teach ("The birthplace of Velora Kastin is Tamsek.")."""
    return f"The {RELATION_NOUNS[hop.key]} of {hop.subject} is {hop.answer}."


def recalls_internally(protocol) -> bool:
    """Whether `protocol` has internal-answer tags (R1-Searcher++), so internal hops are answered from memory."""
    return bool(getattr(protocol, "internal_open", None) and getattr(protocol, "internal_close", None))


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


COUNT_WORDS = ("no", "one", "two", "three", "four", "five", "six")


def plan_sentence(hops: Sequence[Hop]) -> str:
    """The question's facts in reading order, counted first: "This needs two facts: the mother of X, then the father
    of that mother." A later hop about an earlier hop's answer names it by that hop's relation.

    Why a plan: whether to search again after the first documents is the judgement RL is asked to learn, and at that
    point it rests on comparing the fact just read with the question. Stated at the start, right after the
    question, the count is a choice about the question alone, and searching again later only has to follow it.
    """
    parts = [f"the {RELATION_NOUNS[hops[0].key]} of {hops[0].subject}"]
    for before, hop in itertools.pairwise(hops):
        whose = f"that {RELATION_NOUNS[before.key]}" if hop.subject == before.answer else hop.subject
        parts.append(f"then the {RELATION_NOUNS[hop.key]} of {whose}")
    count = COUNT_WORDS[len(hops)] if len(hops) < len(COUNT_WORDS) else str(len(hops))
    return f"This needs {count} fact{'s' if len(hops) != 1 else ''}: {', '.join(parts)}."


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
    plan: bool = False,
) -> list[dict[str, Any]]:
    """Cold-start trajectories in `protocol`'s format (a `SearchProtocol`), one per usable synthetic-world row.

    Each item: {"prompt": text, "segments": [(text, trainable), ...], "id", "question", "golden_answers", "qtype",
    "hops", "queries", "doc_ids", "internal_hops"}. Observation segments (exactly the text the rollout engine appends) are not
    trainable. `tokenizer` and `chat` build the prompt the way evaluation and RL do (pass the policy's tokenizer:
    without it the prompt is the plain, template-free one). `rollout` (the run's RolloutConfig) gives the documents
    per search (`top_k`, default 3) and the search budget (`max_searches`, default: no limit). Rows are skipped when
    their metadata records no hops, when they need more searches than the budget, or when no retrieved sentence
    states a searched hop's fact (names both its subject and its answer). With a protocol that has internal-answer
    tags, the hops a row labels internal (`hop_knowledge`, from a world with a knowledge split) are recalled in an
    internal-answer span holding `fact_sentence(hop)` instead of searched; they count against no budget and need no
    documents. With `plan`, the first thought states how many facts the question needs and which (`plan_sentence`)
    instead of naming only the first one; the rest of the wording is unchanged.
    """
    top_k = rollout.top_k if rollout is not None else 3
    max_searches = rollout.max_searches if rollout is not None else None
    rows = check_rows(rows, "templated_trajectories")
    skipped: Counter = Counter()
    plans: list[tuple[Mapping, list[Hop], random.Random]] = []
    recall = recalls_internally(protocol)
    for row in rows:
        hops = hop_plan(row)
        if hops is None or any(h.key not in QUERY_FORMS for h in hops):
            skipped["no hop plan (not a synthetic-world row?)"] += 1
        elif max_searches is not None and sum(not (recall and h.known) for h in hops) > max_searches:
            skipped[f"needs more than {max_searches} searches"] += 1
        else:
            # One generator per row, seeded by the row's id: wording does not depend on which other rows are given.
            plans.append((row, hops, random.Random(f"{seed}:{row.get('id', row['question'])}")))
    # Per row, the positions of the hops it searches (all of them unless the protocol recalls internal ones).
    searched = [[i for i, h in enumerate(hops) if not (recall and h.known)] for _, hops, _ in plans]
    queries = [rng.choice(QUERY_FORMS[hops[i].key]).format(s=hops[i].subject)
               for (_, hops, rng), positions in zip(plans, searched) for i in positions]
    results = iter(retriever.search(queries, top_k) if queries else [])
    query_iter = iter(queries)

    items = []
    for (row, hops, rng), positions in zip(plans, searched):
        found = {i: (next(query_iter), next(results)) for i in positions}  # hop position -> (query, docs)
        # A document that names the answer is not enough: "Vreharn is located in Sikeleirnova" names the country of
        # Kabrurn without stating it. Keep the row only when a retrieved sentence states each searched hop's fact
        # (its subject and answer together), which is also what the evidence box of R-Search quotes.
        if not all(_evidence_sentence(docs, hops[i]) for i, (_, docs) in found.items()):
            skipped["a hop's fact is not stated in the retrieved documents"] += 1
            continue
        gold = str(row["golden_answers"][0])
        steps: list = []
        previous: Hop | None = None  # the last searched hop whose documents are not read out yet
        for i, hop in enumerate(hops):
            noun = RELATION_NOUNS[hop.key]
            # The thought is drawn before the reading of the previous hop: the order the wording has always used.
            thoughts = FIRST_THOUGHTS if i == 0 else NEXT_THOUGHTS
            thought = rng.choice(thoughts if i in found else RECALL_THOUGHTS).format(noun=noun, s=hop.subject)
            if plan and i == 0:  # drawn above all the same, so the rest of the wording does not move with `plan`
                thought = plan_sentence(hops)
            if previous is not None:
                thought = _reading(rng, previous) + " " + thought
            if i in found:
                query, docs = found[i]
                steps += [Think(thought), Search(query, list(docs))]
                previous = hop
            else:
                span = f"{protocol.internal_open}{fact_sentence(hop)}{protocol.internal_close}"
                steps.append(Think(f"{thought} {span}"))
                previous = None  # the span itself states the fact: nothing to read out
        lead = _reading(rng, previous) + " " if previous is not None else ""
        reasoning = lead + _conclusion(row, hops, gold)
        evidence = [s for s in (_evidence_sentence(docs, hops[i]) for i, (_, docs) in found.items()) if s]
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
            "queries": [query for query, _ in found.values()],
            "doc_ids": [[d.id for d in docs] for _, docs in found.values()],
            "internal_hops": len(hops) - len(found),
        })
    if skipped:
        logger.info("templated_trajectories: kept %d of %d rows; skipped %s", len(items), len(rows), dict(skipped))
    if not items:
        raise ValueError(f"templated_trajectories kept none of the {len(rows)} rows: {dict(skipped)}. Use rows of "
                         "the synthetic world (searchrl.data.synthetic) and a retriever over its corpus, or a larger "
                         "top_k.")
    return items


def fact_statement_items(world: World, knowledge: KnowledgeConfig | None = None, protocol=None
                         ) -> list[dict[str, Any]]:
    """Cold-start items that teach the internal facts of `world`: each internal fact's `fact_sentence`, stated
    `knowledge.sft_fact_repeats` times (a `KnowledgeConfig`, or a RunConfig, which inherits it). With a `protocol`
    that has internal-answer tags and `knowledge.sft_fact_in_span` (the default), each sentence is written inside
    them, exactly as a recall in a trajectory is: the model then learns the fact right after the tag that calls it
    up. Without it the sentence stands bare, and only the trajectories teach when to open the span.

    Each item has an empty prompt and one trainable segment (the sentence), so `tokenize_sft` takes it like a
    templated trajectory: a plain statement is a few dozen tokens where a trajectory with its prompt is hundreds,
    which makes stating every fact several times affordable. The sentence is the very one an internal-answer span
    of the templated trajectories writes, so what is memorised is what recall produces. Items come round by round
    (every fact once, then every fact again, ...), so cutting the list keeps every fact in. Empty when the world
    has no split or the repeats are 0.
    """
    knowledge = knowledge_config(knowledge)
    repeats = knowledge.sft_fact_repeats
    in_span = knowledge.sft_fact_in_span and protocol is not None and recalls_internally(protocol)
    wrap = (protocol.internal_open, protocol.internal_close) if in_span else ("", "")
    by_id = {e.id: e for e in world.entities}
    facts = sorted(world.internal_facts(), key=_fact_order(world))
    sentences = []
    for fact in facts:
        entity_id, key = fact.rsplit(".", 1)
        entity = by_id[entity_id]
        value = entity.facts[key]
        answer = by_id[value].name if entity.target(key) else value
        sentences.append((fact, fact_sentence(Hop(entity.name, key, answer, True)), answer))
    return [
        {"id": f"fact-{fact}-{r}", "question": "", "golden_answers": [answer], "qtype": FACT_QTYPE, "hops": 0,
         "prompt": "", "segments": [(f"{wrap[0]}{sentence}{wrap[1]}", True)], "queries": [], "doc_ids": [], "internal_hops": 1}
        for r in range(repeats) for fact, sentence, answer in sentences
    ]


def _fact_order(world: World):
    """Sort key putting facts in the world's entity order (stable, unlike the frozenset they come in)."""
    position = {e.id: i for i, e in enumerate(world.entities)}
    return lambda fact: (position[fact.rsplit(".", 1)[0]], fact)


def _reading(rng: random.Random, hop: Hop) -> str:
    return rng.choice(READINGS).format(noun=RELATION_NOUNS[hop.key], s=hop.subject, a=hop.answer)


__all__ = ["FACT_QTYPE", "QUERY_FORMS", "RELATION_NOUNS", "Hop", "fact_sentence", "fact_statement_items", "hop_plan",
           "recalls_internally", "templated_trajectories"]
