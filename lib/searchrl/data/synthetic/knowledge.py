"""The knowledge split: which facts of the synthetic world the model is taught to know, and which it must search.

R1-Searcher++'s claim is that a model should answer what it already knows from memory (an internal-answer span)
and search only for what it does not, spending fewer retrievals at equal or better accuracy. The synthetic world's
names are invented, so the model knows none of its facts to begin with; the split decides which ones the cold start
teaches it (`internal`) and which stay findable only by searching (`external`).

Design:
- The unit is one fact: the `key` fact of one entity, written "<entity id>.<key>" (see `fact_id`).
- Exactly `round(knowledge_internal_frac * number of facts)` facts are internal, drawn by a generator seeded from
  the world's seed alone, so the same world and fraction always give the same split.
- Every fact, internal or not, stays in the corpus, as in R1-Searcher++ (its internal facts are ones the model
  happens to know, not ones missing from the search engine). So searching for an internal fact still works, and
  a world built with any fraction has the same corpus and questions as one built with none: only the labels differ.
- Each question row of a split world records `hop_knowledge` (per hop: "internal" or "external") and `knowledge`:
  "internal" or "external" when all its hops agree, "mixed" otherwise.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Sequence
from typing import Any

from searchrl.config.knowledge import KnowledgeConfig
from searchrl.data.synthetic.entities import Entity

__all__ = ["KNOWLEDGE_LABELS", "all_facts", "fact_id", "internal_facts", "knowledge_config", "row_knowledge"]


INTERNAL, EXTERNAL, MIXED = "internal", "external", "mixed"
KNOWLEDGE_LABELS = (INTERNAL, EXTERNAL, MIXED)


def fact_id(entity: Entity | str, key: str) -> str:
    """The name of one fact: "<entity id>.<key>" (e.g. "person12.birthplace")."""
    return f"{entity.id if isinstance(entity, Entity) else entity}.{key}"


def all_facts(entities: Iterable[Entity]) -> list[str]:
    """Every fact of the world, in entity order and then in the order each entity records its facts."""
    return [fact_id(e, key) for e in entities for key in e.facts]


def internal_facts(entities: Sequence[Entity], frac: float, seed: int) -> frozenset[str]:
    """The facts the model is taught: exactly round(frac * number of facts) of them, the same for a given world
    (`entities`, from seed `seed`) and fraction. Empty when `frac` is 0."""
    if not 0.0 <= frac <= 1.0:
        raise ValueError(f"knowledge_internal_frac must be in [0, 1], got {frac!r}")
    facts = all_facts(entities)
    if frac == 0.0:
        return frozenset()
    # Its own generator, seeded by a string (stable across processes): the world's own draws are untouched.
    order = random.Random(f"knowledge-split:{seed}").sample(facts, len(facts))
    return frozenset(order[: round(frac * len(facts))])


def row_knowledge(hop_labels: Sequence[str]) -> str:
    """A question's label from its hops' labels: the shared one, or "mixed"."""
    labels = set(hop_labels)
    if not labels or not labels <= {INTERNAL, EXTERNAL}:
        raise ValueError(f"hop labels must be {INTERNAL!r} or {EXTERNAL!r}, got {list(hop_labels)}")
    return labels.pop() if len(labels) == 1 else MIXED


def knowledge_config(value: KnowledgeConfig | Any | None) -> KnowledgeConfig:
    """`value` as a KnowledgeConfig: itself (or a RunConfig, which inherits the fields), or the default for None."""
    if value is None:
        return KnowledgeConfig()
    if isinstance(value, KnowledgeConfig):
        return value
    raise TypeError(f"expected a KnowledgeConfig (or a RunConfig), got {type(value).__name__}")
