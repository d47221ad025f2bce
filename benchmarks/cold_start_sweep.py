"""How greedy format-valid rate, F1 and searches grow with the number of cold-start examples.

Trains the cold start in chunks of `--chunk` examples (one epoch each, the params file's learning rate) and
evaluates greedily after every chunk, so one run shows where the format becomes reliable: the point to stop a cold
start that should leave something for RL to learn.

    python benchmarks/cold_start_sweep.py --chunks 5 --chunk 16 -p protocol search_r1_compact \
        -p sft_question_types "[single_hop,inference]"

Prints one line per chunk and writes outputs/benchmarks/cold_start_sweep-<time>.json.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from searchrl.config import RunConfig, parse_scalar
from searchrl.data.synthetic.trajectories import templated_trajectories
from searchrl.experiments.experiment import Experiment
from searchrl.experiments.experiment_data import balanced_take
from searchrl.sft import sft_train
from searchrl.trainer.arguments import sft_args


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--params", default="params/quickstart/cpu.yaml")
    ap.add_argument("-p", nargs=2, action="append", default=[], metavar=("NAME", "VALUE"), help="override a field")
    ap.add_argument("--chunks", type=int, default=5)
    ap.add_argument("--chunk", type=int, default=16, help="cold-start examples per chunk")
    ap.add_argument("--n-eval", type=int, default=30, help="questions evaluated after each chunk")
    ap.add_argument("--out", default="outputs/benchmarks")
    args = ap.parse_args()

    overrides = {name: parse_scalar(value) for name, value in args.p}
    cfg = RunConfig.from_params(None, args.params, **{"sft_epochs": 1.0, "n_eval": args.n_eval,
                                                      "eval_batch_size": args.n_eval, "run_name": "cold-start-sweep",
                                                      **overrides})
    exp = Experiment(cfg, notebook="benchmarks")
    model = exp.load_model()
    rows = balanced_take(exp.world.splits["train"], 2 * args.chunks * args.chunk, cfg.sft_question_types, cfg.seed + 2)
    items = templated_trajectories(rows, exp.protocol, exp.retriever, rollout=cfg.rollout_config(),
                                   tokenizer=exp.tokenizer, chat=cfg.chat_prompt, seed=cfg.seed)
    results = []
    for k in range(args.chunks):
        start = time.perf_counter()
        log = sft_train(model, exp.tokenizer, items[k * args.chunk:(k + 1) * args.chunk],
                        sft_args(cfg, exp.run_dir / "sft"), stage_bar=f"cold start, chunk {k + 1} of {args.chunks}")
        summary = exp.evaluate(model, f"sft{(k + 1) * args.chunk}").summary()
        results.append({"examples": (k + 1) * args.chunk, "seconds": round(time.perf_counter() - start, 1),
                        "loss": round(log["train_loss"], 3),
                        **{key: round(summary[key], 3) for key in ("f1", "em", "format_ok", "searches",
                                                                    "hit_length_budget")}})
        print(json.dumps(results[-1]), flush=True)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"cold_start_sweep-{time.strftime('%Y%m%d-%H%M%S')}.json"
    path.write_text(json.dumps({"params": args.params, "overrides": overrides, "results": results}, indent=1))
    print(f"saved {path}")


if __name__ == "__main__":
    main()
