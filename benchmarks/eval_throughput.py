"""Evaluation throughput: questions per second of greedy search rollouts at several batch sizes, side by side.

The same policy, questions and retriever for every batch size, so the ratios compare batching alone. A policy that
never closes its answer runs every question to the token budget, so use a cold-started or trained one (a run
folder's checkpoint) to measure what an evaluation of a working policy costs.

    python benchmarks/eval_throughput.py --policy outputs/quickstart/<run>/checkpoints/cold_start --batch 1 8 32

Prints one line per batch size and writes outputs/benchmarks/eval_throughput-<time>.json.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import torch

from searchrl.config import RunConfig
from searchrl.data.synthetic import make_world
from searchrl.evaluation.evaluate import evaluate
from searchrl.experiments.experiment_data import balanced_take
from searchrl.models import load_policy, load_tokenizer
from searchrl.retrieval import make_retriever


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--policy", default="smollm2-135m-instruct", help="model name, folder or run checkpoint")
    ap.add_argument("--params", default="params/quickstart/cpu.yaml", help="rollout and world settings")
    ap.add_argument("--protocol", default=None, help="override the params file's protocol")
    ap.add_argument("--batch", type=int, nargs="+", default=[1, 8, 32])
    ap.add_argument("--questions", type=int, default=32, help="questions per batch size (batch 1: a quarter)")
    ap.add_argument("--out", default="outputs/benchmarks")
    args = ap.parse_args()

    overrides = {"protocol": args.protocol} if args.protocol else {}
    cfg = RunConfig.from_params(None, args.params, **overrides)
    world = make_world(seed=cfg.world_seed, n_entities=cfg.world_entities, words_per_passage=cfg.world_passage_words)
    rows = balanced_take(world.splits["test"], args.questions, None, 1)
    retriever = make_retriever(cfg.retriever, world.corpus)
    model, _ = load_policy(args.policy, dtype=torch.float32, device="cpu")
    tokenizer = load_tokenizer(args.policy)
    results = []
    for batch in args.batch:
        subset = rows[: max(batch, len(rows) // 4)] if batch == 1 else rows
        start = time.perf_counter()
        result = evaluate(model, tokenizer, cfg.protocol, retriever, subset, rollout=cfg.rollout_config(),
                          batch_size=batch, chat=cfg.chat_prompt, desc=f"batch {batch}")
        seconds = time.perf_counter() - start
        summary = result.summary()
        results.append({"batch_size": batch, "questions": len(subset), "seconds": round(seconds, 2),
                        "questions_per_s": round(len(subset) / seconds, 3), "f1": round(summary["f1"], 3),
                        "searches": round(summary["searches"], 2), "total_tokens": round(summary["total_tokens"], 1)})
        print(json.dumps(results[-1]), flush=True)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"eval_throughput-{time.strftime('%Y%m%d-%H%M%S')}.json"
    path.write_text(json.dumps({"policy": args.policy, "params": args.params, "protocol": cfg.protocol,
                                "threads": torch.get_num_threads(), "results": results}, indent=1))
    print(f"saved {path}")


if __name__ == "__main__":
    main()
