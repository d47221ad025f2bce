"""Prebuilt index load: opening a Search-R1-layout passage file and a flat faiss index as the corpus grows.

For each size (default 100k, 300k and 1M passages) it writes a synthetic corpus in wiki-18's layout (``{"id",
"contents": "\\"Title\\"\\ntext"}``, about 100 words a passage, like DPR's Wikipedia passages) and an IndexFlatIP
of RANDOM unit vectors of 768 dimensions (e5-base-v2's size; Search-R1's ``e5_Flat.index`` is this kind), then
measures, each step in a fresh process:

- opening the corpus (`searchrl.data.corpus_file.CorpusFile`): the first open, which scans the file for its line
  offsets and writes the sidecar, and a later one, which maps the sidecar;
- loading the index: memory-mapped through the project's own path (``DenseRetriever(corpus, index_file=...)``, the
  checks of `searchrl.retrieval.prebuilt` included) and, for comparison, read whole (``faiss.read_index``);
- resident memory after the load and after 100 top-3 searches (each returning its passages from the file), split
  into anonymous memory (the process's own) and file-backed pages (the mapped index and offsets, which the kernel
  can drop and reread), and the search latency;
- the files' sizes on disk.

The query encoder is a stand-in that returns random unit vectors (no model is loaded): encoding cost is measured by
benchmarks/index_scale.py. The files were just written, so even the "first" open reads them from the page cache:
a cold disk adds its read time (60 GB at the disk's speed for wiki-18). From the three sizes a least-squares line
extrapolates every number to wiki-18's 21,015,324 passages (a number that does not grow keeps its largest measured
value). Each step runs `--repeats` times (3) and the run of median time is reported.

    OMP_NUM_THREADS=1 nice -n 5 python benchmarks/prebuilt_load.py --sizes 100k 300k 1M

Needs about 4.4 GB of disk per 1M passages (in --scratch, deleted at the end). Prints a markdown table and writes
outputs/benchmarks/prebuilt_load-<timestamp>.json.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np
from index_scale import E5_DIMENSION, REPO_ROOT, RESULT_PREFIX, WIKI_PASSAGES, parse_size, progress, run_worker

WORDS_PER_PASSAGE = 100
VOCABULARY = 30_000
SEARCHES = 100
K = 3
CHUNK = 65_536


def memory() -> dict[str, int]:
    """Resident memory of this process now, in bytes: all of it, anonymous, file-backed; and its peak."""
    fields = {}
    with open("/proc/self/status") as handle:
        for line in handle:
            name, _, value = line.partition(":")
            if name in ("VmRSS", "RssAnon", "RssFile", "VmHWM"):
                fields[name] = int(value.split()[0]) * 1024
    return {"rss": fields["VmRSS"], "anon": fields["RssAnon"], "file": fields["RssFile"], "peak": fields["VmHWM"]}


def load() -> float:
    return round(os.getloadavg()[0], 2)


def timed(step):
    started = time.perf_counter()
    value = step()
    return value, round(time.perf_counter() - started, 4)


# ---- writing the synthetic release ------------------------------------------------------------------------------------


def write_release(size: int, folder: Path, seed: int) -> dict[str, Any]:
    """wiki.jsonl (Search-R1's layout) and flat.index (random 768-dim unit vectors, in line order)."""
    import faiss

    rng = np.random.default_rng(seed)
    letters = np.array(list("abcdefghijklmnopqrstuvwxyz"))
    vocabulary = ["".join(rng.choice(letters, size=n)) for n in rng.integers(2, 10, size=VOCABULARY)]
    words = np.array(vocabulary, dtype=object)
    with open(folder / "wiki.jsonl", "w", encoding="utf-8") as handle:
        for start in range(0, size, CHUNK):
            rows = min(CHUNK, size - start)
            picks = words[rng.integers(VOCABULARY, size=(rows, WORDS_PER_PASSAGE + 2))]
            handle.writelines(
                json.dumps({"id": str(start + row), "contents": f'"{picks[row, 0]} {picks[row, 1]}"\n'
                                                                 + " ".join(picks[row, 2:])}) + "\n"
                for row in range(rows))
    index = faiss.IndexFlatIP(E5_DIMENSION)
    for start in range(0, size, CHUNK):
        vectors = rng.standard_normal((min(CHUNK, size - start), E5_DIMENSION), dtype=np.float32)
        index.add(vectors / np.linalg.norm(vectors, axis=1, keepdims=True))
    faiss.write_index(index, str(folder / "flat.index"))
    return {"corpus_bytes": (folder / "wiki.jsonl").stat().st_size, "index_bytes": (folder / "flat.index").stat().st_size}


# ---- workers: each runs in its own process ------------------------------------------------------------------------------


def open_corpus_worker(folder: Path, fresh: bool) -> dict[str, Any]:
    from searchrl.data.corpus_file import CorpusFile

    if fresh:
        for sidecar in folder.glob("wiki.jsonl.offsets.*"):
            sidecar.unlink()
    before = memory()
    corpus, seconds = timed(lambda: CorpusFile(folder / "wiki.jsonl", show_progress=False))
    assert corpus.offsets_rebuilt == fresh
    sidecar = sum(p.stat().st_size for p in folder.glob("wiki.jsonl.offsets.*"))
    return {"seconds": seconds, "load_average": load(), "passages": len(corpus), "rss_before": before,
            "rss_after": memory(), "sidecar_bytes": sidecar}


class RandomEncoder:
    """Stands in for e5-base-v2: random unit vectors of its size, so that only the index and the file are timed."""

    def __init__(self):
        self.rng = np.random.default_rng(1)

    def get_sentence_embedding_dimension(self) -> int:
        return E5_DIMENSION

    def encode(self, texts, *, batch_size, show_progress_bar, convert_to_numpy, normalize_embeddings):
        vectors = self.rng.standard_normal((len(texts), E5_DIMENSION), dtype=np.float32)
        return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


def load_worker(folder: Path, mode: str) -> dict[str, Any]:
    """mode "mmap": the project's path (CorpusFile + DenseRetriever(index_file=...)); "read": faiss.read_index whole."""
    import faiss  # imported before the clock starts: the library's own load is not the index's

    from searchrl.data.corpus_file import CorpusFile
    from searchrl.retrieval import dense

    dense._load_encoder = lambda model_name_or_path, device: RandomEncoder()
    before = memory()
    started = time.perf_counter()
    corpus = CorpusFile(folder / "wiki.jsonl", show_progress=False)
    if mode == "mmap":
        import warnings

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the synthetic index has no record: "cannot be verified" is expected
            retriever = dense.DenseRetriever(corpus, index_file=folder / "flat.index",
                                             model_name_or_path="intfloat/e5-base-v2", show_progress=False)
        opened = retriever.index_opened

        def search(query: str):
            return retriever.search([query], k=K)[0]
    else:
        index = faiss.read_index(str(folder / "flat.index"))
        opened = "read"
        encoder = RandomEncoder()

        def search(query: str):
            vector = encoder.encode([query], batch_size=1, show_progress_bar=False, convert_to_numpy=True,
                                    normalize_embeddings=True)
            return [corpus[int(i)] for i in index.search(vector, K)[1][0]]
    load_seconds = round(time.perf_counter() - started, 4)
    load_average, after_load = load(), memory()
    times = []
    for number in range(SEARCHES):
        started = time.perf_counter()
        docs = search(f"synthetic question {number}")
        times.append(time.perf_counter() - started)
        assert len(docs) == K and all(doc.text for doc in docs)
    return {"mode": mode, "opened": opened, "load_seconds": load_seconds, "load_average": load_average,
            "rss_before": before, "rss_after_load": after_load, "rss_after_searches": memory(),
            "search_p50_ms": round(float(np.percentile(times, 50)) * 1000, 2),
            "search_p99_ms": round(float(np.percentile(times, 99)) * 1000, 2), "load_average_searches": load()}


# ---- report ---------------------------------------------------------------------------------------------------------


def median_run(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """The run whose time is the median of `runs` (each a worker's result), with every run's time beside it."""
    key = "seconds" if "seconds" in runs[0] else "load_seconds"
    ordered = sorted(runs, key=lambda run: run[key])
    return {**ordered[len(ordered) // 2], "all_seconds": [run[key] for run in runs]}


def rows(results: dict[int, dict[str, Any]]) -> dict[int, dict[str, float]]:
    """The reported numbers per size (seconds, MB, ms)."""
    mb = 1 / 1e6
    table = {}
    for size, r in results.items():
        mmap, read = r["load_mmap"], r["load_read"]
        table[size] = {
            "corpus_mb": r["files"]["corpus_bytes"] * mb, "index_mb": r["files"]["index_bytes"] * mb,
            "offsets_mb": r["open_first"]["sidecar_bytes"] * mb,
            "open_first_s": r["open_first"]["seconds"], "open_cached_s": r["open_cached"]["seconds"],
            "load_mmap_s": mmap["load_seconds"], "load_read_s": read["load_seconds"],
            "mmap_anon_load_mb": (mmap["rss_after_load"]["anon"] - mmap["rss_before"]["anon"]) * mb,
            "mmap_anon_search_mb": (mmap["rss_after_searches"]["anon"] - mmap["rss_before"]["anon"]) * mb,
            "mmap_file_search_mb": (mmap["rss_after_searches"]["file"] - mmap["rss_before"]["file"]) * mb,
            "read_rss_load_mb": (read["rss_after_load"]["rss"] - read["rss_before"]["rss"]) * mb,
            "read_rss_search_mb": (read["rss_after_searches"]["rss"] - read["rss_before"]["rss"]) * mb,
            "search_mmap_p50_ms": mmap["search_p50_ms"], "search_read_p50_ms": read["search_p50_ms"],
        }
    return table


COLUMNS = [("corpus_mb", "corpus MB"), ("index_mb", "index MB"), ("offsets_mb", "offsets MB"),
           ("open_first_s", "corpus open, first (s)"), ("open_cached_s", "corpus open, cached (s)"),
           ("load_mmap_s", "open corpus + mmap index, checked (s)"), ("load_read_s", "index load read (s)"),
           ("mmap_anon_load_mb", "mmap: own RSS after load (MB)"),
           ("mmap_anon_search_mb", f"mmap: own RSS after {SEARCHES} searches (MB)"),
           ("mmap_file_search_mb", f"mmap: mapped pages after {SEARCHES} searches (MB)"),
           ("read_rss_load_mb", "read: RSS after load (MB)"), ("read_rss_search_mb", f"read: RSS after {SEARCHES} (MB)"),
           ("search_mmap_p50_ms", "search p50 mmap (ms)"), ("search_read_p50_ms", "search p50 read (ms)")]


def extrapolate(table: dict[int, dict[str, float]], target: int) -> dict[str, float]:
    """A least-squares line through the measured sizes, evaluated at `target` passages, for every column; a column
    that does not grow with the corpus (slope <= 0: a fixed cost under noise) keeps its largest measured value."""
    sizes = np.array(sorted(table), dtype=float)
    out = {}
    for key, _ in COLUMNS:
        values = np.array([table[int(s)][key] for s in sizes])
        slope, intercept = np.polyfit(sizes, values, 1) if len(sizes) > 1 else (values[0] / sizes[0], 0.0)
        out[key] = float(slope * target + intercept) if slope > 0 else float(values.max())
    return out


def number(value: float) -> str:
    return f"{value:,.0f}" if abs(value) >= 100 else f"{value:.3g}"


def markdown(table: dict[int, dict[str, float]], estimate: dict[str, float], results: dict[int, dict]) -> str:
    header = "| passages | " + " | ".join(label for _, label in COLUMNS) + " | load avg |"
    lines = [header, "|" + "---|" * (len(COLUMNS) + 2)]
    for size, row in sorted(table.items()):
        r = results[size]
        loads = "/".join(f"{x:.1f}" for x in (r["open_first"]["load_average"], r["load_mmap"]["load_average"],
                                              r["load_read"]["load_average"]))
        lines.append(f"| {size:,} | " + " | ".join(number(row[k]) for k, _ in COLUMNS) + f" | {loads} |")
    lines.append(f"| {WIKI_PASSAGES:,} (extrapolated) | " + " | ".join(number(estimate[k]) for k, _ in COLUMNS)
                 + " | - |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", nargs="+", default=["100k", "300k", "1M"], help="corpus sizes (100k, 1M, ...)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--repeats", type=int, default=3, help="processes per step; the run of median time is kept")
    parser.add_argument("--scratch", type=Path, default=None, help="folder for the synthetic files (default: a "
                                                                   "temporary folder, deleted at the end)")
    parser.add_argument("--out", type=Path, default=REPO_ROOT / "outputs" / "benchmarks")
    parser.add_argument("--worker", choices=["write", "open", "load"], help=argparse.SUPPRESS)
    parser.add_argument("--folder", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--size", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--mode", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        if args.worker == "write":
            result = write_release(args.size, args.folder, args.seed)
        elif args.worker == "open":
            result = open_corpus_worker(args.folder, args.mode == "fresh")
        else:
            result = load_worker(args.folder, args.mode)
        print(RESULT_PREFIX + json.dumps(result), flush=True)
        return

    script = Path(__file__).resolve()
    sizes = sorted({parse_size(text) for text in args.sizes})
    started = time.perf_counter()
    threads = os.environ.get("OMP_NUM_THREADS", "unset")
    progress(f"sizes {sizes}; OMP_NUM_THREADS={threads}; index vectors are random, the query encoder a stand-in")
    scratch_root = Path(tempfile.mkdtemp(prefix="searchrl-prebuilt-", dir=args.scratch))
    results: dict[int, dict[str, Any]] = {}
    try:
        for size in sizes:
            folder = scratch_root / str(size)
            folder.mkdir()
            common = ["--folder", str(folder), "--size", str(size), "--seed", str(args.seed)]
            progress(f"{size}: writing the corpus and the index")
            result = {"files": run_worker(["--worker", "write", *common], script)}
            for key, worker, mode in (("open_first", "open", "fresh"), ("open_cached", "open", "cached"),
                                      ("load_mmap", "load", "mmap"), ("load_read", "load", "read")):
                progress(f"{size}: {key} x{args.repeats}")
                runs = [run_worker(["--worker", worker, "--mode", mode, *common], script) for _ in range(args.repeats)]
                result[key] = median_run(runs)
            results[size] = result
            shutil.rmtree(folder)
    finally:
        shutil.rmtree(scratch_root, ignore_errors=True)
    table = rows(results)
    estimate = extrapolate(table, WIKI_PASSAGES)
    text = markdown(table, estimate, results)
    print("\n" + text)
    print(f"\nIndex vectors RANDOM ({E5_DIMENSION} dims); query encoder a stand-in. OMP_NUM_THREADS={threads}; load "
          f"average (1 min) at open/mmap/read per row; at the end {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores.")
    report = {
        "benchmark": "prebuilt_load",
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "sizes": sizes, "searches": SEARCHES, "k": K, "seed": args.seed,
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform(), "python": platform.python_version(),
                    "omp_num_threads": threads, "load_average_end": os.getloadavg()},
        "results": {str(size): r for size, r in results.items()}, "table": {str(s): r for s, r in table.items()},
        "extrapolated_21M": estimate, "markdown": text, "elapsed_s": round(time.perf_counter() - started, 1),
    }
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / f"prebuilt_load-{datetime.now().strftime('%Y%m%d-%H%M%S')}.json"
    path.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    print(f"\nwrote {path} ({report['elapsed_s']:.0f}s)", file=sys.stderr)


if __name__ == "__main__":
    main()
