"""How many tokens a cold-start epoch pays for, padding included: random batches against length-grouped ones.

A batch is padded to its longest item, so one long trajectory in a batch of short fact statements (R1-Searcher++'s
knowledge cold start) makes the whole batch cost as much as eight trajectories. This takes the cold-start items of
a notebook's profile from the run's own `Experiment.cold_start_items`, tokenizes them, and
counts padded tokens per epoch for each forward-pass size, in random order (five seeds) and with transformers'
length-grouped sampler (what `sft_group_by_length` turns on). No model runs; padded tokens are what the forward and
backward passes cost.

    python benchmarks/sft_padding.py notebooks/ablate_knowledge.ipynb -f params/ablate_knowledge/cpu.yaml

Prints a table and writes outputs/benchmarks/sft_padding-<time>.json.
"""

from __future__ import annotations

import argparse
import json
import random
import tempfile
import time
import warnings
from pathlib import Path

import torch
import yaml


def padded_tokens(lengths: list[int], order: list[int], batch: int) -> int:
    return sum(max(lengths[i] for i in order[k:k + batch]) * len(order[k:k + batch])
               for k in range(0, len(order), batch))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("notebook", help="the notebook whose parameters cell the profile sits on")
    ap.add_argument("-f", "--params", action="append", default=[], help="params file(s), later ones win")
    ap.add_argument("-p", "--param", nargs=2, action="append", default=[], metavar=("NAME", "VALUE"),
                    help="one parameter (YAML value)")
    ap.add_argument("--batch", type=int, default=8, help="examples per optimizer step (the cold start's batch)")
    ap.add_argument("--out", default="outputs/benchmarks")
    args = ap.parse_args()

    from transformers.trainer_pt_utils import LengthGroupedSampler

    from searchrl.data.synthetic.trajectories import FACT_QTYPE
    from searchrl.data.tokenize import tokenize_sft
    from searchrl.experiments.experiment import Experiment
    from searchrl.experiments.runner_plan import plan_run

    overrides = {name: yaml.safe_load(value) for name, value in args.param}
    cfg = plan_run(args.notebook, args.params, overrides).config
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        exp = Experiment(cfg, notebook="sft_padding", run_dir=tempfile.mkdtemp())
    items = exp.cold_start_items()
    trajectories = sum(item.get("qtype") != FACT_QTYPE for item in items)
    lengths = [len(ids) for ids in tokenize_sft(items, exp.tokenizer, 1024)["input_ids"]]
    generator = torch.Generator()
    generator.manual_seed(cfg.seed)
    grouped = list(LengthGroupedSampler(args.batch, lengths=lengths, generator=generator))

    print(f"{len(lengths)} items ({trajectories} trajectories), {sum(lengths)} tokens unpadded; "
          f"median {sorted(lengths)[len(lengths) // 2]}, longest {max(lengths)}")
    print(f"{'forward pass':>13}{'random (5 seeds)':>26}{'grouped':>10}{'ratio':>8}")
    table = []
    for micro in sorted({m for m in (1, 2, 4, args.batch) if args.batch % m == 0}):
        random_counts = []
        for seed in range(5):
            order = list(range(len(lengths)))
            random.Random(seed).shuffle(order)
            random_counts.append(padded_tokens(lengths, order, micro))
        grouped_count = padded_tokens(lengths, grouped, micro)
        mean = sum(random_counts) / len(random_counts)
        table.append({"micro_batch": micro, "random": random_counts, "grouped": grouped_count,
                      "ratio": round(mean / grouped_count, 2)})
        print(f"{micro:>13}{f'{min(random_counts)}-{max(random_counts)}':>26}{grouped_count:>10}"
              f"{mean / grouped_count:>8.2f}")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"sft_padding-{time.strftime('%Y%m%d-%H%M%S')}.json"
    path.write_text(json.dumps({"notebook": args.notebook, "params": args.params, "overrides": overrides,
                                "items": len(lengths), "trajectories": trajectories,
                                "unpadded_tokens": sum(lengths), "table": table}, indent=2) + "\n")
    print(f"saved {path}")


if __name__ == "__main__":
    main()
