"""Retrieval service load test: queries per second, latency and errors at 1, 4 and 16 concurrent clients.

Builds a BM25 index over a synthetic-world corpus, serves it from a separate process on loopback
(`python -m searchrl.retrieval.serve`), and drives it with N client threads, each with its own `HTTPRetriever`
(result cache off, no retries: every request reaches the service and every failure is counted). The same levels
run against the in-process retriever as the reference; its threads share one lock, as the service's searches do,
so the gap between the two rows is the cost of HTTP and JSON.

Each level runs for `--seconds` (or until every client has sent `--max-requests`), so a run is bounded:
about 2 x levels x seconds plus start-up.

    python benchmarks/retrieval_service.py --entities 2000 --batch-size 4 --seconds 8

Prints a table and writes outputs/benchmarks/retrieval-service-<timestamp>.json and .csv (or under --out).
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import platform
import subprocess
import sys
import tempfile
import threading
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np

from searchrl.config.service import ServiceConfig
from searchrl.data.synthetic import make_world
from searchrl.retrieval import BM25Retriever
from searchrl.retrieval.http import HTTPRetriever
from searchrl.retrieval.serve import bind
from searchrl.rollout import RolloutConfig

REPO_ROOT = Path(__file__).resolve().parents[1]
START_TIMEOUT_S = 120.0


def run_level(search, clients: int, batches: list[list[str]], k: int, seconds: float,
              max_requests: int) -> dict[str, Any]:
    """`clients` threads calling `search(batch, k)` over their share of `batches` until time or requests run out."""
    latencies: list[list[float]] = [[] for _ in range(clients)]
    errors = [0] * clients
    queries = [0] * clients
    first_error: list[str] = []
    stop_at = time.perf_counter() + seconds

    def client(index: int) -> None:
        for request in range(max_requests):
            if time.perf_counter() >= stop_at:
                return
            batch = batches[(index + request * clients) % len(batches)]  # clients walk different batches
            started = time.perf_counter()
            try:
                search(index, batch, k)
            except Exception as error:  # noqa: BLE001  (counted and reported; the load test goes on)
                errors[index] += 1
                if not first_error:
                    first_error.append(f"{type(error).__name__}: {error}")
                continue
            latencies[index].append(time.perf_counter() - started)
            queries[index] += len(batch)

    threads = [threading.Thread(target=client, args=(i,)) for i in range(clients)]
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    elapsed = time.perf_counter() - started
    flat = np.array([x for per_client in latencies for x in per_client]) * 1000
    return {
        "clients": clients,
        "requests": int(flat.size),
        "queries": sum(queries),
        "seconds": round(elapsed, 2),
        "queries_per_s": round(sum(queries) / elapsed, 1),
        "p50_ms": round(float(np.percentile(flat, 50)), 2) if flat.size else None,
        "p99_ms": round(float(np.percentile(flat, 99)), 2) if flat.size else None,
        "errors": sum(errors),
        "first_error": first_error[0] if first_error else "",
    }


def start_service(index: Path, port: int) -> subprocess.Popen:
    """The service in a process of its own (so that client threads and server do not share one interpreter)."""
    command = [sys.executable, "-m", "searchrl.retrieval.serve", "--index", str(index), "--host", "127.0.0.1",
               "--port", str(port)]
    return subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


def wait_until_up(process: subprocess.Popen, url: str) -> float:
    """Seconds until /health answers; raises with the server's output if it exits or never answers."""
    started = time.perf_counter()
    probe = HTTPRetriever(url, rollout=RolloutConfig(retriever_timeout_s=2.0, retriever_retries=0))
    while True:
        if process.poll() is not None:
            raise SystemExit(f"the service exited with code {process.returncode}:\n{process.stderr.read()}")
        try:
            probe.health()
            return time.perf_counter() - started
        except Exception:  # noqa: BLE001  (not up yet)
            if time.perf_counter() - started > START_TIMEOUT_S:
                raise SystemExit(f"the service did not answer /health within {START_TIMEOUT_S:.0f} s") from None
            time.sleep(0.2)


COLUMNS = ["mode", "clients", "requests", "queries", "queries_per_s", "p50_ms", "p99_ms", "errors"]


def stop_service(process: subprocess.Popen) -> None:
    """Stop the service process: terminate, then kill after 10 s."""
    process.terminate()
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        process.kill()


def print_errors(rows: list[dict[str, Any]]) -> None:
    """The first error of each level that had any."""
    if any(row["errors"] for row in rows):
        print("first errors: " + "; ".join(f"{r['mode']}x{r['clients']}: {r['first_error']}" for r in rows
                                           if r["errors"]))


def report_header(name: str) -> dict[str, Any]:
    """What every report of these benchmarks opens with: its name, when, the command and the machine."""
    return {
        "benchmark": name,
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "command": " ".join([Path(sys.argv[0]).name, *sys.argv[1:]]),
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform(), "python": platform.python_version(),
                    "load_average": os.getloadavg()},
    }


def print_header() -> None:
    print("  ".join(f"{c:>13}" for c in COLUMNS), flush=True)


def print_row(row: dict[str, Any]) -> None:
    print("  ".join(f"{'' if row[c] is None else row[c]!s:>13}" for c in COLUMNS), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--entities", type=int, default=2000, help="synthetic-world entities (3 passages each)")
    parser.add_argument("--clients", type=int, nargs="+", default=[1, 4, 16], help="concurrency levels")
    parser.add_argument("--batch-size", type=int, default=4, help="queries per request (a rollout batches its own)")
    parser.add_argument("--k", type=int, default=3, help="passages per query (top_k)")
    parser.add_argument("--seconds", type=float, default=8.0, help="duration of each level (default 8)")
    parser.add_argument("--max-requests", type=int, default=100_000, help="requests per client per level, at most")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=REPO_ROOT / "outputs" / "benchmarks")
    args = parser.parse_args()

    world = make_world(args.seed, n_entities=args.entities, n_questions_per_type=200)
    questions = [row["question"] for split in ("train", "dev", "test") for row in world.splits[split]]
    batches = [questions[i:i + args.batch_size] for i in range(0, len(questions) - args.batch_size + 1,
                                                                  args.batch_size)]
    print(f"world: {len(world.corpus)} passages, {len(questions)} distinct questions in {len(batches)} batches "
          f"of {args.batch_size}; top_k {args.k}; {args.seconds:.0f} s per level")

    local = BM25Retriever(world.corpus, show_progress=False)
    lock = threading.Lock()

    def local_search(_client: int, batch: list[str], k: int) -> None:
        with lock:
            local.search(batch, k)

    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="searchrl-service-bench-") as folder:
        index = local.save(Path(folder) / "index")
        sock = bind()  # a free port, released just before the service takes it
        port = sock.getsockname()[1]
        sock.close()
        url = f"http://127.0.0.1:{port}"
        process = start_service(index, port)
        try:
            startup_s = wait_until_up(process, url)
            print(f"service up at {url} in {startup_s:.1f} s (pid {process.pid})")
            print_header()
            settings = RolloutConfig(retriever_timeout_s=30.0, retriever_retries=0)
            for clients in args.clients:
                remotes = [HTTPRetriever(url, rollout=settings, service=ServiceConfig(service_cache_size=0))
                           for _ in range(clients)]

                def remote_search(client: int, batch: list[str], k: int, remotes=remotes) -> None:
                    remotes[client].search(batch, k)

                for mode, search in (("in-process", local_search), ("http", remote_search)):
                    row = {"mode": mode, **run_level(search, clients, batches, args.k, args.seconds,
                                                     args.max_requests)}
                    rows.append(row)
                    print_row(row)
        finally:
            stop_service(process)

    print_errors(rows)
    report = {
        **report_header("retrieval_service"),
        "passages": len(world.corpus),
        "batch_size": args.batch_size,
        "k": args.k,
        "seconds_per_level": args.seconds,
        "results": rows,
    }
    args.out.mkdir(parents=True, exist_ok=True)
    stem = args.out / f"retrieval-service-{datetime.now().strftime('%Y%m%d-%H%M%S')}"
    stem.with_suffix(".json").write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    with open(stem.with_suffix(".csv"), "w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    print(f"\nwrote {stem}.json and {stem}.csv")


if __name__ == "__main__":
    main()
