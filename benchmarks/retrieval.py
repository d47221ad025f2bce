"""Retrieval benchmark: build time, batched search throughput and recall of supporting passages.

Builds each retriever over a synthetic-world corpus of about `--passages` passages and searches with the test
questions themselves (one query per question, no reasoning). Recall@k is the share of a question's supporting
passages found in its top k; "all@k" is the share of questions whose supporting passages are all found.
Multi-hop questions name only their first hop, so single-shot recall is expected to be well below 1 for them:
that gap is what searching while reasoning is for.

    python benchmarks/retrieval.py --passages 10000 --k 5
    python benchmarks/retrieval.py --kinds bm25 --passages 100000 --k 3 10

Prints a table and writes outputs/benchmarks/retrieval-<timestamp>.json.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import tempfile
import time
from collections import defaultdict
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from tqdm import tqdm

from searchrl.data.synthetic import make_world
from searchrl.retrieval import load_retriever, make_retriever

REPO_ROOT = Path(__file__).resolve().parents[1]
SIZE_PROBE_ENTITIES = 200  # a small world tells how many passages one entity contributes


def world_of_size(seed: int, passages: int, entities: int | None, questions_per_type: int):
    """A synthetic world with about `passages` passages (or exactly `entities` entities when given)."""
    if entities is None:
        probe = make_world(seed, n_entities=SIZE_PROBE_ENTITIES, n_questions_per_type=0)
        per_entity = len(probe.corpus) / SIZE_PROBE_ENTITIES
        entities = max(1, round(passages / per_entity))
    return make_world(seed, n_entities=entities, n_questions_per_type=questions_per_type), entities


def recall_table(rows: list[dict[str, Any]], retrieved: list[list[str]], ks: list[int]) -> dict[str, dict[str, float]]:
    """Recall@k and all@k, overall and per question type."""
    groups: dict[str, list[int]] = defaultdict(list)
    for position, row in enumerate(rows):
        groups["all"].append(position)
        groups[str(row["metadata"].get("type", "unknown"))].append(position)
    table = {}
    for group, positions in sorted(groups.items()):
        entry: dict[str, float] = {"questions": len(positions)}
        for k in ks:
            shares, complete = [], 0
            for position in positions:
                supporting = set(rows[position]["metadata"]["supporting_ids"])
                found = supporting & set(retrieved[position][:k])
                shares.append(len(found) / len(supporting))
                complete += found == supporting
            entry[f"recall@{k}"] = sum(shares) / len(shares)
            entry[f"all@{k}"] = complete / len(positions)
        table[group] = entry
    return table


def benchmark_kind(kind: str, options: dict[str, Any], corpus, rows, ks: list[int], batch_size: int) -> dict[str, Any]:
    """Build, search (in batches) and save/load one retriever kind; return its measurements."""
    started = time.perf_counter()
    retriever = make_retriever(kind, corpus, **options)
    build_s = time.perf_counter() - started

    questions = [row["question"] for row in rows]
    retrieved: list[list[str]] = []
    started = time.perf_counter()
    for start in tqdm(range(0, len(questions), batch_size), desc=f"{kind} search", unit="batch"):
        batch = retriever.search(questions[start : start + batch_size], k=max(ks))
        retrieved.extend([doc.id for doc in docs] for docs in batch)
    search_s = time.perf_counter() - started

    folder = Path(tempfile.mkdtemp(prefix=f"searchrl-bench-{kind}-"))
    try:
        started = time.perf_counter()
        retriever.save(folder)
        save_s = time.perf_counter() - started
        index_mb = sum(path.stat().st_size for path in folder.rglob("*") if path.is_file()) / 2**20
        started = time.perf_counter()
        load_retriever(folder, show_progress=False)
        load_s = time.perf_counter() - started
    finally:
        shutil.rmtree(folder, ignore_errors=True)

    return {
        "kind": kind,
        "options": options,
        "build_s": round(build_s, 3),
        "search_s": round(search_s, 3),
        "queries_per_s": round(len(questions) / search_s, 1),
        "batch_size": batch_size,
        "save_s": round(save_s, 3),
        "load_s": round(load_s, 3),
        "folder_mb": round(index_mb, 2),
        "recall": recall_table(rows, retrieved, ks),
    }


def print_report(results: list[dict[str, Any]], ks: list[int]) -> None:
    for result in results:
        print(
            f"\n{result['kind']} {result['options']}: build {result['build_s']:.2f}s, "
            f"{result['queries_per_s']:.0f} queries/s (batches of {result['batch_size']}), "
            f"save {result['save_s']:.2f}s, load {result['load_s']:.2f}s, folder {result['folder_mb']:.1f} MB"
        )
        columns = [f"{metric}@{k}" for k in ks for metric in ("recall", "all")]
        print(f"  {'type':<18}{'n':>6}" + "".join(f"{c:>11}" for c in columns))
        for group, entry in result["recall"].items():
            print(f"  {group:<18}{entry['questions']:>6}" + "".join(f"{entry[c]:>11.3f}" for c in columns))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--passages", type=int, default=10_000, help="approximate corpus size (default 10000)")
    parser.add_argument("--entities", type=int, default=None, help="exact entity count (overrides --passages)")
    parser.add_argument("--k", type=int, nargs="+", default=[1, 5, 10], help="cut-offs for recall (default 1 5 10)")
    parser.add_argument("--queries", type=int, default=1000, help="test questions to search with (default 1000)")
    parser.add_argument(
        "--questions-per-type", type=int, default=800, help="questions the world draws per type; 1/8 go to test"
    )
    parser.add_argument("--batch-size", type=int, default=64, help="queries per search call (default 64)")
    parser.add_argument("--kinds", nargs="+", default=["bm25", "dense"], choices=["bm25", "dense"])
    parser.add_argument("--dense-index", default="flat", choices=["flat", "hnsw", "ivf"])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=REPO_ROOT / "outputs" / "benchmarks")
    args = parser.parse_args()
    ks = sorted(set(args.k))
    if ks[0] < 1:
        parser.error("--k values must be at least 1")

    started = time.perf_counter()
    world, entities = world_of_size(args.seed, args.passages, args.entities, args.questions_per_type)
    world_s = time.perf_counter() - started
    rows = [row for row in world.splits["test"] if row["metadata"].get("supporting_ids")][: args.queries]
    if not rows:
        raise SystemExit("the synthetic world's test split has no questions with supporting_ids")
    print(f"world: {entities} entities, {len(world.corpus)} passages, {len(rows)} test questions ({world_s:.1f}s)")

    options = {"bm25": {"show_progress": True}, "dense": {"index": args.dense_index, "show_progress": True}}
    results = [benchmark_kind(kind, options[kind], world.corpus, rows, ks, args.batch_size) for kind in args.kinds]
    for result in results:
        result["options"].pop("show_progress", None)
    print_report(results, ks)

    report = {
        "benchmark": "retrieval",
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "seed": args.seed,
        "entities": entities,
        "passages": len(world.corpus),
        "questions": len(rows),
        "ks": ks,
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform(), "python": platform.python_version()},
        "results": results,
    }
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / f"retrieval-{datetime.now().strftime('%Y%m%d-%H%M%S')}.json"
    path.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    print(f"\nwrote {path}")


if __name__ == "__main__":
    main()
