"""`make_world`: the synthetic world (corpus + question splits), and saving / loading it as jsonl."""

from __future__ import annotations

import hashlib
import itertools
import json
import random
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from searchrl.config.knowledge import KnowledgeConfig
from searchrl.config.names import SPLITS
from searchrl.data.schema import Doc, QARow
from searchrl.data.synthetic.entities import Entity, build_entities
from searchrl.data.synthetic.knowledge import internal_facts, knowledge_config
from searchrl.data.synthetic.passages import template_vocabulary, write_corpus
from searchrl.data.synthetic.questions import QUESTION_TYPES, QuestionWriter

DEFAULT_FRACTIONS = {"train": 0.75, "dev": 0.125, "test": 0.125}
_PROGRESS_FROM = 50_000  # passages; smaller worlds build in about a second and need no progress bar


@dataclass
class World:
    """A fictional corpus with question splits whose answers it states.

    `corpus`: the passages. `splits`: "train", "dev", "test" -> rows (no question text is in two splits).
    `entities`: the facts behind it all (each `Entity.fact_docs` says which passage states which fact).
    `config`: the arguments of `make_world` that built it.
    """

    corpus: list[Doc]
    splits: dict[str, list[QARow]]
    entities: list[Entity]
    config: dict[str, Any] = field(default_factory=dict)

    def questions(self, split: str = "train", types: list[str] | tuple[str, ...] | str | None = None,
                  limit: int | None = None) -> list[QARow]:
        """Rows of `split`, optionally only of some `types` (see `QUESTION_TYPES`) and at most `limit` of them."""
        if split not in self.splits:
            raise ValueError(f"unknown split {split!r}; this world has {', '.join(self.splits)}")
        wanted = [types] if isinstance(types, str) else types
        if wanted is not None:
            unknown = sorted(set(wanted) - set(QUESTION_TYPES))
            if unknown:
                raise ValueError(f"unknown question type(s) {unknown}; choose from {', '.join(QUESTION_TYPES)}")
        rows = [r for r in self.splits[split] if wanted is None or r["metadata"]["type"] in wanted]
        return rows if limit is None else rows[:limit]

    def internal_facts(self) -> frozenset[str]:
        """The facts of this world's knowledge split the model is taught ("<entity id>.<key>"; see `knowledge.py`).
        Empty for a world built without a split."""
        return internal_facts(self.entities, float(self.config.get("knowledge_internal_frac", 0.0)),
                              int(self.config.get("seed", 0)))

    def doc(self, doc_id: str) -> Doc:
        """The passage with id `doc_id` (KeyError naming it when there is none)."""
        index = self.__dict__.get("_doc_index")
        if index is None:
            index = self.__dict__["_doc_index"] = {d.id: d for d in self.corpus}
        if doc_id not in index:
            raise KeyError(f"no passage with id {doc_id!r} in this world")
        return index[doc_id]

    def stats(self) -> dict[str, Any]:
        """Sizes: passages, mean words per passage, entities per kind, questions per split, type and hop count (and
        knowledge label, in a world with a knowledge split)."""
        words = sum(len(d.text.split()) for d in self.corpus)
        return {
            "passages": len(self.corpus),
            "mean_words_per_passage": round(words / max(1, len(self.corpus)), 1),
            "entities": dict(Counter(e.kind for e in self.entities)),
            "questions": {split: len(rows) for split, rows in self.splits.items()},
            "questions_by_type": {
                split: dict(Counter(r["metadata"]["type"] for r in rows)) for split, rows in self.splits.items()
            },
            "questions_by_hops": {
                split: dict(sorted(Counter(r["metadata"]["hops"] for r in rows).items()))
                for split, rows in self.splits.items()
            },
            **({"questions_by_knowledge": {
                split: dict(Counter(r["metadata"]["knowledge"] for r in rows)) for split, rows in self.splits.items()
            }} if self.config.get("knowledge_internal_frac") else {}),
        }

    # -- persistence ----------------------------------------------------------------------------------------

    def save(self, directory: str | Path) -> Path:
        """Write corpus.jsonl, {train,dev,test}.jsonl, entities.jsonl and config.json into `directory`."""
        out = Path(directory)
        out.mkdir(parents=True, exist_ok=True)
        _write_jsonl(out / "corpus.jsonl", (asdict(d) for d in self.corpus))
        for split, rows in self.splits.items():
            _write_jsonl(out / f"{split}.jsonl", rows)
        _write_jsonl(out / "entities.jsonl", (asdict(e) for e in self.entities))
        (out / "config.json").write_text(json.dumps(self.config, indent=1, sort_keys=True) + "\n")
        return out

    @classmethod
    def load(cls, directory: str | Path) -> World:
        """Read a world written by `save`."""
        src = Path(directory)
        missing = [n for n in ("corpus.jsonl", "entities.jsonl", "config.json") if not (src / n).exists()]
        if missing:
            raise FileNotFoundError(f"{src} is not a saved world: missing {', '.join(missing)}")
        corpus = [Doc(**d) for d in _read_jsonl(src / "corpus.jsonl")]
        splits = {s: list(_read_jsonl(src / f"{s}.jsonl")) for s in SPLITS if (src / f"{s}.jsonl").exists()}
        entities = [Entity(**e) for e in _read_jsonl(src / "entities.jsonl")]
        return cls(corpus, splits, entities, json.loads((src / "config.json").read_text()))

    def fingerprint(self) -> str:
        """SHA-256 of the world's full serialised content: equal fingerprints mean identical worlds."""
        digest = hashlib.sha256()
        digest.update(json.dumps(self.config, sort_keys=True).encode())
        for d in self.corpus:
            digest.update(json.dumps(asdict(d), ensure_ascii=False).encode())
        for split in sorted(self.splits):
            for row in self.splits[split]:
                digest.update(json.dumps(row, ensure_ascii=False, sort_keys=True).encode())
        for e in self.entities:
            digest.update(json.dumps(asdict(e), ensure_ascii=False, sort_keys=True).encode())
        return digest.hexdigest()


def world_of(cfg) -> World:
    """The synthetic world a run's settings describe (a `RunConfig`: world_seed, world_entities,
    world_passage_words and the knowledge split). Every place that rebuilds a run's world calls this, so that they
    all build the same one."""
    return make_world(seed=cfg.world_seed, n_entities=cfg.world_entities, words_per_passage=cfg.world_passage_words,
                      knowledge=cfg)


def make_world(
    seed: int = 0,
    n_entities: int = 300,
    passages_per_entity: int = 3,
    *,
    n_questions_per_type: int = 400,
    split_fractions: dict[str, float] | None = None,
    types: tuple[str, ...] | list[str] = QUESTION_TYPES,
    words_per_passage: int = 100,
    progress: bool | None = None,
    knowledge: KnowledgeConfig | None = None,
) -> World:
    """Build a fictional world: `n_entities` entities, `passages_per_entity` passages each, and questions.

    `n_questions_per_type` questions of each of `types` are drawn, then shared out over train/dev/test by
    `split_fractions` (default 0.75/0.125/0.125). The same arguments always give the identical world.
    Sizes: the default (300 entities, ~900 passages, 300/50/50 questions per type) builds in well under a
    second; n_entities=33_000 gives ~100k passages, 333_000 about a million (minutes).

    `knowledge` (a `KnowledgeConfig`, or a RunConfig, which inherits it) splits the facts into internal and external
    ones (`knowledge.py`) and labels every question; it changes nothing else, and its default (fraction 0) builds
    the world exactly as before, without labels.
    """
    fractions = dict(DEFAULT_FRACTIONS if split_fractions is None else split_fractions)
    _check_arguments(n_entities, passages_per_entity, n_questions_per_type, fractions, types, words_per_passage)
    if progress is None:
        progress = n_entities * passages_per_entity >= _PROGRESS_FROM
    # Two generators from one seed: numpy draws the bulk attributes, `random` the per-sentence choices.
    np_rng = np.random.default_rng(seed)
    text_rng = random.Random(seed)
    entities = build_entities(np_rng, n_entities, forbidden_words=template_vocabulary())
    corpus = write_corpus(text_rng, entities, passages_per_entity, words_per_passage, progress=progress)
    frac = knowledge_config(knowledge).knowledge_internal_frac
    internal = internal_facts(entities, frac, seed) if frac > 0 else None
    writer = QuestionWriter(entities, random.Random(seed + 1), internal)
    splits: dict[str, list[QARow]] = {split: [] for split in fractions}
    for qtype in types:
        rows = writer.write(qtype, n_questions_per_type)
        for split, part in zip(fractions, _cut(rows, list(fractions.values()))):
            splits[split].extend(part)
    config = {
        "seed": seed,
        "n_entities": n_entities,
        "passages_per_entity": passages_per_entity,
        "n_questions_per_type": n_questions_per_type,
        "split_fractions": fractions,
        "types": list(types),
        "words_per_passage": words_per_passage,
    }
    if frac > 0:  # recorded only when set, so a world without a split keeps its config (and fingerprint) as before
        config["knowledge_internal_frac"] = frac
    return World(corpus, splits, entities, config)


def _cut(rows: list[QARow], fractions: list[float]) -> list[list[QARow]]:
    """Consecutive slices of `rows` in proportion to `fractions` (rows are already in random order)."""
    total = sum(fractions)
    bounds, acc = [0], 0.0
    for f in fractions:
        acc += f
        bounds.append(round(len(rows) * acc / total))
    return [rows[a:b] for a, b in itertools.pairwise(bounds)]


def _check_arguments(n_entities, passages_per_entity, n_questions, fractions, types, words) -> None:
    if passages_per_entity < 1:
        raise ValueError(f"passages_per_entity must be >= 1, got {passages_per_entity}")
    if n_questions < 0:
        raise ValueError(f"n_questions_per_type must be >= 0, got {n_questions}")
    if words < 10:
        raise ValueError(f"words_per_passage must be >= 10, got {words}")
    if not fractions or any(f < 0 for f in fractions.values()) or sum(fractions.values()) <= 0:
        raise ValueError(f"split_fractions must be non-negative with a positive sum, got {fractions}")
    unknown = sorted(set(types) - set(QUESTION_TYPES))
    if unknown:
        raise ValueError(f"unknown question type(s) {unknown}; choose from {', '.join(QUESTION_TYPES)}")
    if n_entities < 30:
        raise ValueError(f"n_entities={n_entities} is too small for a world with families and works; use >= 30")


def _write_jsonl(path: Path, records) -> None:
    with path.open("w", encoding="utf-8") as f:
        for record in records:
            f.write(json.dumps(record, ensure_ascii=False) + "\n")


def _read_jsonl(path: Path):
    with path.open(encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            if line.strip():
                try:
                    yield json.loads(line)
                except json.JSONDecodeError as err:
                    raise ValueError(f"{path}, line {number}: not valid JSON ({err.msg})") from None
