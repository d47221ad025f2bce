"""Speed of search rollouts against plain generation, and of a SearchGRPOTrainer step against TRL's GRPOTrainer.

Both comparisons run side by side in one process, on the same model, batch and token counts:
  1. tokens/s of sampled tokens: search rollouts (generate -> retrieve -> append -> continue; with the KV cache
     kept across turns, with and without one shared prefill of the prompts' common opening, and re-prefilled every
     turn) versus one plain `generate` call sampling the same tokens:
     row i samples exactly as many as search row i did ("matched"), or every row the mean ("uniform", which hides
     the cost of uneven lengths that plain sampling also pays). Target: ratio >= 1.0. Also where the rollout's
     time goes: prefill of prompts and documents, decode steps, sampling, retrieval, the rest (bookkeeping).
  2. seconds per training step: SearchGRPOTrainer versus GRPOTrainer generating the same number of tokens without
     search. Target: ratio <= 1.15.

    python benchmarks/rollout.py                      # bundled SmolLM2-135M, synthetic world, BM25
    python benchmarks/rollout.py --policy PATH        # e.g. a cold-started checkpoint that searches more
    python benchmarks/rollout.py --tiny               # random tiny model: checks the script in seconds
Results are printed and saved to outputs/benchmarks/rollout-<time>.json.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path

import torch
from transformers import StoppingCriteria, StoppingCriteriaList

os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")


class RowLengths(StoppingCriteria):
    """Ends row i of a batched `generate` after lengths[i] new tokens (finished rows wait as padding)."""

    def __init__(self, lengths: list[int], prompt_width: int):
        self.lengths, self.width = torch.tensor(lengths), prompt_width

    def __call__(self, input_ids, scores, **kwargs):
        return (input_ids.shape[1] - self.width) >= self.lengths.to(input_ids.device)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--policy", default="smollm2-135m-instruct", help="bundled name, local path or hub id")
    ap.add_argument("--tiny", action="store_true", help="use a random tiny model (fast check of the script)")
    ap.add_argument("--protocol", default="search_r1")
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--top-k", type=int, default=2, help="documents per search (the CPU demo uses 2)")
    ap.add_argument("--passage-words", type=int, default=40, help="synthetic passage length (the CPU demo uses 40)")
    ap.add_argument("--max-completion", type=int, default=384, help="token budget per sample (the CPU demo uses 384)")
    ap.add_argument("--max-turn-tokens", type=int, default=96, help="cap on one turn (the CPU demo uses 96; 0: none)")
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--train-steps", type=int, default=3, help="0 skips the trainer comparison")
    ap.add_argument("--out", default="outputs/benchmarks")
    ap.add_argument("--device", default="cpu", help="cpu, cuda or cuda:N (the model, rollouts and trainer steps)")
    args = ap.parse_args()


    from searchrl.data.synthetic import make_world
    from searchrl.models import load_policy, policy_path, save_policy, tiny_test_policy
    from searchrl.protocols import get_protocol
    from searchrl.retrieval import BM25Retriever
    from searchrl.rollout import HFTurnGenerator, RolloutConfig, SearchRollout
    from searchrl.rollout.kv_turns import shared_prefill_length

    torch.manual_seed(0)
    model, tok = tiny_test_policy(0) if args.tiny else load_policy(args.policy, device=args.device)
    model.eval()
    if args.tiny:
        model.to(args.device)
    protocol = get_protocol(args.protocol)
    world = make_world(seed=0, n_entities=200, words_per_passage=args.passage_words)
    retriever = BM25Retriever(world.corpus, show_progress=False)
    rows = world.splits["test"][: args.batch]
    prompts = [tok(protocol.build_prompt(r["question"], tok), add_special_tokens=False)["input_ids"] for r in rows]

    rollout_cfg = RolloutConfig(max_completion_tokens=args.max_completion, top_k=args.top_k,
                                max_turn_tokens=args.max_turn_tokens)

    width = max(len(p) for p in prompts)
    ids = torch.full((len(prompts), width), tok.pad_token_id)
    att = torch.zeros_like(ids)
    for i, p in enumerate(prompts):
        ids[i, width - len(p):], att[i, width - len(p):] = torch.tensor(p), 1

    ids, att = ids.to(model.device), att.to(model.device)

    def plain_generate(lengths: list[int]) -> float:
        """Seconds for one `generate` call in which row i samples exactly lengths[i] tokens (no search)."""
        stop = StoppingCriteriaList([RowLengths(lengths, width)])
        t0 = time.perf_counter()
        with torch.no_grad():
            # min_new_tokens keeps EOS away, so every row samples exactly its count.
            model.generate(input_ids=ids, attention_mask=att, max_new_tokens=max(lengths), do_sample=True,
                           min_new_tokens=max(lengths), stopping_criteria=stop, pad_token_id=tok.pad_token_id)
        return time.perf_counter() - t0

    # The same plain generation through the rollout's own decode loop (its sampler is faster than `generate`'s),
    # so the comparison with search rollouts can also be read with the sampler held equal.
    own = HFTurnGenerator(model, tok, [])
    own.kv.eos_ids = set()  # exactly lengths[i] tokens per row, as in the `generate` baselines

    def plain_own(lengths: list[int]) -> float:
        t0 = time.perf_counter()
        own.generate_turn(prompts, lengths)
        own.reset()
        return time.perf_counter() - t0

    # Three search paths: the kept cache with the prompts' common opening prefilled once (the default), the kept
    # cache with every prompt prefilled whole, and no kept cache (every turn re-prefilled).
    engines = {key: SearchRollout(protocol, retriever, tok,
                                  HFTurnGenerator(model, tok, protocol.stop_strings, reuse_cache=key != "reprefill"),
                                  rollout_cfg)
               for key in ("search", "unshared", "reprefill")}
    if engines["unshared"].generator.kv is not None:
        engines["unshared"].generator.kv.share_prefix = False
    totals = {"search": 0.0, "unshared": 0.0, "reprefill": 0.0, "plain_uniform": 0.0, "plain_matched": 0.0,
              "plain_own_matched": 0.0}
    sampled, searches, per_row = 0, 0, []
    # What each timed pass is, for the line said as it starts: on a CPU one pass can take minutes.
    passes = {"search": "search rollouts (KV cache kept, common prompt opening prefilled once)",
              "unshared": "search rollouts (KV cache kept, every prompt prefilled whole)",
              "reprefill": "search rollouts (every turn re-prefilled)",
              "plain": "plain generation of the same token counts (matched and uniform lengths)"}
    for repeat in range(args.repeats):
        # The same seed for both rollouts: both generators sample the same trajectories, so only speed differs.
        for key in ("search", "unshared", "reprefill"):
            print(f"repeat {repeat + 1} of {args.repeats}: {passes[key]}", flush=True)
            torch.manual_seed(repeat)
            t0 = time.perf_counter()
            trajs = engines[key].run(prompts)
            totals[key] += time.perf_counter() - t0
        lengths = [sum(t.env_mask) for t in trajs]
        sampled += sum(lengths)
        searches += sum(t.num_searches for t in trajs)
        per_row.append(lengths)
        print(f"repeat {repeat + 1} of {args.repeats}: {passes['plain']}", flush=True)
        # Baselines with the same sampled tokens: row i samples its own count (matched), or all rows the mean.
        totals["plain_matched"] += plain_generate(lengths)
        totals["plain_own_matched"] += plain_own(lengths)
        mean = max(1, round(sum(lengths) / len(lengths)))
        totals["plain_uniform"] += plain_generate([mean] * len(lengths)) * sum(lengths) / (mean * len(lengths))
    tps = {key: sampled / seconds for key, seconds in totals.items()}
    # Where the search rollouts' time went: model work (prefill of prompts and of appended documents, one-token
    # decode steps, sampling), the retriever, and everything else (turn bookkeeping, tokenising observations).
    kv, engine = engines["search"].generator.kv, engines["search"]
    parts = {**(kv.stats if kv is not None else {}), "retrieval_s": engine.retrieval_s}
    parts["other_s"] = totals["search"] - sum(parts.values())
    breakdown = {key: value / totals["search"] for key, value in parts.items()}
    result = {
        "model": "tiny" if args.tiny else args.policy, "batch": len(prompts), "protocol": args.protocol,
        "top_k": args.top_k, "passage_words": args.passage_words, "max_completion": args.max_completion,
        "max_turn_tokens": args.max_turn_tokens, "repeats": args.repeats, "torch_threads": torch.get_num_threads(),
        "sampled_tokens": sampled, "searches": searches, "sampled_per_row": per_row,
        **{f"{key}_s": seconds for key, seconds in totals.items()},
        **{f"{key}_tokens_per_s": value for key, value in tps.items()},
        "rollout_ratio": tps["search"] / tps["plain_matched"],
        "rollout_ratio_uniform": tps["search"] / tps["plain_uniform"],
        "reprefill_ratio": tps["reprefill"] / tps["plain_matched"],
        "unshared_ratio": tps["unshared"] / tps["plain_matched"],
        "shared_prefix_tokens": shared_prefill_length([list(p) for p in dict.fromkeys(map(tuple, prompts))]),
        "rollout_ratio_same_sampler": tps["search"] / tps["plain_own_matched"],
        "search_time_shares": breakdown,
        "retrieval_and_bookkeeping_share": breakdown["retrieval_s"] + breakdown["other_s"],
    }
    print(f"sampled tok/s: search rollouts {tps['search']:.1f} (KV cache kept) / {tps['reprefill']:.1f} (re-prefilled "
          f"each turn), {searches} searches | plain generate {tps['plain_matched']:.1f} (each row its own length) / "
          f"{tps['plain_uniform']:.1f} (all rows the mean length) / {tps['plain_own_matched']:.1f} (matched, rollout's "
          f"own decode loop)\n"
          f"ratio {result['rollout_ratio']:.2f} against matched lengths (target >= 1.0); "
          f"{result['rollout_ratio_uniform']:.2f} against uniform lengths; {result['rollout_ratio_same_sampler']:.2f} "
          f"against matched lengths with the same decode loop; {result['unshared_ratio']:.2f} without one shared "
          f"prefill of the prompts' common {result['shared_prefix_tokens']} tokens; {result['reprefill_ratio']:.2f} "
          f"without the kept cache")
    print("search rollout time: " + ", ".join(f"{k[:-2]} {v:.0%}" for k, v in breakdown.items())
          + f" -> retrieval and bookkeeping {result['retrieval_and_bookkeeping_share']:.1%} (target <= 10%)")

    if args.train_steps:
        from trl import GRPOConfig, GRPOTrainer

        from searchrl.trainer import SearchGRPOConfig, SearchGRPOTrainer, prompt_dataset

        path = save_policy(model, tok, tempfile.mkdtemp()) if args.tiny else policy_path(args.policy)
        data = prompt_dataset(world.splits["train"][:64], protocol, tok)
        common = {"per_device_train_batch_size": 8, "num_generations": 4, "max_steps": args.train_steps,
                  "use_cpu": args.device == "cpu", "bf16": False, "report_to": "none", "save_strategy": "no", "logging_steps": 1,
                  "beta": 0.0}

        def length_reward(completions, **kwargs):
            return [float(len(c) % 7) for c in completions]

        search_args = SearchGRPOConfig(output_dir=tempfile.mkdtemp(), rollout=rollout_cfg, **common)
        trainer = SearchGRPOTrainer(model=str(path), reward_funcs=[length_reward], args=search_args,
                                    train_dataset=data, retriever=retriever, processing_class=tok)
        trainer.train()
        steps = [h for h in trainer.state.log_history if "step_time" in h]
        search_step = min(h["step_time"] for h in steps)
        total_tokens = sum(h["completions/total_tokens"] for h in steps) / len(steps)
        n_tokens = max(1, round(total_tokens))
        plain_args = GRPOConfig(output_dir=tempfile.mkdtemp(), max_completion_length=n_tokens,
                                generation_kwargs={"min_new_tokens": n_tokens}, **common)
        plain = GRPOTrainer(model=str(path), reward_funcs=[length_reward], args=plain_args, train_dataset=data,
                            processing_class=tok)
        plain.train()
        plain_step = min(h["step_time"] for h in plain.state.log_history if "step_time" in h)
        result.update({"train_tokens_per_sample": n_tokens, "search_step_s": search_step, "plain_step_s": plain_step,
                       "step_ratio": search_step / plain_step})
        print(f"trainer step: search {search_step:.2f}s | plain GRPO {plain_step:.2f}s | ratio "
              f"{result['step_ratio']:.2f} (target <= 1.15)")

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"rollout-{time.strftime('%Y%m%d-%H%M%S')}.json"
    path.write_text(json.dumps(result, indent=2))
    print(f"saved {path}")


if __name__ == "__main__":
    main()
