"""Does a policy tell the question types apart where it decides to search again? Its next-token odds at that point.

A search policy on the synthetic world makes one decision that per-question judgement is about: after reading the
first documents, search again or answer. The cold start's demonstrations write that decision as the first word
after the reading of the first hop ("... the mother of X is Y." then " Next, I will search ..." / " Now I need ..."
or " So the answer is ..."). This script puts every policy it is given in the same place: the demonstration of each
question, cut right after that reading (identical text for every policy), and reads the next-token probabilities of
the words that continue with a search (" Now", " Next") and the word that answers (" So").

Per question type it prints the mean log-odds of searching again, log P(search words) - log P(answer word), the
share of questions where searching is the likelier choice, and how much of the next-token mass those words hold.
Judgement shows as a gap: high odds on two-hop types (inference), low on single_hop. RL that moves only a shared
bias shifts both types together and leaves the gap where it was.

    python benchmarks/decision_point.py -p top_k 1 -p n_eval 200 \
        --policy outputs/cold_starts/two-search-96x1-topk1 --policy outputs/quickstart/<run>/checkpoints/rl

With `--at plan` the same is read one step earlier, for policies cold-started with `sft_plan_thought`: right after
the question, at "<think> This needs", the odds of " two" (facts) against " one".

Writes outputs/benchmarks/decision_point-<time>.json with every question's numbers.
"""

from __future__ import annotations

import argparse
import json
import math
import time
from pathlib import Path

import pandas as pd
import torch

from searchrl.config import RunConfig, parse_scalar
from searchrl.data.synthetic.trajectories import hop_plan, templated_trajectories
from searchrl.experiments.experiment import Experiment

# (words that lead to another search, words that lead to the answer), per decision point
WORDS = {
    "reading": ((" Now", " Next"), (" So",)),  # NEXT_THOUGHTS in data/synthetic/trajectories.py / the conclusion
    "plan": ((" two",), (" one",)),  # plan_sentence: "This needs two facts: ..." / "This needs one fact: ..."
}
PLAN_OPENING = "This needs"


def decision_contexts(exp: Experiment, types: list[str], at: str = "reading") -> list[dict]:
    """Each held-out question of `types` as its demonstration cut after the reading of its first hop (`at`
    "reading"), or right after the question and the plan's opening words (`at` "plan")."""
    rows = [r for r in exp.eval_rows if r["metadata"].get("type") in types]
    items = templated_trajectories(rows, exp.protocol, exp.retriever, rollout=exp.cfg.rollout_config(),
                                   tokenizer=exp.tokenizer, chat=exp.cfg.chat_prompt, seed=exp.cfg.seed)
    if at == "plan":  # the same opening after every question, in the protocol's own thought tags
        thought = exp.protocol.render_thought(PLAN_OPENING, first=True)
        opening = thought[:thought.index(PLAN_OPENING) + len(PLAN_OPENING)]
        return [{"id": item["id"], "qtype": item["qtype"], "hops": item["hops"], "prompt_chars": len(item["prompt"]),
                 "context": item["prompt"] + opening} for item in items]
    by_id = {r["id"]: r for r in rows}
    out = []
    for item in items:
        text = "".join(part for part, _ in item["segments"])
        first = hop_plan(by_id[item["id"]])[0]
        after_docs = text.find(exp.protocol.obs_close)  # the reading comes after the first documents
        reading = f"of {first.subject} is {first.answer}."
        cut = text.find(reading, after_docs) if after_docs >= 0 else -1
        if cut < 0:
            continue
        out.append({"id": item["id"], "qtype": item["qtype"], "hops": item["hops"],
                    "prompt_chars": len(item["prompt"]), "context": item["prompt"] + text[:cut + len(reading)]})
    return out


def first_token(tokenizer, context: str, word: str) -> int:
    """The token a policy would sample first to write `word` right after `context` (checked to be a clean split)."""
    ctx = tokenizer(context, add_special_tokens=False)["input_ids"]
    full = tokenizer(context + word + " the", add_special_tokens=False)["input_ids"]
    if full[:len(ctx)] != ctx:
        raise ValueError(f"{word!r} does not start a new token after the context; the probe needs a clean split")
    return full[len(ctx)]


@torch.no_grad()
def decision_odds(model, tokenizer, contexts: list[dict], at: str = "reading") -> pd.DataFrame:
    search_words, answer_words = WORDS[at]
    rows = []
    for c in contexts:
        ids = tokenizer(c["context"], add_special_tokens=False, return_tensors="pt")["input_ids"]
        logp = torch.log_softmax(model(input_ids=ids).logits[0, -1].float(), dim=-1)
        search = torch.logsumexp(torch.stack([logp[first_token(tokenizer, c["context"], w)] for w in search_words]), 0)
        answer = torch.logsumexp(torch.stack([logp[first_token(tokenizer, c["context"], w)] for w in answer_words]), 0)
        rows.append({"id": c["id"], "qtype": c["qtype"], "log_odds_search": float(search - answer),
                     "mass": math.exp(float(torch.logaddexp(search, answer)))})
    return pd.DataFrame(rows)


def summary(frame: pd.DataFrame) -> pd.DataFrame:
    return frame.groupby("qtype").agg(questions=("id", "size"), log_odds_search=("log_odds_search", "mean"),
                                      search_likelier=("log_odds_search", lambda x: float((x > 0).mean())),
                                      mass=("mass", "mean"))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("-f", "--params", default="params/quickstart/cpu.yaml")
    ap.add_argument("-p", nargs=2, action="append", default=[], metavar=("NAME", "VALUE"), help="override a field")
    ap.add_argument("--policy", action="append", required=True, help="a saved policy folder (repeat for several)")
    ap.add_argument("--types", default="single_hop,inference", help="question types to probe (comma-separated)")
    ap.add_argument("--at", choices=tuple(WORDS), default="reading",
                    help="after the first documents' reading, or at the plan's count (sft_plan_thought policies)")
    ap.add_argument("--out", default="outputs/benchmarks")
    args = ap.parse_args()

    overrides = {name: parse_scalar(value) for name, value in args.p}
    cfg = RunConfig.from_params(None, args.params, **{"run_name": "decision-point", "rl_steps": 0, **overrides})
    exp = Experiment(cfg, notebook="benchmarks")
    contexts = decision_contexts(exp, args.types.split(","), args.at)
    print(f"{len(contexts)} decision points: " + ", ".join(
        f"{t} {n}" for t, n in pd.Series([c["qtype"] for c in contexts]).value_counts().items()))
    results, records = {}, []
    for policy in args.policy:
        frame = decision_odds(exp.load_model(policy), exp.tokenizer, contexts, args.at)
        table = summary(frame)
        gap = table["log_odds_search"].max() - table["log_odds_search"].min()
        print(f"\n{policy}\n{table.round(3).to_string()}\ngap between types (log-odds): {gap:.3f}")
        results[policy] = {"by_type": table.reset_index().to_dict("records"), "gap": gap}
        records += [{"policy": policy, **r} for r in frame.to_dict("records")]
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"decision_point-{time.strftime('%Y%m%d-%H%M%S')}.json"
    path.write_text(json.dumps({"params": args.params, "overrides": overrides, "at": args.at,
                                "search_words": WORDS[args.at][0], "answer_words": WORDS[args.at][1],
                                "policies": results, "records": records},
                               indent=1, default=str))
    print(f"saved {path}")


if __name__ == "__main__":
    main()
