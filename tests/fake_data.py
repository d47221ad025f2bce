"""A fake data folder laid out as `searchrl data prepare` writes it: tiny raw files for every catalogue entry, each
put through its entry's own prepare step, so a test that resolves against it follows the real layout."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

from searchrl.data.catalog import CATALOG, DataEntry


def hotpot_row(i: int, split: str) -> dict:
    gold = [f"Gold {split} {i} a", f"Gold {split} {i} b"]
    context = [[t, [f"{t} was founded in {1900 + i}.", " It is a place."]] for t in gold]
    context += [[f"Other {split} {i} {k}", [f"Nothing about {k}."]] for k in range(3)]
    return {"_id": f"{split}-{i}", "question": f"When was Gold {split} {i} a founded?", "answer": str(1900 + i),
            "type": "bridge" if i % 2 else "comparison", "level": "medium",
            "supporting_facts": [[gold[0], 0], [gold[1], 0]], "context": context}


def _jsonl(path: Path, rows: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")


def _qa_rows(n: int = 4) -> list[dict]:
    return [{"id": str(i), "question": f"Question {i}?", "golden_answers": [f"answer {i}"]} for i in range(n)]


def _write_raw(e: DataEntry, raw: Path) -> None:
    raw.mkdir(parents=True, exist_ok=True)
    step = e.prepare
    if step == "move":
        for part in e.layout:
            _jsonl(raw / f"{part}.jsonl", _qa_rows())
    elif step == "json_to_jsonl":
        for f in e.files:
            split = Path(f.path).stem
            (raw / f.path).write_text(json.dumps([hotpot_row(i, split) for i in range(12)]), encoding="utf-8")
        # the test split exists only as a local copy (../shared/data), already in the prepared layout
        _jsonl(raw.parents[1] / e.layout["test"][0], [hotpot_row(i, "test") for i in range(12)])
    elif step == "gunzip":
        with gzip.open(raw / e.files[0].path, "wt", encoding="utf-8") as f:
            for i in range(3):
                f.write(json.dumps({"id": str(i), "contents": f'"Title {i}"\nPassage {i} text.'}) + "\n")
    elif step == "concatenate":
        for k, f in enumerate(e.files):
            (raw / f.path).write_bytes(bytes([k]) * 10)
    elif step == "search_r1_parquet":
        import pandas as pd

        for part in e.layout:
            pd.DataFrame([{"id": str(i), "question": f"q{i}?", "golden_answers": [f"a{i}"], "data_source": "nq",
                           "prompt": [{"role": "user", "content": f"... Question: q{i}?"}],
                           "reward_model": {"style": "rule", "ground_truth": {"target": [f"a{i}"]}}}
                          for i in range(3)]).to_parquet(raw / f"{part}.parquet")
    elif step == "kilt_passages":
        _jsonl(raw / e.files[0].path, [{"_id": "1", "wikipedia_id": "1", "wikipedia_title": "Paris",
                                        "text": ["Paris\n", "word " * 150, "Section::::History.\n", "more " * 30]}])
    elif step == "pool_raw":
        (raw / "train.json").write_text(json.dumps([hotpot_row(i, "wiki") for i in range(3)]), encoding="utf-8")
    elif step == "ircot":
        for part in e.layout:
            _jsonl(raw / f"{part}.jsonl", [{"question_id": str(i), "question_text": f"Who {i}?",
                                            "answers_objects": [{"spans": [f"person {i}"]}]} for i in range(3)])
    elif step != "pool_hotpotqa":  # built from another entry, no raw files
        raise AssertionError(f"no fake raw files for the prepare step {step!r} of {e.name}: add them here")


def build_fake_data(root: Path, monkeypatch) -> Path:
    """Every catalogue entry prepared in `root` from tiny raw files; only `root` is searched for data."""
    import searchrl.data.prepare as prepare_module
    from searchrl.data import catalog

    monkeypatch.setenv(catalog.DATA_ENV_VAR, str(root))
    monkeypatch.setattr(catalog, "data_dirs", lambda: [root])
    monkeypatch.setattr(prepare_module, "data_dirs", lambda: [root])
    entries = sorted(CATALOG.values(), key=lambda e: bool(e.needs))  # what others are built from comes first
    for e in entries:
        _write_raw(e, root / e.name / "raw")
        prepare_module.prepare(e.name, root)
    return root
