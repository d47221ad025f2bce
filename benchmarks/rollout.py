"""Speed of search rollouts against plain generation, and of a SearchGRPOTrainer step against TRL's GRPOTrainer.

Both comparisons run side by side in one process, on the same model, batch and token counts:
  1. tokens/s of sampled tokens: search rollouts (generate -> retrieve -> append -> continue) versus one plain
     `generate` call producing the same number of sampled tokens per sequence. Target: ratio >= 0.9.
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

os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--policy", default="smollm2-135m-instruct", help="bundled name, local path or hub id")
    ap.add_argument("--tiny", action="store_true", help="use a random tiny model (fast check of the script)")
    ap.add_argument("--protocol", default="search_r1")
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--top-k", type=int, default=2, help="documents per search (the CPU demo uses 2)")
    ap.add_argument("--passage-words", type=int, default=40, help="synthetic passage length (the CPU demo uses 40)")
    ap.add_argument("--max-completion", type=int, default=256)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--train-steps", type=int, default=3, help="0 skips the trainer comparison")
    ap.add_argument("--out", default="outputs/benchmarks")
    args = ap.parse_args()

    from transformers import GenerationConfig  # noqa: F401  (import cost outside the timings)

    from searchrl.data.synthetic import make_world
    from searchrl.models import load_policy, policy_path, save_policy, tiny_test_policy
    from searchrl.protocols import get_protocol
    from searchrl.retrieval import BM25Retriever
    from searchrl.rollout import HFTurnGenerator, RolloutConfig, SearchRollout

    torch.manual_seed(0)
    model, tok = tiny_test_policy(0) if args.tiny else load_policy(args.policy, device="cpu")
    model.eval()
    protocol = get_protocol(args.protocol)
    world = make_world(seed=0, n_entities=200, words_per_passage=args.passage_words)
    retriever = BM25Retriever(world.corpus, show_progress=False)
    rows = world.splits["test"][: args.batch]
    prompts = [tok(protocol.build_prompt(r["question"], tok), add_special_tokens=False)["input_ids"] for r in rows]

    engine = SearchRollout(protocol, retriever, tok, HFTurnGenerator(model, tok, protocol.stop_strings),
                           RolloutConfig(max_completion_tokens=args.max_completion, top_k=args.top_k))
    search_times, sampled, searches = [], 0, 0
    for _ in range(args.repeats):
        t0 = time.perf_counter()
        trajs = engine.run(prompts)
        search_times.append(time.perf_counter() - t0)
        sampled = sum(sum(t.env_mask) for t in trajs)
        searches = sum(t.num_searches for t in trajs)
    per_seq = max(1, round(sampled / len(prompts)))

    # Plain generation of the same number of sampled tokens per sequence, same batch, same sampler.
    width = max(len(p) for p in prompts)
    ids = torch.full((len(prompts), width), tok.pad_token_id)
    att = torch.zeros_like(ids)
    for i, p in enumerate(prompts):
        ids[i, width - len(p):], att[i, width - len(p):] = torch.tensor(p), 1
    plain_times = []
    for _ in range(args.repeats):
        t0 = time.perf_counter()
        with torch.no_grad():
            model.generate(input_ids=ids, attention_mask=att, max_new_tokens=per_seq, min_new_tokens=per_seq,
                           do_sample=True, pad_token_id=tok.pad_token_id)
        plain_times.append(time.perf_counter() - t0)
    search_tps = sampled / min(search_times)
    plain_tps = per_seq * len(prompts) / min(plain_times)
    result = {
        "model": "tiny" if args.tiny else args.policy, "batch": len(prompts), "protocol": args.protocol,
        "top_k": args.top_k, "passage_words": args.passage_words,
        "sampled_tokens": sampled, "searches": searches, "search_rollout_s": min(search_times),
        "plain_generate_s": min(plain_times), "search_tokens_per_s": search_tps, "plain_tokens_per_s": plain_tps,
        "rollout_ratio": search_tps / plain_tps,
    }
    print(f"search rollouts: {search_tps:.1f} tok/s ({searches} searches) | plain generate: {plain_tps:.1f} tok/s "
          f"| ratio {result['rollout_ratio']:.2f} (target >= 0.9)")

    if args.train_steps:
        from trl import GRPOConfig, GRPOTrainer

        from searchrl.trainer import SearchGRPOConfig, SearchGRPOTrainer, prompt_dataset

        path = save_policy(model, tok, tempfile.mkdtemp()) if args.tiny else policy_path(args.policy)
        data = prompt_dataset(world.splits["train"][:64], protocol, tok)
        common = {"per_device_train_batch_size": 8, "num_generations": 4, "max_steps": args.train_steps,
                  "use_cpu": True, "bf16": False, "report_to": "none", "save_strategy": "no", "logging_steps": 1,
                  "beta": 0.0}

        def length_reward(completions, **kwargs):
            return [float(len(c) % 7) for c in completions]

        search_args = SearchGRPOConfig(output_dir=tempfile.mkdtemp(), max_completion_length=args.max_completion,
                                       retrieval_top_k=args.top_k, **common)
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
