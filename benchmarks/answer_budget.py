"""How many tokens a correct answer of each question type needs, against a profile's max_completion_tokens.

Writes the templated (correct) trajectory of every training question of the profile's synthetic world and counts
its completion tokens (sampled and retrieved, as a rollout counts them), per question type and per number of
searches. A type whose answers do not fit cannot be rewarded by RL: check a profile before spending hours on it.

    python benchmarks/answer_budget.py -f params/quickstart/cpu.yaml
    python benchmarks/answer_budget.py -f params/quickstart/cpu.yaml -p max_completion_tokens 640 -p top_k 1

Prints a table and writes outputs/benchmarks/answer_budget-<time>.json.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import yaml

from searchrl.config import RunConfig
from searchrl.data.synthetic import make_world
from searchrl.data.synthetic.budget import answer_budget, budget_problems
from searchrl.models import load_tokenizer
from searchrl.protocols import get_protocol
from searchrl.retrieval import make_retriever


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("-f", "--params", action="append", default=[], help="params file(s), later ones win")
    ap.add_argument("-p", "--param", nargs=2, action="append", default=[], metavar=("NAME", "VALUE"),
                    help="one parameter (YAML value)")
    ap.add_argument("--out", default="outputs/benchmarks")
    args = ap.parse_args()

    overrides = {name: yaml.safe_load(value) for name, value in args.param}
    cfg = RunConfig.from_params(None, *args.params, **overrides)
    world = make_world(seed=cfg.world_seed, n_entities=cfg.world_entities, words_per_passage=cfg.world_passage_words)
    rows = world.splits["train"]
    retriever = make_retriever(cfg.retriever, world.corpus)
    report = answer_budget(rows, get_protocol(cfg.protocol), retriever, rollout=cfg.rollout_config(),
                           tokenizer=load_tokenizer(cfg.model), chat=cfg.chat_prompt)
    print(f"protocol {cfg.protocol}, top_k {cfg.top_k}, max_searches {cfg.max_searches}, "
          f"{cfg.world_passage_words}-word passages, max_completion_tokens {cfg.max_completion_tokens}")
    print(f"{'type':<18}{'n':>5}{'written':>9}{'median':>8}{'max':>6}{'over budget':>13}")
    for qtype, row in report.items():
        over = "" if row["over_budget"] is None else f"{row['over_budget']:.0%}"
        print(f"{qtype:<18}{row['n']:>5}{row['written']:>9}{row['median_tokens'] or '':>8}{row['max_tokens'] or '':>6}"
              f"{over:>13}")
    for line in budget_problems(report, cfg.max_completion_tokens, what="training questions"):
        print("-", line)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"answer_budget-{time.strftime('%Y%m%d-%H%M%S')}.json"
    path.write_text(json.dumps({"params": args.params, "overrides": overrides, "report": report}, indent=2) + "\n")
    print(f"saved {path}")


if __name__ == "__main__":
    main()
