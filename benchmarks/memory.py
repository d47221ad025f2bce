"""How much memory a recipe's training needs, and what `micro_batch_size` and `activation_checkpointing` buy.

Each variant runs in a process of its own (a peak belongs to a process): the profile's cold start cut to a few
optimizer steps, then RL steps, with `searchrl.runs.memory` recording each part's peak resident memory (and GPU
allocation), beside the seconds per step. The variants share the profile, the seed and so the data; they differ
only in their overrides.

    python benchmarks/memory.py notebooks/quickstart.ipynb -f params/quickstart/cpu.yaml \\
        --variant plain: --variant micro4:micro_batch_size=4 --variant micro2:micro_batch_size=2 \\
        --variant micro4+ckpt:micro_batch_size=4,activation_checkpointing=true

Prints a table and writes outputs/benchmarks/memory-<time>.json.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

import yaml


def parse_variant(text: str) -> tuple[str, dict]:
    """"name:key=value,key=value" -> (name, overrides); values are YAML ("name:" has none)."""
    name, _, rest = text.partition(":")
    overrides = {}
    for pair in filter(None, rest.split(",")):
        key, _, value = pair.partition("=")
        overrides[key.strip()] = yaml.safe_load(value)
    return name, overrides


def worker(notebook: str, params: list[str], overrides: dict, sft_steps: int, rl_steps: int, out: Path) -> None:
    """One variant: the cut-down cold start and RL of the profile; writes its measurements to `out`."""
    from searchrl.experiments.experiment import Experiment
    from searchrl.experiments.runner_plan import plan_run
    from searchrl.runs.memory import read_memory

    cfg = plan_run(notebook, params, overrides).config
    batch = 8  # the cold start's examples per optimizer step (trainer/arguments.py sft_args)
    cfg = cfg.replace(sft_examples=min(cfg.sft_examples, sft_steps * batch) or 0, sft_epochs=1.0, rl_steps=rl_steps,
                      probe_every=0, save_steps=10_000)
    run_dir = Path(tempfile.mkdtemp())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        exp = Experiment(cfg, notebook="memory", run_dir=run_dir)
        model = exp.load_model()
        started = time.perf_counter()
        model = exp.cold_start(model)
        cold_s = time.perf_counter() - started
        started = time.perf_counter()
        exp.train_rl(model)
        rl_s = time.perf_counter() - started
    parts = read_memory(run_dir)
    out.write_text(json.dumps({
        "overrides": overrides, "parts": parts,
        "cold_start_s_per_step": round(cold_s / max(1, cfg.sft_examples // batch), 1) if cfg.sft_examples else None,
        "rl_s_per_step": round(rl_s / rl_steps, 1),
    }), encoding="utf-8")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("notebook", help="the notebook whose parameters cell the profile sits on")
    ap.add_argument("-f", "--params", action="append", default=[], help="params file(s), later ones win")
    ap.add_argument("--variant", action="append", default=[], help="name:key=value,... (repeatable)")
    ap.add_argument("--sft-steps", type=int, default=3, help="cold-start optimizer steps per variant")
    ap.add_argument("--rl-steps", type=int, default=2, help="RL steps per variant")
    ap.add_argument("--out", default="outputs/benchmarks")
    ap.add_argument("--worker", help=argparse.SUPPRESS)  # internal: run one variant, write its JSON here
    args = ap.parse_args()
    variants = [parse_variant(v) for v in args.variant] or [("plain", {})]
    if args.worker:
        worker(args.notebook, args.params, variants[0][1], args.sft_steps, args.rl_steps, Path(args.worker))
        return

    results = {}
    for name, overrides in variants:
        print(f"variant {name} ({overrides or 'the profile as it is'}) ...", flush=True)
        with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as handle:
            result_path = Path(handle.name)
        command = [sys.executable, __file__, args.notebook, *(x for f in args.params for x in ("-f", f)),
                   "--variant", f"{name}:" + ",".join(f"{k}={json.dumps(v)}" for k, v in overrides.items()),
                   "--sft-steps", str(args.sft_steps), "--rl-steps", str(args.rl_steps), "--worker", str(result_path)]
        done = subprocess.run(command, check=False)
        if done.returncode != 0:
            results[name] = {"overrides": overrides, "error": f"exit code {done.returncode} (killed for memory?)"}
            continue
        results[name] = json.loads(result_path.read_text(encoding="utf-8"))

    print(f"\n{'variant':<16} {'cold start GB':>14} {'RL GB':>7} {'cold s/step':>12} {'RL s/step':>10}")
    for name, result in results.items():
        if "error" in result:
            print(f"{name:<16} {result['error']}")
            continue
        parts = result["parts"]
        cold = parts.get("cold start", {}).get("peak_rss_gb", float("nan"))
        rl = parts.get("rl", {}).get("peak_rss_gb", float("nan"))
        print(f"{name:<16} {cold:>14.2f} {rl:>7.2f} {result['cold_start_s_per_step'] or float('nan'):>12.1f} "
              f"{result['rl_s_per_step']:>10.1f}")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"memory-{time.strftime('%Y%m%d-%H%M%S')}.json"
    path.write_text(json.dumps({"notebook": args.notebook, "params": args.params, "sft_steps": args.sft_steps,
                                "rl_steps": args.rl_steps, "variants": results}, indent=1), encoding="utf-8")
    print(f"\nwritten {path}")


if __name__ == "__main__":
    main()
