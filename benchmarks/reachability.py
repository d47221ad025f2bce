"""What RL can learn from a policy's own samples: per question type, how often sampled rollouts search 0 / 1 / 2
times, what each search count earns, and how many GRPO groups carry any signal.

GRPO only moves a policy towards behaviour it already samples and that earns more reward than its group mates.
So before spending 30 minutes on an RL run, sample the starting policy the way RL will (the run's temperature,
`--repeats` rollouts per question, as `num_generations` does) and read:

- `p_<n>_searches`: the share of rollouts with n = 0, 1, 2, ... searches (is a second search reachable at all?);
- `f1_<n>_searches`, `em_<n>_searches`: mean F1 and EM of the rollouts with n searches (does a second search pay on
  this type? F1 gives partial credit to a guessed name that shares a word with the answer; EM does not);
- `informative_groups`: the share of questions whose rollouts do not all get the same F1 (the groups that
  `drop_zero_variance` keeps; the rest teach nothing);
- `format_ok` and `hit_length_budget`, since a rollout cut off by the token budget earns nothing.

With `--policy` the given checkpoint is sampled; without it the params file's cold start is trained first (the
same call `make demo` makes), so one command answers "does this cold start leave RL a signal?":

    python benchmarks/reachability.py -f params/quickstart/cpu.yaml --n-questions 40 --repeats 4
    python benchmarks/reachability.py -f params/quickstart/cpu.yaml --policy outputs/cold_starts/X --questions train \
        -p top_k 1 -p train_question_types "[single_hop,inference]"
    python benchmarks/reachability.py -f params/quickstart/cpu.yaml -p top_k 1 \
        -p sft_question_types "[single_hop,inference]" -p sft_examples 96 -p sft_epochs 1.0

Prints one table row per question type and writes outputs/benchmarks/reachability-<time>.json (with every
sampled record, so a reader can look at the rollouts behind a number).
"""

from __future__ import annotations

import argparse
import json
import time
from collections import Counter
from pathlib import Path

import pandas as pd

from searchrl.config import RunConfig, parse_scalar
from searchrl.evaluation.evaluate import completion_text, score_trajectory
from searchrl.experiments.experiment import Experiment
from searchrl.experiments.experiment_data import balanced_take
from searchrl.rollout.loop import rollout_questions


def type_report(records: pd.DataFrame) -> pd.DataFrame:
    """One row per question type (and one for all): the quantities the module docstring lists."""
    rows = []
    for qtype, part in [*records.groupby("qtype"), ("all", records)]:
        counts = Counter(part["searches"])
        spread = part.groupby("id")["f1"].agg(lambda f: f.max() - f.min())
        row = {"qtype": qtype, "questions": part["id"].nunique(), "rollouts": len(part),
               "f1": part["f1"].mean(), "format_ok": part["format_ok"].mean(),
               "hit_length_budget": part["hit_length_budget"].mean(),
               "searches": part["searches"].mean(),
               "informative_groups": float((spread > 0).mean())}
        for n in sorted(counts):
            row[f"p_{n}_searches"] = counts[n] / len(part)
            row[f"f1_{n}_searches"] = part.loc[part["searches"] == n, "f1"].mean()
            row[f"em_{n}_searches"] = part.loc[part["searches"] == n, "em"].mean()
        rows.append(row)
    return pd.DataFrame(rows).set_index("qtype")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("-f", "--params", default="params/quickstart/cpu.yaml")
    ap.add_argument("-p", nargs=2, action="append", default=[], metavar=("NAME", "VALUE"), help="override a field")
    ap.add_argument("--policy", default=None, help="a saved policy folder to sample (default: train the cold start)")
    ap.add_argument("--n-questions", type=int, default=40, help="questions, balanced over their types")
    ap.add_argument("--questions", choices=("eval", "train"), default="eval",
                    help="held-out questions (all types), or the run's training questions (train_question_types)")
    ap.add_argument("--repeats", type=int, default=4, help="rollouts per question (GRPO's group size)")
    ap.add_argument("--batch-size", type=int, default=16, help="sequences per generation batch")
    ap.add_argument("--out", default="outputs/benchmarks")
    args = ap.parse_args()

    overrides = {name: parse_scalar(value) for name, value in args.p}
    cfg = RunConfig.from_params(None, args.params, **{"run_name": "reachability", "rl_steps": 0, **overrides})
    exp = Experiment(cfg, notebook="benchmarks")
    start = time.perf_counter()
    model = exp.load_model(args.policy) if args.policy else exp.cold_start(exp.load_model())
    trained_s = time.perf_counter() - start
    pool = exp.eval_rows if args.questions == "eval" else exp.train_rows
    rows = balanced_take(pool, args.n_questions, None, cfg.world_seed + 1)
    records = []
    start = time.perf_counter()
    for row, _, trajs in rollout_questions(model, exp.tokenizer, exp.protocol, exp.retriever, rows,
                                           cfg.rollout_config(), greedy=False, batch_size=args.batch_size,
                                           chat=cfg.chat_prompt, repeats=args.repeats, desc="sampled rollouts"):
        records += [score_trajectory(row, t, completion_text(t, exp.tokenizer), exp.protocol) for t in trajs]
    sampled_s = time.perf_counter() - start
    table = type_report(pd.DataFrame(records))
    with pd.option_context("display.width", 200, "display.max_columns", 30, "display.precision", 3):
        print(table)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"reachability-{time.strftime('%Y%m%d-%H%M%S')}.json"
    path.write_text(json.dumps({
        "params": args.params, "overrides": overrides, "policy": args.policy or str(exp.run_dir),
        "questions": args.questions, "temperature": cfg.temperature, "repeats": args.repeats, "cold_start_seconds": round(trained_s, 1),
        "sampling_seconds": round(sampled_s, 1), "by_type": table.reset_index().to_dict("records"),
        "records": records}, indent=1, default=str))
    print(f"saved {path} (cold start {trained_s:.0f} s, sampling {sampled_s:.0f} s)")


if __name__ == "__main__":
    main()
