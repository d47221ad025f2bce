"""What recording every search costs, and a smoke run replayed from its record.

1. Per search: BM25 over a synthetic world, the world's questions searched in batches, without and with the
   recording wrapper (`searchrl.retrieval.recording`), best of `--repeats`; the wrapper's own time writing the
   record (first with new documents, then the same searches again), and the record's bytes per query.
2. A smoke run (`python -m searchrl.train`'s steps on params/quickstart/smoke.yaml: three evaluations, a cold
   start, two RL steps of sampled rollouts), its time spent writing the record beside its wall time; then the same
   run with `retriever: replay:<that run>`, and every trajectory file of the two runs compared byte for byte.

    python benchmarks/replay.py

Prints both and writes outputs/benchmarks/replay-<timestamp>.json (or under --out).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import tempfile
import time
from datetime import datetime
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]


def per_search(entities: int, batch_size: int, k: int, repeats: int) -> dict:
    from searchrl.data.synthetic import make_world
    from searchrl.retrieval import BM25Retriever
    from searchrl.retrieval.recording import RecordingRetriever

    world = make_world(0, n_entities=entities, n_questions_per_type=200)
    questions = [row["question"] for split in ("train", "dev", "test") for row in world.splits[split]]
    batches = [questions[i:i + batch_size] for i in range(0, len(questions), batch_size)]
    bm25 = BM25Retriever(world.corpus, show_progress=False)

    def timed(retriever) -> float:
        started = time.perf_counter()
        for batch in batches:
            retriever.search(batch, k)
        return time.perf_counter() - started

    plain, recorded, writing, writing_again, record_bytes = [], [], [], [], 0
    for _ in range(repeats):
        plain.append(timed(bm25))
        with tempfile.TemporaryDirectory() as folder:
            recorder = RecordingRetriever(bm25, folder, corpus=world.corpus)
            recorded.append(timed(recorder))
            writing.append(recorder.record_s)  # the recorder's own time: less noisy than a difference of totals
            record_bytes = sum(path.stat().st_size for path in Path(folder).iterdir())
            recorder.record_s = 0.0
            timed(recorder)  # the same searches again: every document already stored, only ids written
            writing_again.append(recorder.record_s)
    per_query = 1e6 / len(questions)
    return {"passages": len(world.corpus), "queries": len(questions), "batch_size": batch_size, "k": k,
            "plain_us_per_query": round(min(plain) * per_query, 1),
            "recorded_us_per_query": round(min(recorded) * per_query, 1),
            "recording_us_per_query": round(min(writing) * per_query, 1),
            "recording_again_us_per_query": round(min(writing_again) * per_query, 1),
            "record_bytes_per_query": round(record_bytes / len(questions), 1)}


def smoke_and_replay(params: Path, root: Path) -> dict:
    from searchrl.config import RunConfig
    from searchrl.experiments.train import train
    from searchrl.retrieval.recording import SearchRecord

    spent = {"s": 0.0, "queries": 0}
    append = SearchRecord.append

    def timed_append(self, k, queries, answers, sources):
        started = time.perf_counter()
        append(self, k, queries, answers, sources)
        spent["s"] += time.perf_counter() - started
        spent["queries"] += len(queries)

    SearchRecord.append = timed_append  # the cost of writing the record, summed over the run
    runs = {}
    try:
        for name in ("recorded", "replayed"):
            extra = {"retriever": f"replay:{runs['recorded']['dir']}"} if name == "replayed" else {}
            spent.update(s=0.0, queries=0)
            cfg = RunConfig.from_params({"output_root": str(root), **extra}, str(params))
            started = time.perf_counter()
            with contextlib.redirect_stdout(io.StringIO()):
                run_dir = train(cfg, ["benchmarks/replay.py"])
            wall = time.perf_counter() - started
            runs[name] = {"dir": str(run_dir), "wall_s": round(wall, 1), "record_s": round(spent["s"], 3),
                          "queries": spent["queries"], "record_share": round(spent["s"] / wall, 5)}
    finally:
        SearchRecord.append = append
    first, second = Path(runs["recorded"]["dir"]), Path(runs["replayed"]["dir"])
    files = sorted(path.relative_to(first) for path in (first / "trajectories").rglob("*.jsonl"))
    differ = [str(path) for path in files if (first / path).read_bytes() != (second / path).read_bytes()]
    return {**runs, "trajectory_files": [str(path) for path in files], "differing_files": differ}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--entities", type=int, default=2000, help="synthetic-world entities (3 passages each)")
    parser.add_argument("--batch-size", type=int, default=16, help="queries per search call")
    parser.add_argument("--k", type=int, default=3, help="passages per query")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--params", type=Path, default=REPO_ROOT / "params" / "quickstart" / "smoke.yaml")
    parser.add_argument("--out", type=Path, default=REPO_ROOT / "outputs" / "benchmarks")
    args = parser.parse_args()

    report = {"load_average": os.getloadavg(), "per_search": per_search(args.entities, args.batch_size, args.k,
                                                                        args.repeats)}
    row = report["per_search"]
    print(f"BM25, {row['passages']} passages, {row['queries']} queries in batches of {row['batch_size']}, k={row['k']}: "
          f"{row['plain_us_per_query']} us/query plain, {row['recorded_us_per_query']} us/query recorded, of which "
          f"{row['recording_us_per_query']} us writing the record ({row['recording_again_us_per_query']} us when the "
          f"documents are already stored); {row['record_bytes_per_query']} record bytes/query")
    with tempfile.TemporaryDirectory() as root:
        report["smoke"] = smoke_and_replay(args.params, Path(root))
    smoke = report["smoke"]
    for name in ("recorded", "replayed"):
        run = smoke[name]
        print(f"smoke run, {name}: {run['wall_s']} s wall, {run['queries']} queries recorded in {run['record_s']} s "
              f"({100 * run['record_share']:.3f}% of the run)")
    print(f"trajectory files compared: {len(smoke['trajectory_files'])}, differing: {smoke['differing_files'] or 'none'}")
    report["load_average_after"] = os.getloadavg()
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / f"replay-{datetime.now():%Y%m%d-%H%M%S}.json"
    path.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    print(f"load average {report['load_average']} -> {report['load_average_after']}; wrote {path}")


if __name__ == "__main__":
    main()
