"""Does the cold start's fact statements make the policy know the internal facts? Closed-book recall before vs after.

Builds a world with a knowledge split, takes `--facts` internal single-hop questions, and cold-starts the policy
(`sft_train`, TRL's SFTTrainer) on nothing but the statements of those questions' facts (`fact_statement_items`,
`--repeats` times each). Before and after, greedy decoding answers each question three ways, none with retrieval:

- cloze:    "The birthplace of X is" -> does the continuation name the answer? (the taught wording itself)
- span:     the R1-Searcher++ prompt with "<|begin_internal_answer|>The birthplace of X is" pre-filled: the very
            place a templated trajectory recalls the fact (does the memory carry into the protocol's context?)
- question: the bare question in the chat template: does the model answer it? (the wording was never taught)

A control of as many external (never taught) facts, after the cold start, checks that "after" is not guessing. A hit is the
golden answer appearing as whole words in the first `--new-tokens` generated tokens.

    python benchmarks/knowledge_memorisation.py --facts 24 --repeats 10 --lr 2e-4

Prints a JSON table and writes outputs/benchmarks/knowledge_memorisation-<time>.json.
"""

from __future__ import annotations

import argparse
import json
import re
import time
from pathlib import Path

import torch

from searchrl.config.knowledge import KnowledgeConfig
from searchrl.data.synthetic import make_world
from searchrl.data.synthetic.knowledge import fact_id
from searchrl.data.synthetic.trajectories import Hop, fact_sentence, fact_statement_items, hop_plan
from searchrl.models import load_policy
from searchrl.protocols import get_protocol
from searchrl.sft import sft_train


def mentions(text: str, phrase: str) -> bool:
    return re.search(rf"(?<!\w){re.escape(phrase.lower())}(?!\w)", text.lower()) is not None


def greedy(model, tokenizer, prompts: list[str], new_tokens: int, batch: int = 8) -> list[str]:
    outs = []
    model.eval()
    for lo in range(0, len(prompts), batch):
        enc = tokenizer(prompts[lo: lo + batch], return_tensors="pt", padding=True, add_special_tokens=False)
        with torch.no_grad():
            ids = model.generate(**enc, max_new_tokens=new_tokens, do_sample=False)
        outs += tokenizer.batch_decode(ids[:, enc["input_ids"].shape[1]:], skip_special_tokens=True)
    return outs


def cloze(hop: Hop) -> str:
    """The fact sentence cut before its answer ("The birthplace of X is")."""
    sentence = fact_sentence(hop)
    return sentence[: sentence.rindex(" is ") + len(" is")]


def recall(model, tokenizer, rows: list[dict], new_tokens: int, span_rows: int) -> dict[str, float]:
    """Share of `rows` (single-hop) whose answer each of the three probes produces; the span probe, whose prompt is
    the ~600-token protocol instruction, runs on the first `span_rows` only."""
    protocol = get_protocol("r1_searcher_pp")
    hops = [hop_plan(r)[0] for r in rows]
    probes = {
        "cloze": [cloze(h) for h in hops],
        "question": [tokenizer.apply_chat_template([{"role": "user", "content": r["question"]}], tokenize=False,
                                                   add_generation_prompt=True) for r in rows],
        "span": [protocol.build_prompt(r["question"], tokenizer) + protocol.internal_open + cloze(h)
                 for r, h in zip(rows[:span_rows], hops)],
    }
    scores = {}
    for name, prompts in probes.items():
        if not prompts:
            continue
        started = time.perf_counter()
        texts = greedy(model, tokenizer, prompts, new_tokens)
        scores[name] = round(sum(mentions(t, h.answer) for t, h in zip(texts, hops)) / len(prompts), 3)
        print(f"  {name}: {scores[name]} on {len(prompts)} ({time.perf_counter() - started:.0f}s); e.g. "
              f"{prompts[0][-60:]!r} -> {texts[0]!r} (gold {hops[0].answer!r})", flush=True)
    return scores


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--facts", type=int, default=24, help="internal single-hop questions (and facts) to teach")
    ap.add_argument("--repeats", type=int, default=10, help="sft_fact_repeats: statements per fact")
    ap.add_argument("--lr", type=float, default=2e-4)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--span", type=int, default=8, help="questions given the (long-prompt) span probe")
    ap.add_argument("--in-span", action="store_true", help="state the facts inside the internal-answer tags")
    ap.add_argument("--frac", type=float, default=0.5, help="knowledge_internal_frac of the world")
    ap.add_argument("--new-tokens", type=int, default=12)
    ap.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    ap.add_argument("--out", default="outputs/benchmarks")
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)

    start = time.perf_counter()
    knowledge = KnowledgeConfig(knowledge_internal_frac=args.frac, sft_fact_repeats=args.repeats)
    world = make_world(seed=0, knowledge=knowledge)
    rows = [r for split in ("train", "dev", "test") for r in world.questions(split, "single_hop")]
    internal = [r for r in rows if r["metadata"]["knowledge"] == "internal"][: args.facts]
    external = [r for r in rows if r["metadata"]["knowledge"] == "external"][: args.facts]
    by_name = {e.name: e for e in world.entities}
    taught = {fact_id(by_name[r["metadata"]["hop_subjects"][0]], r["metadata"]["hop_keys"][0]) for r in internal}
    protocol = get_protocol("r1_searcher_pp") if args.in_span else None
    items = [it for it in fact_statement_items(world, knowledge, protocol) if it["id"].rsplit("-", 1)[0][5:] in taught]

    model, tokenizer = load_policy("smollm2-135m-instruct", device="cpu")
    print("before", flush=True)
    before = {"internal": recall(model, tokenizer, internal, args.new_tokens, args.span)}
    from trl import SFTConfig

    sft = SFTConfig(output_dir=str(Path(args.out) / "knowledge_memorisation_sft"), num_train_epochs=1,
                    learning_rate=args.lr, per_device_train_batch_size=args.batch, max_length=128, seed=0,
                    logging_steps=10, report_to="none", save_strategy="no", activation_checkpointing=False,
                    disable_tqdm=True, use_cpu=True, bf16=False)
    log = sft_train(model, tokenizer, items, sft, stage_bar="fact statements")
    print(f"cold start: {log['steps']} steps, loss {log['train_loss']:.3f}, {log['seconds']:.0f}s; after", flush=True)
    after = {"internal": recall(model, tokenizer, internal, args.new_tokens, args.span),
             "external (control)": recall(model, tokenizer, external, args.new_tokens, 0)}
    result = {"args": vars(args), "facts": len(taught), "sft_items": len(items), "sft_steps": log["steps"],
              "train_loss": round(log["train_loss"], 3), "sft_seconds": round(log["seconds"], 1),
              "before": before, "after": after, "seconds": round(time.perf_counter() - start, 1)}
    print(json.dumps(result, indent=1), flush=True)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / f"knowledge_memorisation-{time.strftime('%Y%m%d-%H%M%S')}.json").write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
