"""RL's forward and backward passes with and without the shared prompt prefix (`shared_prefix`), side by side.

Real rollouts from a run's training log (trajectories/train/rl/step-*.jsonl: question and completion with its
retrieved documents) are laid out as TRL lays out a micro-batch (prompts left-padded, completions right-padded)
and scored by the policy both ways, alternating, on the same micro-batches: TRL's `_get_per_token_logps_and_entropies`
and `searchrl.trainer.shared_prefix`. Each timing is a forward pass and the backward of the summed log-probability
of the completion's tokens. Micro-batches are drawn at random from the step (TRL shuffles a generation batch before
cutting it), so rows mostly share only the instructions; `--grouped` draws whole groups (rows of one question).

    python benchmarks/shared_prefix.py --rollouts outputs/quickstart/<run>/trajectories/train/rl/step-0001.jsonl \\
        --policy outputs/cold_starts/<cold start> --micro 4 --micro 16
    python benchmarks/shared_prefix.py --tiny           # random tiny model and made-up rollouts: checks the script
Results are printed and saved to outputs/benchmarks/shared_prefix-<time>.json.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import time
from contextlib import nullcontext
from pathlib import Path
from types import SimpleNamespace

os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")


def read_rollouts(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def add_rollout_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of a benchmark that scores a run's logged rollouts with a policy (this one and bf16_pass.py)."""
    parser.add_argument("--rollouts", type=Path, help="a training rollout log (step-NNNN.jsonl)")
    parser.add_argument("--policy", default="smollm2-135m-instruct", help="checkpoint folder or bundled name")
    parser.add_argument("--protocol", default="search_r1")
    parser.add_argument("--max-completion", type=int, default=512)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--tiny", action="store_true", help="random tiny model, made-up rollouts")
    parser.add_argument("--out", type=Path, default=Path("outputs/benchmarks"))


def policy_and_rollouts(args, parser: argparse.ArgumentParser, temperature: float):
    """(model in training mode with TRL's fused LM head, tokenizer, protocol, rollout rows) for `args`."""
    from trl.trainer.utils import add_fused_lm_head

    from searchrl.models import load_policy, tiny_test_policy
    from searchrl.protocols import get_protocol

    model, tokenizer = tiny_test_policy(seed=0) if args.tiny else load_policy(args.policy, device="cpu")
    model.train()
    add_fused_lm_head(model, temperature=temperature)
    if args.tiny:
        rows = [{"id": f"q{i // 4}", "question": f"Where was person {i // 4} born?", "advantage": (-1.0) ** i,
                 "completion": "<think> one fact </think> <search> person born </search>" * 4} for i in range(16)]
    else:
        if args.rollouts is None:
            parser.error("--rollouts is required (or --tiny)")
        rows = read_rollouts(args.rollouts)
    return model, tokenizer, get_protocol(args.protocol), rows


def save_result(args, name: str, payload: dict) -> Path:
    """Write the run's arguments (paths as text), thread count and `payload` to <out>/<name>-<time>.json."""
    import torch

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"{name}-{time.strftime('%Y%m%d-%H%M%S')}.json"
    argv = {key: str(value) if isinstance(value, Path) else value for key, value in vars(args).items()}
    path.write_text(json.dumps({"argv": argv, "threads": torch.get_num_threads(), **payload}, indent=2))
    return path


def layout(tokenizer, protocol, rows: list[dict], max_completion: int):
    """TRL's layout of one micro-batch: (input_ids, attention_mask, completion width)."""
    import torch

    prompts = [tokenizer(protocol.build_prompt(r["question"], tokenizer), add_special_tokens=False)["input_ids"]
               for r in rows]
    completions = [tokenizer(r["completion"], add_special_tokens=False)["input_ids"][:max_completion] for r in rows]
    width, c_width = max(map(len, prompts)), max(map(len, completions))
    ids = torch.full((len(rows), width + c_width), tokenizer.pad_token_id)
    mask = torch.zeros_like(ids)
    for i, (p, c) in enumerate(zip(prompts, completions, strict=True)):
        ids[i, width - len(p):width], mask[i, width - len(p):width] = torch.tensor(p), 1
        ids[i, width:width + len(c)], mask[i, width:width + len(c)] = torch.tensor(c), 1
    return ids, mask, c_width


def timed_pass(fn, model, ids, mask, keep) -> float:
    model.zero_grad(set_to_none=True)
    start = time.perf_counter()
    logps = fn(model, ids, mask, keep)
    (logps * mask[:, -keep:]).sum().backward()
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_rollout_arguments(parser)
    parser.add_argument("--micro", type=int, action="append", help="rows per micro-batch (repeatable; default 4)")
    parser.add_argument("--batches", type=int, default=6, help="micro-batches timed per size (after one warm-up)")
    parser.add_argument("--grouped", action="store_true", help="micro-batches of whole groups (one question)")
    args = parser.parse_args()

    from trl import GRPOTrainer

    from searchrl.trainer.shared_prefix import shared_prefix_length, shared_prefix_logps

    model, tokenizer, protocol, rows = policy_and_rollouts(args, parser, temperature=0.7)
    owner = SimpleNamespace(accelerator=SimpleNamespace(autocast=nullcontext, is_main_process=True))

    def trl(model, ids, mask, keep):
        return GRPOTrainer._get_per_token_logps_and_entropies(owner, model, ids, mask, keep)[0]

    def shared(model, ids, mask, keep):
        result = shared_prefix_logps(model, ids, mask, keep)
        return result[0] if result is not None else trl(model, ids, mask, keep)

    groups: dict[str, list[dict]] = {}
    for r in rows:
        groups.setdefault(r["id"], []).append(r)
    rng = random.Random(args.seed)
    results = []
    for micro in args.micro or [4]:
        seconds = {"trl": [], "shared": []}
        tokens = {"trl": 0, "shared": 0}
        for batch in range(args.batches + 1):
            if args.grouped:
                group = rng.choice(list(groups.values()))
                chosen = (group * micro)[:micro]
            else:
                chosen = rng.sample(rows, micro)
            ids, mask, keep = layout(tokenizer, protocol, chosen, args.max_completion)
            prefix = shared_prefix_length(ids, mask, ids.size(1) - keep)
            order = [("trl", trl), ("shared", shared)]
            if batch % 2:
                order.reverse()  # alternate which runs first, so neither always meets a warm cache
            for name, fn in order:
                took = timed_pass(fn, model, ids, mask, keep)
                if batch:  # the first micro-batch warms up
                    seconds[name].append(took)
            if batch:
                real = int(mask.sum())
                tokens["trl"] += real
                tokens["shared"] += real - (micro - 1) * prefix
        row = {"micro_batch": micro, "batches": args.batches,
               "trl_s": statistics.median(seconds["trl"]), "shared_s": statistics.median(seconds["shared"]),
               "trl_tokens": tokens["trl"], "shared_tokens": tokens["shared"]}
        row["speedup"] = sum(seconds["trl"]) / sum(seconds["shared"])
        results.append(row)
        print(f"micro-batch {micro:3d}: TRL {row['trl_s']:.2f} s, shared prefix {row['shared_s']:.2f} s (medians), "
              f"{row['speedup']:.2f}x over {args.batches} micro-batches; tokens run {tokens['trl']} -> "
              f"{tokens['shared']}", flush=True)
    out = save_result(args, "shared_prefix", {"results": results})
    print(f"saved {out}")


if __name__ == "__main__":
    main()
