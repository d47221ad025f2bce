"""The names `dataset:` and `corpus:` accept besides paths: the entries of the data catalogue (searchrl.data.catalog),
as plain data so the schema checks them without importing the data layer. A test asserts these tuples equal the
catalogue's names. Whether a named entry is present is the data layer's to say, when the run loads its data."""

from __future__ import annotations

import difflib
from pathlib import Path

__all__ = ["CORPUS_NAMES", "DATASET_NAMES", "INDEX_NAMES", "SYNTHETIC", "data_setting_problem", "looks_like_path"]

SYNTHETIC = "synthetic"
DATASET_NAMES = ("flashrag-2wikimultihopqa", "flashrag-bamboogle", "flashrag-hotpotqa", "flashrag-musique",
                 "flashrag-nq", "flashrag-popqa", "flashrag-triviaqa", "hotpotqa-distractor", "ircot-2wiki",
                 "nq_hotpotqa_train", "r1searcher-stage1", "r1searcher-stage2")
CORPUS_NAMES = ("hotpotqa-pool", "ircot-2wiki-corpus", "kilt-2019", "wiki-18")
INDEX_NAMES = ("wiki-18-e5-index",)


def looks_like_path(value: str) -> bool:
    """A value with a folder separator, a file suffix or a leading ~ is a path; anything else is meant as a name."""
    return "/" in value or "\\" in value or value.startswith("~") or bool(Path(value).suffix)


# The catalogue kind each setting takes: questions (dataset, and stage 1's own file), passages, a faiss index.
_NAMES_OF = {"dataset": (SYNTHETIC, *DATASET_NAMES), "stage1_dataset": DATASET_NAMES, "corpus": CORPUS_NAMES,
             "retriever_index": INDEX_NAMES}


def data_setting_problem(setting: str, value: str) -> str | None:
    """What is wrong with `value` for `setting` (dataset, stage1_dataset, corpus or retriever_index), or None: a path
    must exist, a name must be a catalogue entry of the right kind (with the nearest name for a typo)."""
    if looks_like_path(value):
        if not Path(value).expanduser().exists():
            return f"{setting}: no such file {value!r} (relative paths start at {Path.cwd()})"
        return None
    names = _NAMES_OF[setting]
    if value in names:
        return None
    other = tuple(name for name in DATASET_NAMES + CORPUS_NAMES + INDEX_NAMES if name not in names)
    if value in other:
        return f"{setting}: {value!r} is a catalogue entry of another kind; {setting} takes one of {', '.join(names)}"
    close = difflib.get_close_matches(value, names, n=1)
    hint = f"did you mean {close[0]!r}? " if close else ""
    return (f"{setting}: {value!r} is neither a file nor a data catalogue name; {hint}names: {', '.join(names)} "
            f"(`searchrl data list`)")
