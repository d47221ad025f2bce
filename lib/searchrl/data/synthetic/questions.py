"""Questions over the synthetic world, in the benchmark types of the papers.

- single_hop: one fact (NQ / PopQA-like): "Where was Velora Kastin born?"
- bridge: a chain of 2-4 facts (HotpotQA bridge, 2Wiki compositional, MuSiQue-like depth):
  "In which country is the city where the director of the film Return to Kastor was born?"
- comparison: two entities' years (HotpotQA comparison): "Who was born first, A or B?"
- inference: a named two-step family relation (2WikiMultiHopQA): "Who is the paternal grandfather of A?"
- bridge_comparison: compare the birth years of two works' makers (2WikiMultiHopQA):
  "Which film has the director who was born later, X or Y?"

Every row records `type`, `hops`, `supporting_ids` (the passages that state the facts of the answer chain),
`hop_answers` (the answer of each hop, in order), `hop_subjects` and `hop_keys` (whose fact each hop looks up: the
cold-start templates write their queries from these) and, for the two comparison types, `choices`. In a world with a
knowledge split (`knowledge.py`) rows also record `hop_knowledge` (per hop: "internal" or "external") and
`knowledge` ("internal", "external" or "mixed").
Questions are sampled (not enumerated) so that a world of a million passages costs no more than a small one.
"""

from __future__ import annotations

import random
import re

from searchrl.data.schema import QARow, make_row
from searchrl.data.synthetic.entities import RELATIONS, YEAR_FACTS, Entity
from searchrl.data.synthetic.knowledge import EXTERNAL, INTERNAL, fact_id, row_knowledge

QUESTION_TYPES = ("single_hop", "bridge", "comparison", "inference", "bridge_comparison")

# The last hop of a chain: how to ask for fact `key` of the entity described by noun phrase {np}.
ASK: dict[str, dict[str, str]] = {
    "person": {
        "birth_year": "In what year was {np} born?",
        "birthplace": "Where was {np} born?",
        "occupation": "What did {np} work as?",
        "father": "Who was the father of {np}?",
        "mother": "Who was the mother of {np}?",
        "spouse": "Who was {np} married to?",
    },
    "film": {
        "director": "Who directed {np}?",
        "release_year": "In what year was {np} released?",
        "filmed_in": "Where was {np} filmed?",
    },
    "book": {
        "author": "Who wrote {np}?",
        "publication_year": "In what year was {np} published?",
        "set_in": "Where is {np} set?",
    },
    "organisation": {
        "founder": "Who founded {np}?",
        "founded_year": "In what year was {np} founded?",
        "headquarters": "Where is {np} headquartered?",
    },
    "city": {
        "country": "In which country is {np}?",
        "founded_year": "In what year was {np} founded?",
    },
    "country": {"capital": "What is the capital of {np}?"},
}

# An inner hop: the noun phrase for the entity that relation `key` of {np} points to.
DESCRIBE: dict[str, dict[str, str]] = {
    "person": {
        "father": "the father of {np}",
        "mother": "the mother of {np}",
        "spouse": "the spouse of {np}",
        "birthplace": "the city where {np} was born",
    },
    "film": {"director": "the director of {np}", "filmed_in": "the city where {np} was filmed"},
    "book": {"author": "the author of {np}", "set_in": "the city where {np} is set"},
    "organisation": {"founder": "the founder of {np}", "headquarters": "the city where {np} is headquartered"},
    "city": {"country": "the country of {np}"},
    "country": {"capital": "the capital of {np}"},
}

# 2WikiMultiHopQA "inference": a named relation that composes two family facts.
INFERENCE: dict[str, tuple[str, str]] = {
    "paternal grandfather": ("father", "father"),
    "paternal grandmother": ("father", "mother"),
    "maternal grandfather": ("mother", "father"),
    "maternal grandmother": ("mother", "mother"),
    "father-in-law": ("spouse", "father"),
    "mother-in-law": ("spouse", "mother"),
}

# Comparison wording per kind: (earlier, later).
COMPARE: dict[str, tuple[str, str]] = {
    "person": ("Who was born first, {a} or {b}?", "Who was born later, {a} or {b}?"),
    "film": ("Which film came out first, {a} or {b}?", "Which film was released later, {a} or {b}?"),
    "book": ("Which book was published first, {a} or {b}?", "Which book was published later, {a} or {b}?"),
    "organisation": ("Which was founded first, {a} or {b}?", "Which was founded later, {a} or {b}?"),
    "city": ("Which city was founded first, {a} or {b}?", "Which city was founded later, {a} or {b}?"),
}
# Bridge-comparison: the maker relation of each kind and its wording (earlier, later).
MAKER_COMPARE: dict[str, tuple[str, tuple[str, str]]] = {
    "film": ("director", ("Which film has the director born first, {a} or {b}?",
                          "Which film has the director who was born later, {a} or {b}?")),
    "book": ("author", ("Which book has the author born first, {a} or {b}?",
                        "Which book has the author who was born later, {a} or {b}?")),
    "organisation": ("founder", ("Which {cat} has the founder born first, {a} or {b}?",
                                 "Which {cat} has the founder who was born later, {a} or {b}?")),
}
BRIDGE_HOPS = {2: 0.5, 3: 0.3, 4: 0.2}  # share of bridge questions by number of hops
_PATIENCE = 300  # consecutive failed draws after which a type is taken to be exhausted


class QuestionWriter:
    """Samples questions of each type from a world's entities.

    `internal`: the facts the model is taught (`knowledge.internal_facts`); when given, every row is labelled with
    its hops' knowledge. None (no split) writes the rows without labels. The labels never change which questions
    are drawn.
    """

    def __init__(self, entities: list[Entity], rng: random.Random, internal: frozenset[str] | None = None):
        self.rng = rng
        self.internal = internal
        self.by_id = {e.id: e for e in entities}
        self.by_kind: dict[str, list[Entity]] = {}
        for e in entities:
            self.by_kind.setdefault(e.kind, []).append(e)
        self.everything = entities
        self.seen: set[str] = set()  # question texts already written: no duplicates, hence disjoint splits

    def write(self, qtype: str, n: int) -> list[QARow]:
        """Up to `n` distinct questions of `qtype` (fewer only when the world is too small to hold more)."""
        if qtype not in QUESTION_TYPES:
            raise ValueError(f"unknown question type {qtype!r}; choose from {', '.join(QUESTION_TYPES)}")
        sample = getattr(self, f"_{qtype}")
        rows: list[QARow] = []
        misses = 0  # failed draws since the last new question: many in a row mean the world holds no more
        while len(rows) < n and misses < _PATIENCE:
            row = sample(f"{qtype}-{len(rows):05d}")
            if row is None or row["question"] in self.seen:
                misses += 1
                continue
            misses = 0
            self.seen.add(row["question"])
            rows.append(row)
        return rows

    # -- helpers -------------------------------------------------------------------------------------------

    def _name(self, entity_id: str) -> str:
        return self.by_id[entity_id].name

    @staticmethod
    def _phrase(entity: Entity) -> str:
        """How a question first names an entity: works get "the film"/"the book" as in 2WikiMultiHopQA."""
        return f"the {entity.kind} {entity.name}" if entity.kind in ("film", "book") else entity.name

    def _row(self, row_id: str, question: str, answer: str, qtype: str, chain: list[tuple[Entity, str]],
             **extra) -> QARow | None:
        """A row for `question`, whose answer chain is the list of (entity, fact key) it reads in order."""
        hop_answers = [self._value(e, k) for e, k in chain]
        supporting = list(dict.fromkeys(e.fact_docs[k] for e, k in chain))
        if qtype not in ("comparison", "bridge_comparison") and _mentions(question, answer):
            return None  # a question that spells out its own answer teaches nothing
        if self.internal is not None:
            hop_knowledge = [INTERNAL if fact_id(e, k) in self.internal else EXTERNAL for e, k in chain]
            extra.update(hop_knowledge=hop_knowledge, knowledge=row_knowledge(hop_knowledge))
        return make_row(row_id, question, [answer], type=qtype, hops=len(chain), supporting_ids=supporting,
                        hop_answers=hop_answers, hop_subjects=[e.name for e, _ in chain],
                        hop_keys=[k for _, k in chain], source="synthetic", **extra)

    def _value(self, entity: Entity, key: str) -> str:
        value = entity.facts[key]
        return self._name(value) if entity.target(key) else value

    # -- the five types -----------------------------------------------------------------------------------

    def _single_hop(self, row_id: str) -> QARow | None:
        entity = self.rng.choice(self.everything)
        key = self.rng.choice([k for k in ASK[entity.kind] if k in entity.facts])
        question = ASK[entity.kind][key].format(np=self._phrase(entity))
        return self._row(row_id, _capitalise(question), self._value(entity, key), "single_hop", [(entity, key)],
                         template=f"{entity.kind}.{key}")

    def _bridge(self, row_id: str) -> QARow | None:
        hops = self.rng.choices(list(BRIDGE_HOPS), weights=list(BRIDGE_HOPS.values()))[0]
        entity = self.rng.choice(self.everything)
        visited = {entity.id}
        np, chain = self._phrase(entity), []
        previous = None
        for _ in range(hops - 1):  # inner hops follow relations to other entities
            keys = [k for k in DESCRIBE[entity.kind] if entity.facts.get(k) not in (None, *visited)
                    and not _shortcut(previous, k)]
            if not keys:
                return None
            key = previous = self.rng.choice(keys)
            chain.append((entity, key))
            np = DESCRIBE[entity.kind][key].format(np=np)
            entity = self.by_id[entity.facts[key]]
            visited.add(entity.id)
        keys = [k for k in ASK[entity.kind] if k in entity.facts and entity.facts[k] not in visited
                and not _shortcut(previous, k)]
        if not keys:
            return None
        key = self.rng.choice(keys)
        chain.append((entity, key))
        question = _capitalise(ASK[entity.kind][key].format(np=np))
        template = ">".join(f"{e.kind}.{k}" for e, k in chain)
        return self._row(row_id, question, self._value(entity, key), "bridge", chain, template=template)

    def _comparison(self, row_id: str) -> QARow | None:
        kind = self.rng.choice(list(COMPARE))
        a, b = self.rng.sample(self.by_kind[kind], 2)
        key = YEAR_FACTS[kind]
        ya, yb = int(a.facts[key]), int(b.facts[key])
        if ya == yb:
            return None
        later = self.rng.random() < 0.5
        answer = (a if ya > yb else b) if later else (a if ya < yb else b)
        question = COMPARE[kind][later].format(a=a.name, b=b.name)
        return self._row(row_id, question, answer.name, "comparison", [(a, key), (b, key)],
                         choices=[a.name, b.name], template=f"{kind}.{key}.{'later' if later else 'first'}")

    def _inference(self, row_id: str) -> QARow | None:
        person = self.rng.choice(self.by_kind["person"])
        relation = self.rng.choice(list(INFERENCE))
        first, second = INFERENCE[relation]
        middle_id = person.facts.get(first)
        if middle_id is None or second not in self.by_id[middle_id].facts:
            return None
        middle = self.by_id[middle_id]
        question = f"Who is the {relation} of {person.name}?"
        return self._row(row_id, question, self._value(middle, second), "inference",
                         [(person, first), (middle, second)], relation=relation)

    def _bridge_comparison(self, row_id: str) -> QARow | None:
        kind = self.rng.choice(list(MAKER_COMPARE))
        maker_key, wording = MAKER_COMPARE[kind]
        a = self.rng.choice(self.by_kind[kind])
        # Organisations are compared within one category so the question can say "Which university ...".
        pool = [e for e in self.by_kind[kind] if e.category == a.category] if kind == "organisation" else None
        b = self.rng.choice(pool or self.by_kind[kind])
        if a.id == b.id:
            return None
        ma, mb = self.by_id[a.facts[maker_key]], self.by_id[b.facts[maker_key]]
        ya, yb = int(ma.facts["birth_year"]), int(mb.facts["birth_year"])
        if ma.id == mb.id or ya == yb:
            return None
        later = self.rng.random() < 0.5
        answer = (a if ya > yb else b) if later else (a if ya < yb else b)
        question = wording[later].format(a=a.name, b=b.name, cat=a.category)
        chain = [(a, maker_key), (ma, "birth_year"), (b, maker_key), (mb, "birth_year")]
        return self._row(row_id, question, answer.name, "bridge_comparison", chain, choices=[a.name, b.name],
                         template=f"{kind}.{maker_key}.birth_year.{'later' if later else 'first'}")


def _shortcut(previous: str | None, key: str) -> bool:
    """Whether hop `key` after hop `previous` has a one-fact shortcut: a parent's spouse is the other parent,
    which the child's own passage already names."""
    return key == "spouse" and previous in ("father", "mother")


def _mentions(text: str, phrase: str) -> bool:
    """Whether `phrase` occurs in `text` as whole words, ignoring case."""
    return re.search(rf"(?<!\w){re.escape(phrase.lower())}(?!\w)", text.lower()) is not None


def _capitalise(sentence: str) -> str:
    return sentence[:1].upper() + sentence[1:]


# Kinds that relations point into, checked at import so a typo in the tables fails loudly.
assert all(k in RELATIONS[kind] for kind, d in DESCRIBE.items() for k in d), "DESCRIBE uses a non-relation key"
