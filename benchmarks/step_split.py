"""Where a training step's time goes, and rollouts per minute, for variants of one run's settings side by side.

Each variant builds a SearchGRPOTrainer exactly as a run does (a params file, plus overrides), on the same policy
checkpoint, and trains a few steps. The step is split into:
  rollout    search rollouts (TRL's `rollout_func`: generation, retrieval, appending documents)
  scoring    the rest of TRL's generate-and-score: old log-probs, reference model, rewards, advantages
  forward    the policy loss (`compute_loss`)
  backward   `accelerator.backward`
  optimizer  clipping and the optimizer step (between the Trainer's pre- and post-optimizer callbacks)
  other      whatever remains of the step (data loading, logging, callbacks)
The first step of each variant is a warm-up and is not counted.

    python benchmarks/step_split.py --policy outputs/quickstart/<run>/checkpoints/cold_start
    python benchmarks/step_split.py --variant baseline: --variant bf16:bf16=true --variant lora:use_peft=true,learning_rate=1e-4
    python benchmarks/step_split.py --tiny --steps 2        # random tiny model: checks the script in seconds
A variant may name its own checkpoint (`policy=PATH`), for settings a checkpoint must be trained under (a prompt
protocol: a policy searches only under the prompt of its cold start), or its own params file (`params=PATH`, the
overrides on top), which brings its own model, tokenizer and world, so that two profiles run side by side:
    python benchmarks/step_split.py --variant cpu: --variant nano:params=params/quickstart/nano.yaml
Results are printed and saved to outputs/benchmarks/step_split-<time>.json.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from collections import defaultdict
from pathlib import Path

os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")

PARTS = ("rollout", "scoring", "forward", "backward", "optimizer", "other")
DEFAULT_VARIANTS = ("baseline:", "bf16:bf16=true", "lora:use_peft=true", "bf16+lora:bf16=true,use_peft=true")


def parse_variant(text: str) -> tuple[str, dict]:
    """'name:key=value,key=value' -> (name, overrides); values are read as YAML (numbers, booleans, lists)."""
    from searchrl.config import parse_scalar

    name, _, rest = text.partition(":")
    overrides = {}
    for pair in filter(None, rest.split(",")):
        key, _, value = pair.partition("=")
        overrides[key.strip()] = parse_scalar(value.strip())
    return name, overrides


class StepClock:
    """Accumulates seconds per part of the step; `wrap` times a callable, the callback times steps and the optimizer."""

    def __init__(self):
        self.seconds: dict[str, list[float]] = defaultdict(list)
        self._current: dict[str, float] = defaultdict(float)

    def wrap(self, part: str, fn):
        def timed(*args, **kwargs):
            start = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                self._current[part] += time.perf_counter() - start
        return timed

    def callback(self):
        from transformers import TrainerCallback

        clock = self

        class Timing(TrainerCallback):
            def on_step_begin(self, args, state, control, **kwargs):
                clock._step_start = time.perf_counter()

            def on_pre_optimizer_step(self, args, state, control, **kwargs):
                clock._opt_start = time.perf_counter()

            def on_optimizer_step(self, args, state, control, **kwargs):
                clock._current["optimizer"] += time.perf_counter() - clock._opt_start

            def on_step_end(self, args, state, control, **kwargs):
                total = time.perf_counter() - clock._step_start
                # TRL generates the batch inside training_step, which runs after on_step_begin: all parts are inside.
                parts = dict(clock._current)
                parts["scoring"] = parts.get("generate_and_score", 0.0) - parts.get("rollout", 0.0)
                parts.pop("generate_and_score", None)
                parts["other"] = total - sum(parts.get(p, 0.0) for p in PARTS if p != "other")
                parts["step"] = total
                for key, value in parts.items():
                    clock.seconds[key].append(value)
                clock._current = defaultdict(float)

        return Timing()


def measure(name: str, cfg, policy: str, steps: int, world, retriever, tokenizer) -> dict:
    """Train `steps` steps of `cfg` from `policy` and return the mean split of the steps after the first."""
    import torch

    from searchrl.core.progress import attach_stage_bar
    from searchrl.core.threads import apply_torch_threads
    from searchrl.experiments.experiment_data import balanced_take, seed_everything
    from searchrl.protocols import get_protocol
    from searchrl.rewards import make_rewards
    from searchrl.trainer import SearchGRPOTrainer, prompt_dataset
    from searchrl.trainer.arguments import grpo_args, lora_config

    apply_torch_threads(cfg.torch_threads)
    seed_everything(cfg.seed)
    protocol = get_protocol(cfg.protocol)
    rows = balanced_take(world.splits["train"], cfg.n_train, cfg.train_question_types or None, cfg.seed,
                         cfg.train_max_hops)
    data = prompt_dataset(rows, protocol, tokenizer, chat=cfg.chat_prompt)
    funcs, weights = make_rewards(cfg.rewards, protocol, cfg.reward_weights or None)
    clock = StepClock()
    with tempfile.TemporaryDirectory() as out:
        args = grpo_args(cfg.replace(save_steps=10**6), out, max_steps=steps, reward_weights=weights)
        trainer = SearchGRPOTrainer(model=policy, reward_funcs=funcs, args=args, train_dataset=data,
                                    retriever=retriever, protocol=protocol, processing_class=tokenizer,
                                    peft_config=lora_config(cfg), callbacks=[clock.callback()])
        trainer.rollout_func = clock.wrap("rollout", trainer.rollout_func)
        trainer._generate_and_score_completions = clock.wrap("generate_and_score",
                                                             trainer._generate_and_score_completions)
        trainer.compute_loss = clock.wrap("forward", trainer.compute_loss)
        trainer.accelerator.backward = clock.wrap("backward", trainer.accelerator.backward)
        # grpo_args turns TRL's bar off for the run's own; without one a variant's steps (minutes each on a CPU)
        # would pass in silence.
        attach_stage_bar(trainer, name, {"reward": "reward", "search/searches_per_sample": "searches"})
        trainer.train()
        tokens = [m for m in trainer.state.log_history if "completions/total_tokens" in m]
    counted = {k: v[1:] or v for k, v in clock.seconds.items()}  # drop the warm-up step when there is more than one
    mean = {k: sum(v) / len(v) for k, v in counted.items()}
    rollouts = cfg.prompts_per_step * cfg.num_generations
    return {
        "variant": name, "steps_counted": len(counted["step"]), "rollouts_per_step": rollouts,
        "seconds": {k: round(mean[k], 2) for k in (*PARTS, "step")},
        "rollouts_per_minute": round(60 * rollouts / mean["step"], 2),
        "total_tokens_per_sample": round(sum(m["completions/total_tokens"] for m in tokens) / max(len(tokens), 1), 1),
        "threads": torch.get_num_threads(),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--params", default="params/quickstart/cpu.yaml", help="the run settings every variant starts from")
    ap.add_argument("--policy", default=None, help="checkpoint to train from (default: the params file's model)")
    ap.add_argument("--tiny", action="store_true", help="random tiny model and tiny batches (checks the script)")
    ap.add_argument("--variant", action="append", default=[], metavar="NAME:KEY=VALUE,...",
                    help=f"a variant as overrides of the params (repeatable; default: {' '.join(DEFAULT_VARIANTS)})")
    ap.add_argument("--steps", type=int, default=4, help="steps per variant; the first is a warm-up")
    ap.add_argument("--out", default="outputs/benchmarks")
    args = ap.parse_args()

    from searchrl.config import RunConfig
    from searchrl.data.synthetic import make_world
    from searchrl.models import load_tokenizer, policy_path
    from searchrl.retrieval import make_retriever

    base = RunConfig.from_params(None, args.params)
    if args.tiny:
        base = base.replace(model="tiny-random", prompts_per_step=1, num_generations=2, max_completion_tokens=64,
                            world_entities=40)
    def setting(cfg):
        """(world, retriever, tokenizer) of a variant's settings: the world it trains on (train_world_seed)."""
        seed = cfg.train_world_seed if cfg.train_world_seed >= 0 else cfg.world_seed
        world = make_world(seed=seed, n_entities=cfg.world_entities, words_per_passage=cfg.world_passage_words)
        return world, make_retriever(cfg.retriever, world.corpus), load_tokenizer(cfg.model)

    policy = args.policy or policy_path(base.model)
    shared = setting(base)
    results = []
    for text in args.variant or DEFAULT_VARIANTS:
        name, overrides = parse_variant(text)
        own = overrides.pop("policy", None)
        params = overrides.pop("params", None)
        cfg = RunConfig.from_params(None, str(params), **overrides) if params else base.replace(**overrides)
        print(f"== {name}: {overrides or 'the params file as it is'}" + (f", policy {own}" if own else "")
              + (f", params {params}" if params else ""), flush=True)
        start = policy_path(str(own)) if own else policy_path(cfg.model) if params else policy
        results.append(measure(name, cfg, start, args.steps, *(setting(cfg) if params else shared)))
        results[-1]["policy"] = str(own or start)
        results[-1]["params"] = str(params or args.params)
        print(json.dumps(results[-1]), flush=True)

    header = f"{'variant':<14}" + "".join(f"{p:>10}" for p in (*PARTS, "step")) + f"{'rollouts/min':>14}{'ratio':>7}"
    print("\nseconds per step (mean over counted steps)\n" + header)
    first = results[0]["rollouts_per_minute"]
    for r in results:
        s = r["seconds"]
        print(f"{r['variant']:<14}" + "".join(f"{s[p]:>10.2f}" for p in (*PARTS, "step"))
              + f"{r['rollouts_per_minute']:>14.2f}{r['rollouts_per_minute'] / first:>7.2f}")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"step_split-{time.strftime('%Y%m%d-%H%M%S')}.json"
    path.write_text(json.dumps({"params": args.params, "policy": str(policy), "results": results}, indent=1))
    print(f"saved {path}")


if __name__ == "__main__":
    main()
