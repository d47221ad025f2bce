"""Retrieval service faults, end to end: a run that starts before its service, and a service killed mid-RL.

Both scenarios train the tiny smoke model (params/quickstart/smoke.yaml) with `python -m searchrl.train` against a
BM25 service of the smoke world, served by `python -m searchrl.retrieval.serve` from a separate process on
127.0.0.1 (nothing else is reached):

- A, service down at start: training starts first; the service starts `--late-start-s` seconds later. The run
  should wait for it (service_wait_s), saying so, and then train as usual.
- B, service killed mid-RL: once `--kill-at-step` RL steps are logged the service process gets SIGKILL, and it is
  started again `--down-s` seconds later. The run should ride out the outage (retriever_outage_s), count the
  searches that failed (search/failed_searches) and finish.

The retry settings are shortened (`--retry` values) so that the outage outlasts one batch's retries and failed
searches appear at all; with the defaults a restart within about 12 s is absorbed by retries alone.

    python benchmarks/service_faults.py            # about 2 minutes on 2 busy CPU cores

Prints each scenario's wall time, the wait messages seen, searches attempted / failed per RL step, whether training
finished, and the final evaluation; writes outputs/benchmarks/service_faults-<time>.json (or under --out).
Every process it starts is stopped before it returns, also on a timeout.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[1]
SMOKE = REPO_ROOT / "params" / "quickstart" / "smoke.yaml"
HOST = "127.0.0.1"
ENV = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"}
WAIT_MARK = "waiting for the retrieval service"
UP_MARK = "is up after"
DOWN_MARK = "retriever down for"


class Process:
    """A child process whose stdout and stderr lines are collected (with seconds since `t0`) as they come."""

    def __init__(self, command: list[str], t0: float) -> None:
        self.t0 = t0
        self.lines: list[tuple[float, str]] = []
        self.popen = subprocess.Popen(command, cwd=REPO_ROOT, env=ENV, stdout=subprocess.PIPE,
                                      stderr=subprocess.STDOUT, text=True, errors="replace")
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        for line in self.popen.stdout:
            # progress bars redraw with carriage returns: keep each redraw's last state only
            self.lines.append((round(time.monotonic() - self.t0, 1), line.rstrip("\n").split("\r")[-1]))

    def matching(self, mark: str) -> list[tuple[float, str]]:
        """The lines containing `mark`, with their times."""
        return [(t, line) for t, line in self.lines if mark in line]

    def wait(self, timeout_s: float) -> int | None:
        """The exit code, or None (after killing it) when it ran past `timeout_s`."""
        try:
            return self.popen.wait(timeout_s)
        except subprocess.TimeoutExpired:
            self.kill()
            return None

    def kill(self) -> None:
        """SIGKILL, as a crash would end it."""
        if self.popen.poll() is None:
            self.popen.send_signal(signal.SIGKILL)
            self.popen.wait()
        self._reader.join(5)


def free_port() -> int:
    """A loopback port nothing listens on now."""
    with socket.socket() as sock:
        sock.bind((HOST, 0))
        return sock.getsockname()[1]


def build_smoke_index(folder: Path) -> Path:
    """A BM25 index over exactly the corpus a smoke run builds (the client checks the service holds it)."""
    from searchrl.data.synthetic import make_world
    from searchrl.experiments.train import resolve_config
    from searchrl.retrieval.serve import build_index

    cfg = resolve_config([str(SMOKE)], [])
    world = make_world(seed=cfg.world_seed, n_entities=cfg.world_entities, words_per_passage=cfg.world_passage_words,
                       knowledge=cfg)
    return build_index(world.corpus, "bm25", folder, show_progress=False)


def start_service(index: Path, port: int, t0: float) -> Process:
    """`python -m searchrl.retrieval.serve` on HOST:port; returns once /health answers."""
    from searchrl.retrieval.http import HTTPRetriever

    service = Process([sys.executable, "-m", "searchrl.retrieval.serve", "--index", str(index), "--host", HOST,
                       "--port", str(port)], t0)
    HTTPRetriever(f"http://{HOST}:{port}").wait_until_up(60, say=lambda line: None)
    return service


def start_training(port: int, out: Path, name: str, args: argparse.Namespace, t0: float) -> Process:
    """`python -m searchrl.train` on the smoke profile against the service at HOST:port."""
    timeout_s, retries, backoff_s = args.retry
    params = {"retriever": f"http://{HOST}:{port}", "output_root": str(out), "run_name": name,
              "rl_steps": args.rl_steps, "torch_threads": 1, "service_wait_s": args.service_wait_s,
              "retriever_timeout_s": timeout_s, "retriever_retries": int(retries), "retriever_backoff_s": backoff_s,
              "retriever_outage_s": args.outage_s}
    pairs = [item for key, value in params.items() for item in ("-p", key, str(value))]
    return Process([sys.executable, "-m", "searchrl.train", "-f", str(SMOKE), *pairs], t0)


def run_folder(out: Path, name: str) -> Path | None:
    """The run folder `python -m searchrl.train` made for run_name `name`, once it exists."""
    found = sorted((out / "train").glob(f"*-{name}"))
    return found[-1] if found else None


def logged_steps(folder: Path | None) -> list[dict[str, Any]]:
    """The run's metrics history so far (rows of RL steps; empty while none is written)."""
    import pandas as pd

    if folder is None or not (folder / "metrics.parquet").exists():
        return []
    try:
        frame = pd.read_parquet(folder / "metrics.parquet")
    except (OSError, ValueError):  # caught mid-write
        return []
    return frame.to_dict("records")


def step_table(folder: Path | None, samples_per_step: int) -> list[dict[str, Any]]:
    """Searches attempted and failed at each RL step (the logged per-sample means times the step's samples)."""
    table = []
    for row in logged_steps(folder):
        if "search/searches_per_sample" not in row:
            continue  # the end-of-training summary row
        attempted = row["search/searches_per_sample"] * samples_per_step
        failed = (row.get("search/failed_searches") or 0.0) * samples_per_step
        table.append({"step": int(row["step"]), "searches": round(attempted), "failed": round(failed),
                      "reward": round(float(row.get("reward", float("nan"))), 3)})
    return table


def outcome(name: str, training: Process, rc: int | None, folder: Path | None, samples_per_step: int,
            started: float, extra: dict[str, Any]) -> dict[str, Any]:
    """What one scenario showed: wall time, messages, per-step searches, whether training finished, final metrics."""
    status = json.loads((folder / "status.json").read_text()) if folder and (folder / "status.json").exists() else {}
    evaluation = folder / "eval" / "after_RL.json" if folder else None
    final = json.loads(evaluation.read_text())["summary"] if evaluation and evaluation.exists() else None
    steps = step_table(folder, samples_per_step)
    return {
        "scenario": name,
        "wall_s": round(time.monotonic() - started, 1),
        "exit_code": rc,
        "status": status.get("status"),
        "error": status.get("error"),
        "training_finished": rc == 0 and status.get("status") == "completed",
        "wait_messages": [f"[{t:5.1f}s] {line}" for t, line in training.matching(WAIT_MARK)],
        "up_message": [f"[{t:5.1f}s] {line}" for t, line in training.matching(UP_MARK)],
        "outage_messages": [f"[{t:5.1f}s] {line}" for t, line in training.matching(DOWN_MARK)],
        "steps": steps,
        "searches_attempted": sum(s["searches"] for s in steps),
        "searches_failed": sum(s["failed"] for s in steps),
        "final_metrics": final,
        "run_dir": str(folder) if folder else None,
        **extra,
    }


def scenario_late_service(index: Path, out: Path, args: argparse.Namespace, samples: int) -> dict[str, Any]:
    """A: the run starts with no service; the service starts `late_start_s` later."""
    port, t0 = free_port(), time.monotonic()
    service = None
    training = start_training(port, out, "late-service", args, t0)
    try:
        time.sleep(args.late_start_s)
        service_started_at = round(time.monotonic() - t0, 1)
        service = start_service(index, port, t0)
        rc = training.wait(max(args.timeout_s - (time.monotonic() - t0), 1))
    finally:
        training.kill()
        if service is not None:
            service.kill()
    return outcome("A: service down at start", training, rc, run_folder(out, "late-service"), samples, t0,
                   {"service_started_at_s": service_started_at})


def scenario_killed_service(index: Path, out: Path, args: argparse.Namespace, samples: int) -> dict[str, Any]:
    """B: the service is killed once `kill_at_step` RL steps are logged and restarted `down_s` later."""
    port, t0 = free_port(), time.monotonic()
    service = start_service(index, port, t0)
    training = start_training(port, out, "killed-service", args, t0)
    killed_at = restarted_at = None
    rc = None
    try:
        deadline = t0 + args.timeout_s
        while time.monotonic() < deadline and training.popen.poll() is None:
            steps = [r for r in logged_steps(run_folder(out, "killed-service")) if "search/searches_per_sample" in r]
            if len(steps) >= args.kill_at_step:
                break
            time.sleep(0.2)
        if training.popen.poll() is None:
            service.kill()
            killed_at = round(time.monotonic() - t0, 1)
            time.sleep(args.down_s)
            service = start_service(index, port, t0)
            restarted_at = round(time.monotonic() - t0, 1)
        rc = training.wait(max(deadline - time.monotonic(), 1))
    finally:
        training.kill()
        service.kill()
    return outcome("B: service killed mid-RL", training, rc, run_folder(out, "killed-service"), samples, t0,
                   {"service_killed_at_s": killed_at, "service_back_at_s": restarted_at})


def show(result: dict[str, Any]) -> None:
    """The scenario's outcome, readable."""
    print(f"\n== {result['scenario']} ==")
    print(f"wall time {result['wall_s']} s; exit code {result['exit_code']}; status {result['status']}; "
          f"training finished: {result['training_finished']}")
    for key in ("service_started_at_s", "service_killed_at_s", "service_back_at_s"):
        if key in result:
            print(f"{key}: {result[key]}")
    for key in ("wait_messages", "up_message", "outage_messages"):
        for line in result[key]:
            print(f"  {line}")
    if result["error"]:
        print(f"error: {result['error']}")
    print("step  searches  failed  reward")
    for step in result["steps"]:
        print(f"{step['step']:>4}  {step['searches']:>8}  {step['failed']:>6}  {step['reward']:>6}")
    print(f"searches attempted {result['searches_attempted']}, failed {result['searches_failed']}")
    print(f"final metrics: {result['final_metrics']}")


def main() -> None:
    """Run both scenarios, print them, and save the JSON record."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rl-steps", type=int, default=12)
    ap.add_argument("--late-start-s", type=float, default=15.0, help="A: the service starts this long after the run")
    ap.add_argument("--kill-at-step", type=int, default=3, help="B: kill the service once this many steps are logged")
    ap.add_argument("--down-s", type=float, default=8.0, help="B: the service stays down this long")
    ap.add_argument("--service-wait-s", type=float, default=60.0, help="the run's service_wait_s")
    ap.add_argument("--outage-s", type=float, default=60.0, help="the run's retriever_outage_s")
    ap.add_argument("--retry", type=float, nargs=3, default=(2.0, 1, 0.5),
                    metavar=("TIMEOUT_S", "RETRIES", "BACKOFF_S"), help="the run's retriever_timeout_s, "
                    "retriever_retries and retriever_backoff_s")
    ap.add_argument("--timeout-s", type=float, default=80.0, help="each scenario is stopped after this long")
    ap.add_argument("--out", default="outputs/benchmarks")
    args = ap.parse_args()

    from searchrl.experiments.train import resolve_config

    smoke = resolve_config([str(SMOKE)], [])
    samples = smoke.prompts_per_step * smoke.num_generations
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="service-faults-") as tmp:
        index = build_smoke_index(Path(tmp) / "index")
        results = [scenario_late_service(index, Path(tmp) / "runs", args, samples),
                   scenario_killed_service(index, Path(tmp) / "runs", args, samples)]
    for result in results:
        result["run_dir"] = None  # a temporary folder, gone now
        show(result)
    total = round(time.monotonic() - started, 1)
    print(f"\ntotal {total} s")
    out = Path(args.out)
    if not out.is_absolute():
        out = REPO_ROOT / out
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"service_faults-{time.strftime('%Y%m%d-%H%M%S')}.json"
    settings = {k: v for k, v in vars(args).items() if k != "out"}
    path.write_text(json.dumps({"settings": settings, "samples_per_step": samples, "total_s": total,
                                "scenarios": results}, indent=1) + "\n")
    print(f"saved {path}")


if __name__ == "__main__":
    main()
