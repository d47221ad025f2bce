"""Greedy single-hop score of nano builds on an unseen world, and optionally a build of the fresh-world recipe.

The first 80 single-hop questions of world 0's training split (nano's world size, a world no build trains on),
`evaluation.evaluate` with BM25 top-2 and a budget of 2 searches, `search_r1_compact` without a chat template:
F1, EM, format-valid and right passage retrieved, as the log quotes them.

    python benchmarks/nano_single_hop.py ~/.cache/searchrl/models/nano-v3
    python benchmarks/nano_single_hop.py --build outputs/benchmarks/nano-fresh4 --fresh-every 4
    python benchmarks/nano_single_hop.py --build outputs/benchmarks/nano-read --read-phases 1200
    python benchmarks/nano_single_hop.py --build outputs/benchmarks/nano-read --read-phases 1200 1200 \
        --continue-from outputs/benchmarks/nano-read/phase4

With `--build`, builds `build_nano(seed=0, fresh_every=..., read_phases=...)` at one torch thread, saves the model
after each phase into <folder>/phase<n>, prints each phase's time and loss, then scores every phase. With
`--continue-from` a saved build after its first reading phase (phase4) runs only the reading phases after it.
`--show N` prints the first N completions of each score (what a wrong answer looks like).
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import time

import torch

from searchrl import models
from searchrl.config.rollout import RolloutConfig
from searchrl.data.synthetic import make_world
from searchrl.evaluation.evaluate import evaluate
from searchrl.models import nano
from searchrl.retrieval import BM25Retriever

KEYS = ("n", "f1", "em", "format_ok", "support_retrieved", "searches")


def build(folder: str, fresh_every: int | None, read_phases=(), resume: str | None = None) -> list[str]:
    """Build nano, saving after each phase; the phase folders."""
    plain, saved = nano.pretrain, []
    numbers = itertools.count(5 if resume else 1)  # a resumed build holds phases 1-3 and the first reading phase

    def saving(model, tokenizer, *args, **kwargs):
        log, number = plain(model, tokenizer, *args, **kwargs), next(numbers)
        losses = log["losses"]
        print(f"phase {number}: {log['steps']} steps in {log['seconds']:.0f} s, loss (mean of 20) "
              f"{sum(losses[:20]) / 20:.3f} -> {sum(losses[-20:]) / 20:.3f}; load {os.getloadavg()}", flush=True)
        saved.append(str(models.save_policy(model, tokenizer, f"{folder}/phase{number}")))
        return log

    nano.pretrain = saving
    start = time.perf_counter()
    try:
        if resume:
            model, tokenizer = models.load_policy(resume)
            nano.read(model, tokenizer, read_phases, seed=0, first=1, progress=True)
        else:
            nano.build_nano(seed=0, fresh_every=fresh_every, read_phases=tuple(read_phases), progress=True)
    finally:
        nano.pretrain = plain
    print(f"build: {time.perf_counter() - start:.0f} s; load {os.getloadavg()}", flush=True)
    return saved


def score(folder: str, n: int = 80, show: int = 0) -> dict:
    world = make_world(seed=0, progress=False, **nano.WORLD)
    rows = [r for r in world.splits["train"] if r["metadata"]["type"] == "single_hop"][:n]
    model, tokenizer = models.load_policy(folder)
    result = evaluate(model, tokenizer, nano.PROTOCOL, BM25Retriever(world.corpus, show_progress=False), rows,
                      rollout=RolloutConfig(top_k=2, max_searches=2, max_completion_tokens=640), chat=False,
                      progress=False)
    summary = result.summary()
    for record in result.records.head(show).to_dict("records"):
        print(f"  gold {record['golden_answers']!r} f1 {record['f1']}: "
              f"{record['completion']!r}", flush=True)
    return {key: round(summary[key], 4) for key in KEYS if key in summary}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folders", nargs="*", help="saved nano builds to score")
    parser.add_argument("--build", help="build into this folder first (one subfolder a phase)")
    parser.add_argument("--fresh-every", type=int, default=None, help="batches per fresh world (None: fixed)")
    parser.add_argument("--read-phases", type=int, nargs="*", default=list(nano.READ_PHASES),
                        help="steps of each reading phase (none: no reading)")
    parser.add_argument("--continue-from", help="a saved build after its first reading phase, to read on from")
    parser.add_argument("--show", type=int, default=0, help="completions to print per score")
    args = parser.parse_args()
    torch.set_num_threads(1)
    built = build(args.build, args.fresh_every, args.read_phases, args.continue_from) if args.build else []
    folders = list(args.folders) + built
    if not folders:
        parser.error("name a saved build or --build a folder")
    for folder in folders:
        print(folder, json.dumps(score(folder, show=args.show)), f"load {os.getloadavg()}", flush=True)


if __name__ == "__main__":
    main()
