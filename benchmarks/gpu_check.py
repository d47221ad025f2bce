"""One check of a one-GPU machine without internet, in under 8 minutes: the GPU-marked tests, the real-data
quickstart at `one_gpu` scale with the bundled model, and the rollout benchmark on the GPU, each in its own time
box (a hang costs its box, not the budget), every number in one JSON.

    python benchmarks/gpu_check.py                 # writes $OUT/gpu_check.json (or outputs/benchmarks/ without $OUT)
    python benchmarks/gpu_check.py --out DIR       # writes DIR/gpu_check.json
    python benchmarks/gpu_check.py --dry-run       # prints what it would run, runs nothing

Needs torch (CUDA), transformers, accelerate, peft and the project's other wheels installed; vLLM may be absent
(the rollouts use the project's own engine). How to carry the wheels to a machine without internet:
docs/gpu-check.md. The real-data step reads HotpotQA rows from the data folder ($SEARCHRL_DATA or ../shared/data)
and builds their pooled corpus first (`searchrl data prepare hotpotqa-pool`, offline).
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PY = sys.executable
# The real-data quickstart (cpu.yaml + cpu_real.yaml) at one_gpu.yaml's scale, cut to what fits its time box.
QUICKSTART_FILES = ["params/quickstart/cpu.yaml", "params/quickstart/cpu_real.yaml", "params/quickstart/one_gpu.yaml"]
QUICKSTART_PARAMS = {"rl_steps": "4", "probe_every": "0", "torch_threads": "0", "device": "cuda", "n_eval": "100",
                     "eval_batch_size": "100", "run_name": "gpu-check"}


def steps(out: Path) -> list[dict]:
    """Each step: name, command, time box (seconds). Their boxes sum to 7 minutes 30 seconds."""
    train = [PY, "-m", "searchrl.train", *(a for f in QUICKSTART_FILES for a in ("-f", f)),
             *(a for k, v in QUICKSTART_PARAMS.items() for a in ("-p", k, v)),
             "-p", "output_root", str(out / "runs")]
    return [
        {"name": "environment", "timeout": 30, "command": [PY, "-c", _ENVIRONMENT]},
        {"name": "gpu_tests", "timeout": 90, "command": [PY, "-m", "pytest", "-q", "-m", "gpu", "-p",
                                                         "no:cacheprovider", f"--junitxml={out / 'gpu_tests.xml'}"]},
        {"name": "prepare_pool", "timeout": 30, "command": [PY, "-m", "searchrl.cli", "data", "prepare",
                                                            "hotpotqa-pool"]},
        {"name": "real_quickstart", "timeout": 240, "command": train},  # ~7 min at 12 steps on an H100: 4 here
        # rollout throughput only: the quickstart step above times real trainer steps
        {"name": "rollout_benchmark", "timeout": 60, "command": [PY, "benchmarks/rollout.py", "--device", "cuda",
                                                                 "--repeats", "1", "--train-steps", "0",
                                                                 "--out", str(out / "rollout")]},
    ]


_ENVIRONMENT = """
import importlib.util, json, torch
info = {"torch": torch.__version__, "cuda": torch.cuda.is_available(),
        "device": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
        "memory_gb": round(torch.cuda.get_device_properties(0).total_memory / 2**30, 1) if torch.cuda.is_available() else None}
for name in ("transformers", "accelerate", "peft", "trl", "vllm", "bm25s", "papermill"):
    spec = importlib.util.find_spec(name)
    info[name] = __import__(name).__version__ if spec else None
print("ENV " + json.dumps(info))
"""


def run_step(step: dict, out: Path) -> dict:
    log = out / f"{step['name']}.log"
    start = time.monotonic()
    env = {**os.environ, "PYTHONPATH": f"{ROOT / 'lib'}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    with log.open("w") as f:
        try:
            proc = subprocess.run(step["command"], cwd=ROOT, stdout=f, stderr=subprocess.STDOUT, env=env,
                                  timeout=step["timeout"], check=False)
            status = "ok" if proc.returncode == 0 else f"failed (exit {proc.returncode})"
        except subprocess.TimeoutExpired:
            status = f"timed out after {step['timeout']} s"
    result = {"status": status, "seconds": round(time.monotonic() - start, 1), "log": str(log)}
    result.update(_numbers(step["name"], log.read_text(errors="replace"), out))
    return result


def _numbers(name: str, text: str, out: Path) -> dict:
    """What each step measured, read from its log and the files it wrote."""
    if name == "environment":
        line = next((ln for ln in text.splitlines() if ln.startswith("ENV ")), None)
        return {"environment": json.loads(line[4:])} if line else {}
    if name == "gpu_tests":
        tail = [ln for ln in text.splitlines() if " passed" in ln or " skipped" in ln or " failed" in ln]
        return {"summary": tail[-1].strip("= ") if tail else None}
    if name == "real_quickstart":
        tables = sorted((out / "runs").glob("train/*/eval/table.json"))
        if tables:
            return {"run_dir": str(tables[-1].parents[1]), "stage_table": json.loads(tables[-1].read_text())}
        return {}
    if name == "rollout_benchmark":
        files = sorted((out / "rollout").glob("rollout-*.json"))
        return {"result": json.loads(files[-1].read_text())} if files else {}
    return {}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=os.environ.get("OUT") or "outputs/benchmarks/gpu-check",
                    help="folder for gpu_check.json and the logs (default: $OUT, else outputs/benchmarks/gpu-check)")
    ap.add_argument("--dry-run", action="store_true", help="print the steps and their time boxes; run nothing")
    args = ap.parse_args(argv)
    out = Path(args.out).resolve()
    plan = steps(out)
    if args.dry_run:
        for step in plan:
            shown = [PY, "-c", "<versions of torch, CUDA, the GPU and each package>"] if step["name"] == "environment" \
                else step["command"]
            print(f"[{step['timeout']:>3} s] {step['name']}: {shlex.join(shown)}")
        print(f"total time boxes: {sum(s['timeout'] for s in plan)} s; results: {out / 'gpu_check.json'}")
        return 0
    out.mkdir(parents=True, exist_ok=True)
    report: dict = {"started": time.strftime("%Y-%m-%d %H:%M:%S %Z"), "steps": {}}
    for step in plan:
        print(f"gpu check: {step['name']} (at most {step['timeout']} s) ...", flush=True)
        report["steps"][step["name"]] = result = run_step(step, out)
        print(f"gpu check: {step['name']}: {result['status']} in {result['seconds']} s", flush=True)
        (out / "gpu_check.json").write_text(json.dumps(report, indent=2))  # kept after every step
    report["seconds"] = round(sum(r["seconds"] for r in report["steps"].values()), 1)
    (out / "gpu_check.json").write_text(json.dumps(report, indent=2))
    print(f"gpu check: {report['seconds']} s in all; {out / 'gpu_check.json'}")
    return 0 if all(r["status"] == "ok" for r in report["steps"].values()) else 1


if __name__ == "__main__":
    raise SystemExit(main())
