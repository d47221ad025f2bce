"""Load on the service's Search-R1 endpoint: N concurrent clients, a bounded number of requests each, on loopback.

Builds a BM25 index over a synthetic-world corpus, serves it from a separate process on 127.0.0.1
(`python -m searchrl.retrieval.serve`), and drives ``POST /retrieve`` (Search-R1's retriever API) with N client
threads, each with its own `SearchR1Retriever` (result cache off, no retries: every request reaches the service and
every failure is counted). The native ``POST /search`` runs the same load beside it, so the two rows of a level
compare the endpoints. Each client sends at most `--requests` requests, and each level stops after `--seconds`.

    python benchmarks/retrieve_load.py --clients 1 4 16 --requests 50

Prints a table (errors, p50/p99 latency per request) and writes outputs/benchmarks/retrieve-load-<timestamp>.json
(or under --out).
"""

from __future__ import annotations

import argparse
import json
import tempfile
from datetime import datetime
from pathlib import Path
from typing import Any

from retrieval_service import (
    print_errors,
    print_header,
    print_row,
    report_header,
    run_level,
    start_service,
    stop_service,
    wait_until_up,
)

from searchrl.config.service import ServiceConfig
from searchrl.data.synthetic import make_world
from searchrl.retrieval import BM25Retriever
from searchrl.retrieval.http import HTTPRetriever
from searchrl.retrieval.search_r1 import SearchR1Retriever
from searchrl.retrieval.serve import bind
from searchrl.rollout import RolloutConfig

REPO_ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--entities", type=int, default=2000, help="synthetic-world entities (3 passages each)")
    parser.add_argument("--clients", type=int, nargs="+", default=[1, 4, 16], help="concurrency levels")
    parser.add_argument("--requests", type=int, default=50, help="requests per client per level, at most")
    parser.add_argument("--seconds", type=float, default=20.0, help="each level stops after this long, at most")
    parser.add_argument("--batch-size", type=int, default=4, help="queries per request")
    parser.add_argument("--k", type=int, default=3, help="passages per query (topk)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=REPO_ROOT / "outputs" / "benchmarks")
    args = parser.parse_args()

    world = make_world(args.seed, n_entities=args.entities, n_questions_per_type=200)
    questions = [row["question"] for split in ("train", "dev", "test") for row in world.splits[split]]
    batches = [questions[i:i + args.batch_size] for i in range(0, len(questions) - args.batch_size + 1,
                                                                  args.batch_size)]
    print(f"world: {len(world.corpus)} passages, {len(batches)} batches of {args.batch_size} questions; topk "
          f"{args.k}; at most {args.requests} requests per client and {args.seconds:.0f} s per level")

    rows: list[dict[str, Any]] = []
    settings = RolloutConfig(retriever_timeout_s=30.0, retriever_retries=0)
    no_cache = ServiceConfig(service_cache_size=0)
    with tempfile.TemporaryDirectory(prefix="searchrl-retrieve-load-") as folder:
        index = BM25Retriever(world.corpus, show_progress=False).save(Path(folder) / "index")
        sock = bind()  # a free loopback port, released just before the service takes it
        port = sock.getsockname()[1]
        sock.close()
        url = f"http://127.0.0.1:{port}"
        process = start_service(index, port)
        try:
            startup_s = wait_until_up(process, url)
            print(f"service up at {url} in {startup_s:.1f} s (pid {process.pid})")
            print_header()
            for clients in args.clients:
                kinds = (("/retrieve", lambda: SearchR1Retriever(url + "/retrieve", rollout=settings,
                                                                 service=no_cache)),
                         ("/search", lambda: HTTPRetriever(url, rollout=settings, service=no_cache)))
                for mode, make in kinds:
                    remotes = [make() for _ in range(clients)]

                    def search(client: int, batch: list[str], k: int, remotes=remotes) -> None:
                        remotes[client].search(batch, k)

                    row = {"mode": mode, **run_level(search, clients, batches, args.k, args.seconds, args.requests)}
                    rows.append(row)
                    print_row(row)
        finally:
            stop_service(process)

    print_errors(rows)
    report = {
        **report_header("retrieve_load"),
        "passages": len(world.corpus),
        "batch_size": args.batch_size,
        "k": args.k,
        "requests_per_client": args.requests,
        "results": rows,
    }
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / f"retrieve-load-{datetime.now().strftime('%Y%m%d-%H%M%S')}.json"
    path.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
