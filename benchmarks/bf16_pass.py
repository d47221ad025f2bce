"""RL's forward and backward passes in float32 and under bfloat16 autocast (`bf16: true`), side by side.

Real rollouts from a run's training log (trajectories/train/rl/step-*.jsonl) are laid out as TRL lays out a
micro-batch and scored by the float32 policy both ways, alternating which runs first, on the same micro-batches,
through the pass RL runs (`shared_prefix`, TRL's own where it falls back). Each pass is the forward and the backward
of a GRPO-shaped objective: the rollout's logged advantage times its mean completion log-probability. Besides the
time, it reports how far autocast moves what the update is made of: the log-probabilities (mean and largest
absolute difference over completion tokens), the gradient (cosine similarity to float32's, and the relative size of
the difference) and Adam's first step (about the gradient's sign), since a faster pass is worth having only if it
points the update the same way. As a yardstick, the cosine between two micro-batches' float32 gradients: the noise
that sampling other rollouts puts into an update anyway.

    python benchmarks/bf16_pass.py --rollouts outputs/<notebook>/<run>/.../trajectories/train/rl/step-0001.jsonl \\
        --policy <the run's cold start> --protocol search_r1_compact --micro 4
    python benchmarks/bf16_pass.py --tiny         # random tiny model and made-up rollouts: checks the script
Results are printed and saved to outputs/benchmarks/bf16_pass-<time>.json.
"""

from __future__ import annotations

import argparse
import math
import os
import random
import statistics
import time
from contextlib import nullcontext

from shared_prefix import add_rollout_arguments, layout, policy_and_rollouts, save_result  # shared setup

os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")


def scored_pass(model, ids, mask, keep, advantages, autocast):
    """(seconds, completion log-probs, flattened gradient) of one forward and backward under `autocast`."""
    from types import SimpleNamespace

    import torch
    from trl import GRPOTrainer

    from searchrl.trainer.shared_prefix import shared_prefix_logps

    model.zero_grad(set_to_none=True)
    start = time.perf_counter()
    result = shared_prefix_logps(model, ids, mask, keep, autocast=autocast())
    if result is None:  # rows share too little: TRL's pass, as RL would run it
        owner = SimpleNamespace(accelerator=SimpleNamespace(autocast=autocast, is_main_process=True))
        result = GRPOTrainer._get_per_token_logps_and_entropies(owner, model, ids, mask, keep)
    logps = result[0].float()
    tokens = mask[:, -keep:].float()
    per_row = (logps * tokens).sum(dim=1) / tokens.sum(dim=1).clamp(min=1)
    (-(advantages * per_row).sum()).backward()
    seconds = time.perf_counter() - start
    grad = torch.cat([p.grad.flatten() for p in model.parameters() if p.grad is not None])
    return seconds, logps.detach(), grad


def cosine(a, b) -> float:
    return (a @ b / (a.norm() * b.norm())).item()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_rollout_arguments(parser)
    parser.add_argument("--micro", type=int, default=4, help="rows per micro-batch")
    parser.add_argument("--batches", type=int, default=6, help="micro-batches timed (after one warm-up)")
    args = parser.parse_args()

    import torch

    model, tokenizer, protocol, rows = policy_and_rollouts(args, parser, temperature=1.0)
    model.float()
    # The rollouts RL trained on: groups whose rewards were all equal are logged with no (NaN) advantage.
    rows = [r for r in rows if math.isfinite(float(r.get("advantage") or "nan"))]
    variants = {"fp32": nullcontext, "bf16": lambda: torch.autocast("cpu", dtype=torch.bfloat16)}
    rng = random.Random(args.seed)
    seconds = {name: [] for name in variants}
    logp_mean, logp_max, cosines, relative, adam_first, across_batches = [], [], [], [], [], []
    previous = None
    for batch in range(args.batches + 1):
        chosen = rng.sample(rows, args.micro)
        ids, mask, keep = layout(tokenizer, protocol, chosen, args.max_completion)
        advantages = torch.tensor([float(r["advantage"]) for r in chosen])
        order = list(variants.items())
        if batch % 2:
            order.reverse()  # alternate which runs first, so neither always meets a warm cache
        out = {name: scored_pass(model, ids, mask, keep, advantages, ctx) for name, ctx in order}
        if not batch:  # the first micro-batch warms up
            continue
        for name in variants:
            seconds[name].append(out[name][0])
        real = mask[:, -keep:].bool()
        diff = (out["bf16"][1] - out["fp32"][1]).abs()[real]
        logp_mean.append(diff.mean().item())
        logp_max.append(diff.max().item())
        g32, g16 = out["fp32"][2].double(), out["bf16"][2].double()  # float32 sums over 135M terms lose digits
        if not (g32.isfinite().all() and g16.isfinite().all()):
            raise RuntimeError(f"micro-batch {batch}: a gradient is not finite (fp32 {int((~g32.isfinite()).sum())}, "
                               f"bf16 {int((~g16.isfinite()).sum())} entries)")
        cosines.append(cosine(g32, g16))
        relative.append(((g16 - g32).norm() / g32.norm()).item())
        # Adam's first update is about sign(gradient): how often autocast flips an element's direction
        adam_first.append(cosine(g32 / (g32.abs() + 1e-8), g16 / (g16.abs() + 1e-8)))
        if previous is not None:  # the yardstick: how far another micro-batch's float32 gradient points
            across_batches.append(cosine(g32, previous))
        previous = g32
        print(f"micro-batch {batch}: fp32 {out['fp32'][0]:.2f} s, bf16 {out['bf16'][0]:.2f} s; log-prob |diff| mean "
              f"{logp_mean[-1]:.4f} max {logp_max[-1]:.3f}; gradient cosine {cosines[-1]:.4f}", flush=True)
    result = {"micro_batch": args.micro, "batches": args.batches,
              "fp32_s": statistics.median(seconds["fp32"]), "bf16_s": statistics.median(seconds["bf16"]),
              "speedup": sum(seconds["fp32"]) / sum(seconds["bf16"]),
              "logp_abs_diff_mean": statistics.mean(logp_mean), "logp_abs_diff_max": max(logp_max),
              "grad_cosine_min": min(cosines), "grad_cosine_median": statistics.median(cosines),
              "grad_relative_diff_median": statistics.median(relative),
              "adam_first_step_cosine_median": statistics.median(adam_first),
              "fp32_cosine_across_micro_batches_median": statistics.median(across_batches or [float("nan")])}
    print(f"fp32 {result['fp32_s']:.2f} s, bf16 {result['bf16_s']:.2f} s (medians), {result['speedup']:.2f}x; "
          f"gradient cosine median {result['grad_cosine_median']:.4f} (min {result['grad_cosine_min']:.4f}), "
          f"relative difference {result['grad_relative_diff_median']:.3f}; log-prob |diff| mean "
          f"{result['logp_abs_diff_mean']:.4f}; Adam's first step cosine {result['adam_first_step_cosine_median']:.3f}; "
          f"yardstick, float32 gradients of two micro-batches: cosine "
          f"{result['fp32_cosine_across_micro_batches_median']:.3f}", flush=True)
    path = save_result(args, "bf16_pass", {"result": result})
    print(f"saved {path}")


if __name__ == "__main__":
    main()
