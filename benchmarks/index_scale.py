"""Index scale: build and query cost of BM25 and of each faiss index kind as the corpus grows, memory included.

For each size (default 10k, 100k and 1M passages) it measures BM25 (bm25s, over a synthetic world of that size)
and the dense kinds flat, hnsw, ivf and ivf-pq (`searchrl.retrieval.faiss_index`): build seconds, top-5 query
latency (p50/p99 for batches of 1 and of 32 queries), RAM the built index holds, the process's peak RSS, the index's
size on disk and, for the approximate kinds, recall@5 against flat. Every measurement runs in its own process, so
each peak RSS is that build's alone.

The dense vectors are RANDOM: unit vectors of 384 dimensions (MiniLM's size) around 1,024 random centres, since
encoding a million passages with MiniLM takes hours on a CPU; queries are stored vectors plus noise. The encoder is
measured on its own, over a sample of real passages (`--encode-sample`), and its passages/s gives the encoding
time each size would take. Dense query latency here is the index search alone; encoding a query adds the
encoder's query latency, reported beside it. From the largest measured size the script extrapolates index size
and build time to 1M and to 21M passages (Wikipedia, the papers' wiki-18). p99 latencies of a few milliseconds on a
busy machine are mostly the scheduler's time slice, not the index.

    OMP_NUM_THREADS=1 nice -n 10 python benchmarks/index_scale.py --sizes 10k 100k
    OMP_NUM_THREADS=1 python benchmarks/index_scale.py --sizes 1M   # roughly half an hour; BM25 peaks near 5 GB

Prints a markdown table and writes outputs/benchmarks/index_scale-<timestamp>.json.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import resource
import shutil
import subprocess
import sys
import tempfile
import time
import tracemalloc
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np

from searchrl.retrieval.faiss_index import ivf_list_count, pq_bits, pq_code_count, training_size

REPO_ROOT = Path(__file__).resolve().parents[1]
DIMENSION = 384  # all-MiniLM-L6-v2's embedding size
E5_DIMENSION = 768  # e5-base-v2, the papers' retriever
WIKI_PASSAGES = 21_015_324  # wiki-18 (DPR's 100-word Wikipedia passages), the corpus of Search-R1 and R1-Searcher
CENTRES = 1024  # topic clusters of the random vectors
K = 5
SINGLE_QUERIES = 200  # batch-of-1 latency samples
BATCHES_OF_32 = 30  # batch-of-32 latency samples
RECALL_QUERIES = 1000
CHUNK = 65_536  # random vectors generated and added per step, so a build never holds the corpus twice
DENSE_KINDS = ("flat", "hnsw", "ivf", "ivf-pq")
RESULT_PREFIX = "RESULT "


# ---- measuring ------------------------------------------------------------------------------------------------------


def rss_bytes() -> int:
    """Resident memory of this process now."""
    with open("/proc/self/statm") as handle:
        return int(handle.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def peak_rss_bytes() -> int:
    """Highest resident memory of this process so far (Linux reports kilobytes)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def latency_ms(search, batches: list) -> dict[str, float]:
    """p50/p99 milliseconds of `search(batch)` over `batches`, after one unmeasured warm-up call."""
    search(batches[0])
    times = []
    for batch in batches:
        started = time.perf_counter()
        search(batch)
        times.append((time.perf_counter() - started) * 1000)
    return {"p50_ms": round(float(np.percentile(times, 50)), 3), "p99_ms": round(float(np.percentile(times, 99)), 3)}


def query_batches(queries: list, size: int, count: int) -> list:
    """`count` batches of `size` queries, cycling through `queries`."""
    return [[queries[(start + i) % len(queries)] for i in range(size)] for start in range(0, size * count, size)]


def parse_size(text: str) -> int:
    """'10k', '100k', '1M' or a plain number of passages."""
    scale = {"k": 1_000, "m": 1_000_000}.get(text[-1].lower(), 1)
    return int(float(text[:-1] if scale > 1 else text) * scale)


def progress(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


# ---- random embeddings ------------------------------------------------------------------------------------------------


def random_vector_chunks(size: int, seed: int):
    """Unit vectors around CENTRES random centres (cosine about 0.7 to their centre), CHUNK rows at a time; the same
    (size, seed) always gives the same vectors, so every worker sees the same corpus."""
    rng = np.random.default_rng([seed, 0])
    centres = rng.standard_normal((CENTRES, DIMENSION)).astype(np.float32)
    centres /= np.linalg.norm(centres, axis=1, keepdims=True)
    for number, start in enumerate(range(0, size, CHUNK)):
        rng = np.random.default_rng([seed, number + 1])
        rows = min(CHUNK, size - start)
        noise = rng.standard_normal((rows, DIMENSION), dtype=np.float32) / np.float32(math.sqrt(DIMENSION))
        vectors = centres[rng.integers(CENTRES, size=rows)] + noise
        yield vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


def noisy_queries(sources: np.ndarray, seed: int) -> np.ndarray:
    """Queries near stored vectors, as a question lies near the passage that answers it."""
    rng = np.random.default_rng([seed, 10**6])
    queries = sources + 0.5 * rng.standard_normal(sources.shape, dtype=np.float32) / np.float32(math.sqrt(DIMENSION))
    return np.ascontiguousarray(queries / np.linalg.norm(queries, axis=1, keepdims=True), dtype=np.float32)


# ---- workers: each runs in its own process ------------------------------------------------------------------------------


def dense_worker(kind: str, size: int, seed: int, scratch: Path) -> dict[str, Any]:
    """Build one faiss index over `size` random vectors, time its searches and save its top-5 ids for recall."""
    import faiss

    from searchrl.retrieval import faiss_index

    baseline = rss_bytes()
    index = faiss_index.new_index(faiss, kind, DIMENSION, size)
    query_rows = np.sort(np.random.default_rng([seed, 7]).choice(size, size=RECALL_QUERIES, replace=False))
    sources, train_s, add_s = [], 0.0, 0.0
    train_rows = faiss_index.training_size(kind, size)
    sample: list[np.ndarray] = []
    if train_rows:
        # the chunks are independent draws, so their first rows are as good a random sample as any
        for chunk in random_vector_chunks(size, seed):
            sample.append(chunk[: train_rows - sum(len(s) for s in sample)])
            if sum(len(s) for s in sample) >= train_rows:
                break
        started = time.perf_counter()
        index.train(np.concatenate(sample))
        train_s = time.perf_counter() - started
        del sample
        progress(f"{kind} @ {size}: trained on {train_rows} vectors in {train_s:.1f}s")
    for number, chunk in enumerate(random_vector_chunks(size, seed)):
        start = number * CHUNK
        inside = query_rows[(query_rows >= start) & (query_rows < start + len(chunk))]
        sources.append(chunk[inside - start])
        started = time.perf_counter()
        index.add(chunk)
        add_s += time.perf_counter() - started
        if size > CHUNK:
            progress(f"{kind} @ {size}: added {start + len(chunk)} vectors ({add_s:.1f}s)")
    del chunk
    held = rss_bytes() - baseline
    queries = noisy_queries(np.concatenate(sources), seed)
    faiss_index.prepare_search(index, K)
    single = latency_ms(lambda q: index.search(q, K), [queries[i : i + 1] for i in range(SINGLE_QUERIES)])
    batched = latency_ms(lambda q: index.search(q, K), [np.take(queries, range(s, s + 32), axis=0, mode="wrap")
                                                       for s in range(0, 32 * BATCHES_OF_32, 32)])
    ids = index.search(queries, K)[1]
    np.save(scratch / f"{kind}-{size}.npy", ids)
    path = scratch / f"{kind}-{size}.faiss"
    faiss.write_index(index, str(path))
    disk = path.stat().st_size
    path.unlink()
    return {"kind": kind, "build_s": round(train_s + add_s, 2), "train_s": round(train_s, 2),
            "latency_1": single, "latency_32": batched, "ram_bytes": held, "disk_bytes": disk,
            "peak_rss_bytes": peak_rss_bytes(), "faiss_threads": faiss.omp_get_max_threads(),
            "description": str(type(index).__name__)}


def synthetic_world(size: int, seed: int):
    """A synthetic world of about `size` passages (3 per entity) with 100 questions per type."""
    from searchrl.data.synthetic import make_world

    return make_world(seed, n_entities=max(1, round(size / 3)), n_questions_per_type=100)


def bm25_worker(size: int, seed: int, scratch: Path) -> dict[str, Any]:
    """Build BM25 over a synthetic world of `size` passages, time its searches, and weigh the index and the corpus."""
    from searchrl.retrieval import BM25Retriever
    from searchrl.retrieval.base import CORPUS_NAME, read_corpus
    from searchrl.retrieval.bm25 import INDEX_FOLDER

    started = time.perf_counter()
    world = synthetic_world(size, seed)
    world_s = time.perf_counter() - started
    progress(f"bm25 @ {size}: world of {len(world.corpus)} passages in {world_s:.1f}s")
    questions = [row["question"] for rows in world.splits.values() for row in rows]
    baseline = rss_bytes()
    started = time.perf_counter()
    retriever = BM25Retriever(world.corpus, show_progress=True)
    build_s = time.perf_counter() - started
    held = rss_bytes() - baseline
    single = latency_ms(lambda q: retriever.search(q, K), query_batches(questions, 1, SINGLE_QUERIES))
    batched = latency_ms(lambda q: retriever.search(q, K), query_batches(questions, 32, BATCHES_OF_32))
    folder = scratch / f"bm25-{size}"
    retriever.save(folder)
    disk = sum(p.stat().st_size for p in (folder / INDEX_FOLDER).rglob("*") if p.is_file())
    corpus_disk = (folder / CORPUS_NAME).stat().st_size
    # what any index's service pays to hold the passages themselves (searchrl.retrieval.serve loads them as Docs);
    # traced rather than read off RSS, which would reuse the memory the world just freed
    del world
    tracemalloc.start()
    corpus = read_corpus(folder / CORPUS_NAME)
    corpus_ram = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    shutil.rmtree(folder)
    return {"kind": "bm25", "build_s": round(build_s, 2), "world_s": round(world_s, 2), "passages": len(corpus),
            "latency_1": single, "latency_32": batched, "ram_bytes": held, "disk_bytes": disk,
            "corpus_disk_bytes": corpus_disk, "corpus_ram_bytes": corpus_ram, "peak_rss_bytes": peak_rss_bytes()}


def encoder_worker(sample: int, seed: int, batch_size: int) -> dict[str, Any]:
    """Encode `sample` real passages with the bundled MiniLM as DenseRetriever does; time passages and queries."""
    import torch
    from sentence_transformers import SentenceTransformer

    from searchrl.retrieval.dense import bundled_model_path

    world = synthetic_world(sample, seed)
    texts = [doc.as_text() for doc in world.corpus][:sample]
    questions = [row["question"] for rows in world.splits.values() for row in rows]
    encoder = SentenceTransformer(str(bundled_model_path()), device="cpu", local_files_only=True)
    encoder.encode(texts[:batch_size], batch_size=batch_size)  # warm-up: first calls pay one-off set-up
    started = time.perf_counter()
    encoder.encode(texts, batch_size=batch_size, show_progress_bar=True, normalize_embeddings=True)
    encode_s = time.perf_counter() - started

    def encode(batch):
        return encoder.encode(batch, batch_size=batch_size, normalize_embeddings=True)

    return {"passages": len(texts), "batch_size": batch_size, "encode_s": round(encode_s, 2),
            "passages_per_s": round(len(texts) / encode_s, 2), "max_seq_length": encoder.max_seq_length,
            "query_latency_1": latency_ms(encode, query_batches(questions, 1, 50)),
            "query_latency_32": latency_ms(encode, query_batches(questions, 32, 10)),
            "torch_threads": torch.get_num_threads(), "peak_rss_bytes": peak_rss_bytes()}


def run_worker(arguments: list[str], script: Path | None = None) -> dict[str, Any]:
    """Run `script` (default: this one) as a worker process and return the result it prints; its progress goes to our
    stderr."""
    command = [sys.executable, str(script or Path(__file__).resolve()), *arguments]
    finished = subprocess.run(command, stdout=subprocess.PIPE, text=True, check=False)
    results = [line for line in finished.stdout.splitlines() if line.startswith(RESULT_PREFIX)]
    if finished.returncode != 0 or not results:
        raise RuntimeError(f"worker {' '.join(arguments)} failed (exit {finished.returncode})")
    return json.loads(results[-1][len(RESULT_PREFIX):])


# ---- extrapolation and report ---------------------------------------------------------------------------------------


def build_work(kind: str, size: int) -> tuple[float, float]:
    """Relative work of training and of adding for `kind` at `size` passages, counted by what dominates each step:
    k-means (training sample x lists) and assigning every vector to its list (N x lists) for the inverted files, the
    graph's searches (N log N) for HNSW, a copy or a pass over the texts (N) for flat and BM25."""
    if kind in ("ivf", "ivf-pq"):
        lists = ivf_list_count(size)
        return float(training_size(kind, size) * lists), float(size * lists)
    if kind == "hnsw":
        return 0.0, size * math.log(size)
    return 0.0, float(size)


def scaled_build_seconds(kind: str, measured: dict[str, Any], measured_size: int, size: int) -> float:
    """Build seconds at `size`, scaling the measured training and adding times by `build_work`. It overstates
    ivf-pq's training, whose PQ half stops growing once its sample reaches 65,536 vectors."""
    train_then, add_then = build_work(kind, measured_size)
    train_now, add_now = build_work(kind, size)
    train_s = measured.get("train_s", 0.0)
    add_s = measured["build_s"] - train_s
    return (train_s * train_now / train_then if train_then else 0.0) + add_s * add_now / add_then


def fixed_bytes(kind: str, size: int) -> int:
    """Bytes of an index that do not grow with each passage: the IVF centroids (float32, one per list) and the PQ
    codebooks (2**bits centroids per sub-vector, float32)."""
    if kind not in ("ivf", "ivf-pq"):
        return 0
    codebooks = (1 << pq_bits(size)) * DIMENSION * 4 if kind == "ivf-pq" else 0
    return ivf_list_count(size) * DIMENSION * 4 + codebooks


def extrapolate(results: dict[int, dict[str, dict]], encoder: dict[str, Any], targets: list[int]) -> dict[str, Any]:
    """Index size (bytes per passage at the largest measured size, times N) and build time (`scaled_build_seconds`)
    at `targets`, on this machine's threads.

    A faiss index occupies about its file size in RAM (RSS deltas at small sizes are mostly allocator noise), so the
    file size stands for both.
    """
    largest = max(results)
    estimates: dict[str, Any] = {}
    for kind in ["bm25", *DENSE_KINDS]:
        if kind not in results[largest]:
            continue
        per_disk = (results[largest][kind]["disk_bytes"] - fixed_bytes(kind, largest)) / largest
        measured = results[largest][kind]
        estimates[kind] = {str(n): {"index_gb": round((per_disk * n + fixed_bytes(kind, n)) / 1e9, 2),
                                    "build_h": round(scaled_build_seconds(kind, measured, largest, n) / 3600, 2)}
                           for n in targets}
        if kind == "ivf-pq":
            extra_codes = pq_code_count(E5_DIMENSION) - pq_code_count(DIMENSION)  # 96 one-byte codes instead of 48
            for n in targets:
                wide = (per_disk + extra_codes) * n + fixed_bytes(kind, n) * E5_DIMENSION / DIMENSION
                estimates[kind][str(n)]["index_gb_768"] = round(wide / 1e9, 2)
        if kind in ("flat", "hnsw", "ivf"):
            # these store full float32 vectors: at e5-base's 768 dimensions each passage carries 4*768 bytes of
            # vector instead of 4*384, and faiss-gpu's float16 storage halves that part
            overhead = per_disk - 4 * DIMENSION
            for n in targets:
                entry = estimates[kind][str(n)]
                centroids = fixed_bytes(kind, n) * E5_DIMENSION / DIMENSION
                entry["index_gb_768"] = round(((overhead + 4 * E5_DIMENSION) * n + centroids) / 1e9, 2)
                entry["float16_gb_768"] = round(((overhead + 2 * E5_DIMENSION) * n + centroids) / 1e9, 2)
    estimates["encode_minilm_h"] = {str(n): round(n / encoder["passages_per_s"] / 3600, 1) for n in targets}
    if "bm25" in results[largest]:
        per_passage = results[largest]["bm25"]["corpus_ram_bytes"] / results[largest]["bm25"]["passages"]
        estimates["corpus_ram_gb"] = {str(n): round(per_passage * n / 1e9, 1) for n in targets}
    return estimates


def markdown_table(results: dict[int, dict[str, dict]]) -> str:
    """One row per (size, kind): the measured numbers."""
    header = ("| passages | index | build s | p50/p99 ms, 1 query | p50/p99 ms, 32 queries | RAM held MB | "
              "peak RSS MB | disk MB | recall@5 vs flat |")
    lines = [header, "|---|---|---|---|---|---|---|---|---|"]
    for size, kinds in sorted(results.items()):
        for kind, r in kinds.items():
            if "skipped" in r:
                lines.append(f"| {size:,} | {kind} | skipped: {r['skipped']} | | | | | | |")
                continue
            recall = f"{r['recall@5']:.3f}" if "recall@5" in r else "exact" if kind == "flat" else "-"
            lines.append(
                f"| {size:,} | {kind} | {r['build_s']:.1f} | {r['latency_1']['p50_ms']:.2f} / "
                f"{r['latency_1']['p99_ms']:.2f} | {r['latency_32']['p50_ms']:.2f} / {r['latency_32']['p99_ms']:.2f} | "
                f"{r['ram_bytes'] / 2**20:.0f} | {r['peak_rss_bytes'] / 2**20:.0f} | {r['disk_bytes'] / 2**20:.1f} | "
                f"{recall} |")
    return "\n".join(lines)


def measure_size(size: int, args, scratch: Path) -> dict[str, dict]:
    """Every kind at one size, each in its own worker process; recall of the approximate kinds against flat."""
    measured: dict[str, dict] = {}
    common = ["--size", str(size), "--seed", str(args.seed), "--scratch", str(scratch)]
    for kind in args.kinds:
        if f"{kind}@{size}" in args.skip:
            measured[kind] = {"skipped": "--skip (too slow on this machine)"}
            progress(f"{kind} @ {size}: skipped")
            continue
        progress(f"{kind} @ {size}: building")
        measured[kind] = run_worker(["--worker", "bm25" if kind == "bm25" else "dense", "--kind", kind, *common])
        progress(f"{kind} @ {size}: build {measured[kind]['build_s']}s, peak RSS "
                 f"{measured[kind]['peak_rss_bytes'] / 2**20:.0f} MB")
    exact_path = scratch / f"flat-{size}.npy"
    for kind in ("hnsw", "ivf", "ivf-pq"):
        found_path = scratch / f"{kind}-{size}.npy"
        if exact_path.is_file() and found_path.is_file():
            exact, found = np.load(exact_path), np.load(found_path)
            measured[kind]["recall@5"] = round(float(np.mean(
                [len(set(f) & set(e)) / K for f, e in zip(found, exact)])), 4)
    return measured


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", nargs="+", default=["10k", "100k", "1M"], help="corpus sizes (10k, 100k, 1M, ...)")
    parser.add_argument("--kinds", nargs="+", default=["bm25", *DENSE_KINDS], choices=["bm25", *DENSE_KINDS])
    parser.add_argument("--skip", nargs="*", default=[], help="KIND@PASSAGES pairs not to run, e.g. hnsw@1000000")
    parser.add_argument("--encode-sample", type=int, default=2000, help="real passages encoded with MiniLM (0: none)")
    parser.add_argument("--encode-batch-size", type=int, default=64, help="encoding batch (DenseRetriever's default)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=REPO_ROOT / "outputs" / "benchmarks")
    parser.add_argument("--worker", choices=["bm25", "dense", "encoder"], help=argparse.SUPPRESS)
    parser.add_argument("--kind", help=argparse.SUPPRESS)
    parser.add_argument("--size", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--scratch", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()

    if args.worker:
        if args.worker == "encoder":
            result = encoder_worker(args.size, args.seed, args.encode_batch_size)
        elif args.worker == "bm25":
            result = bm25_worker(args.size, args.seed, args.scratch)
        else:
            result = dense_worker(args.kind, args.size, args.seed, args.scratch)
        print(RESULT_PREFIX + json.dumps(result), flush=True)
        return

    sizes = sorted({parse_size(text) for text in args.sizes})
    args.skip = {f"{kind}@{parse_size(size)}" for kind, _, size in (pair.partition("@") for pair in args.skip)}
    started = time.perf_counter()
    threads = os.environ.get("OMP_NUM_THREADS", "unset")
    progress(f"sizes {sizes}, kinds {args.kinds}; OMP_NUM_THREADS={threads}; dense vectors are random (see --help)")
    encoder = None
    if args.encode_sample:
        progress(f"encoding {args.encode_sample} real passages with MiniLM (batch {args.encode_batch_size})")
        encoder = run_worker(["--worker", "encoder", "--size", str(args.encode_sample), "--seed", str(args.seed),
                              "--encode-batch-size", str(args.encode_batch_size)])
        progress(f"encoder: {encoder['passages_per_s']} passages/s")
    results: dict[int, dict[str, dict]] = {}
    with tempfile.TemporaryDirectory(prefix="searchrl-index-scale-") as scratch:
        for size in sizes:
            results[size] = measure_size(size, args, Path(scratch))
    measured = {size: {k: r for k, r in kinds.items() if "skipped" not in r} for size, kinds in results.items()}
    estimates = extrapolate(measured, encoder, [1_000_000, WIKI_PASSAGES]) if encoder else None

    table = markdown_table(results)
    print("\n" + table)
    print(f"\nDense vectors: RANDOM unit vectors, {DIMENSION} dims, {CENTRES} clusters (not MiniLM embeddings); "
          f"dense latency is the index search alone. OMP_NUM_THREADS={threads}; load average at the end "
          f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} cores.")
    if encoder:
        print(f"MiniLM encoder (measured on {encoder['passages']} real passages, {encoder['torch_threads']} torch "
              f"threads): {encoder['passages_per_s']} passages/s; query encoding p50 "
              f"{encoder['query_latency_1']['p50_ms']} ms for 1, {encoder['query_latency_32']['p50_ms']} ms for 32.")
        print("Extrapolated (not measured):\n" + json.dumps(estimates, indent=1))
    report = {
        "benchmark": "index_scale",
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "dense_vectors": f"random unit vectors, {DIMENSION} dims around {CENTRES} random centres; queries are "
                         "stored vectors plus noise; not encoder output",
        "k": K, "seed": args.seed, "sizes": sizes, "skipped": sorted(args.skip),
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform(), "python": platform.python_version(),
                    "omp_num_threads": threads, "load_average_end": os.getloadavg()},
        "encoder": encoder, "results": {str(size): kinds for size, kinds in results.items()},
        "extrapolated": estimates, "table": table, "elapsed_s": round(time.perf_counter() - started, 1),
    }
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / f"index_scale-{datetime.now().strftime('%Y%m%d-%H%M%S')}.json"
    path.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    print(f"\nwrote {path} ({report['elapsed_s']:.0f}s)")


if __name__ == "__main__":
    main()
