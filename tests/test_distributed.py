"""Training in two processes (`accelerate launch`, gloo on the CPU) scores whole groups, logs whole-batch metrics
and ends where one process given the same global batch ends; the launch configs are what accelerate reads.

Both runs come from tests/distributed_grpo_run.py: 2 steps, 3 questions x 4 answers per step, so each process
holds 6 samples and one question's answers are split between the processes. What must match the one-process run:
the questions of each step (TRL's sampler draws the global batch from the seed alone), every sample's completion
and reward (completions are scripted by the sample's place in the global batch), every logged statistic, and the
trained weights up to float summation order. What need not match, and is not compared: timings, and, in a real run
with a sampling generator, the completions themselves, because TRL seeds each process with seed + rank
(`set_seed(seed, device_specific=True)`), so a sample is drawn from a different random stream than in one process.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
import torch

from fakes import free_port
from searchrl.rewards.group import rewards_by_group

ROOT = Path(__file__).resolve().parents[1]
RUN = Path(__file__).parent / "distributed_grpo_run.py"
LAUNCH = ROOT / "launch"
NUM_GENERATIONS = 4  # as in distributed_grpo_run.py
# Logged values that describe one process's own work (wall time), so they legitimately differ between processes.
PROCESS_LOCAL = {"step_time", "timing/rollouts_s", "train_runtime", "train_samples_per_second",
                 "train_steps_per_second"}


def _run(out: Path, processes: int) -> list[dict]:
    """Run the training script in `processes` processes; each process's record, in rank order."""
    if processes == 1:
        command = [sys.executable, str(RUN), str(out)]
    else:
        command = [sys.executable, "-m", "accelerate.commands.launch", "--config_file", str(LAUNCH / "cpu_2proc.yaml"),
                   "--num_processes", str(processes), "--main_process_port", str(free_port()), str(RUN), str(out)]
    env = {"HF_HUB_OFFLINE": "1", **os.environ, "OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false"}
    done = subprocess.run(command, check=False, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, f"{' '.join(command)} failed:\n{done.stdout[-4000:]}\n{done.stderr[-8000:]}"
    return [json.loads((out / f"rank{rank}.json").read_text()) for rank in range(processes)]


def _both_runs(root: Path) -> dict:
    """The two-process run and the one-process run of the same global batch, one after the other."""
    return {"two": _run(root / "two", 2), "one": _run(root / "one", 1), "root": root}


def _steps(records: list[dict]) -> list[dict]:
    """Per training step, the whole batch as the processes' reward calls saw it, slices joined in rank order."""
    steps = []
    for calls in zip(*(r["reward_calls"] for r in records), strict=True):
        steps.append({key: [v for call in calls for v in call[key]] for key in ("ids", "num_searches", "rewards")})
    return steps


def _logged_steps(record: dict) -> list[dict]:
    """The log entries of the training steps (not the closing summary)."""
    return [entry for entry in record["log_history"] if "loss" in entry]


# --------------------------------------------------------------------------------------------------------------


def check_group_reward_saw_complete_groups(runs: dict) -> None:
    """Each process's group reward computed over the whole global batch, every group with all its answers."""
    two = runs["two"]
    local_ids = [[set(call["ids"]) for call in r["reward_calls"]] for r in two]
    split = [a & b for a, b in zip(*local_ids)]
    assert any(split), "the run must split a question's answers between the processes, or it tests nothing"
    for record in two:
        assert len(record["group_rows"]) == 2  # one group-reward call per step, 2 steps
        for rows, step in zip(record["group_rows"], _steps(two), strict=True):
            sizes = Counter(question for question, _, _ in rows)
            assert set(sizes.values()) == {NUM_GENERATIONS}, sizes
            assert [question for question, _, _ in rows] == step["ids"]  # the gathered batch is the global batch
    assert two[0]["group_rows"] == two[1]["group_rows"]  # both processes grouped the same rows


def check_each_slice_got_whole_group_rewards(runs: dict) -> None:
    """Each process returned, for its slice, the rewards the one-process run gave the same samples."""
    two, one = _steps(runs["two"]), _steps(runs["one"])
    assert two == one  # same questions per step, same completions' search counts, same rewards, in the same order
    assert set(one[0]["ids"]) != set(one[1]["ids"])
    # The split group scored on one process's slice alone would have earned something else: the gather mattered.
    differs = []
    for rank, record in enumerate(runs["two"]):
        for rows, call in zip(record["group_rows"], record["reward_calls"], strict=True):
            size = len(call["ids"])
            own_rows = rows[rank * size:(rank + 1) * size]  # slices are gathered in rank order
            differs.append(rewards_by_group([tuple(r) for r in own_rows], eta=2.0) != call["rewards"])
    assert any(differs)


def check_logged_metrics_describe_the_whole_batch(runs: dict) -> None:
    """Logged statistics are those of the global batch, on both processes, and equal the one-process run's."""
    two, one = runs["two"], runs["one"]
    for record in two:
        for logged, step in zip(_logged_steps(record), _steps(two), strict=True):
            n = len(step["rewards"])
            assert logged["rewards/group_r1spp/mean"] == pytest.approx(sum(step["rewards"]) / n)
            assert logged["search/searches_per_sample"] == pytest.approx(sum(step["num_searches"]) / n)
            rewards_by_question: dict[str, set] = {}
            for question, reward in zip(step["ids"], step["rewards"]):
                rewards_by_question.setdefault(question, set()).add(reward)
            informative = [len(r) > 1 for r in rewards_by_question.values()]
            assert logged["search/kept_group_frac"] == pytest.approx(sum(informative) / len(informative))
    # every other logged value agrees between the processes and with the one-process run
    for a, b, c in zip(two[0]["log_history"], two[1]["log_history"], one[0]["log_history"], strict=True):
        assert set(a) == set(b) == set(c)
        for key in sorted(set(a) - PROCESS_LOCAL):
            assert a[key] == pytest.approx(b[key], rel=1e-6, abs=1e-9), key
            assert a[key] == pytest.approx(c[key], rel=1e-5, abs=1e-7), key


def check_weights_match_one_process(runs: dict) -> None:
    """Both processes end with the same weights, and those are the one-process run's up to float rounding."""
    two, one = runs["two"], runs["one"]
    assert two[0]["parameter_digest"] == two[1]["parameter_digest"]  # DDP keeps the replicas bit-identical
    update = one[0]["largest_update"]
    assert update > 1e-3, "training must move the weights, or the comparison below is empty"
    trained_two = torch.load(runs["root"] / "two" / "params.pt")
    trained_one = torch.load(runs["root"] / "one" / "params.pt")
    assert trained_two.keys() == trained_one.keys()
    # The same gradient, summed in another order (two partial sums averaged over processes): equal up to rounding.
    gap = max((trained_two[k] - trained_one[k]).abs().max().item() for k in trained_one)
    assert gap <= 1e-4 * update, (gap, update)


@pytest.mark.slow
def test_two_cpu_processes_train_as_one_process_with_the_same_global_batch(tmp_path):
    # One test for both runs (about a minute): a module fixture would run them again in each pytest-xdist worker.
    runs = _both_runs(tmp_path)
    check_group_reward_saw_complete_groups(runs)
    check_each_slice_got_whole_group_rewards(runs)
    check_logged_metrics_describe_the_whole_batch(runs)
    check_weights_match_one_process(runs)


# ---- the launch configs (read as accelerate reads them; DeepSpeed itself is not needed to check them) ---------


@pytest.mark.parametrize("name,kind,stage", [("cpu_2proc", "MULTI_GPU", None), ("zero2", "DEEPSPEED", 2),
                                             ("zero3", "DEEPSPEED", 3)])
def test_launch_configs_are_what_accelerate_reads(name, kind, stage):
    from accelerate.commands.config.config_args import load_config_from_file
    from accelerate.commands.launch import launch_command_parser

    path = LAUNCH / f"{name}.yaml"
    first = path.read_text().splitlines()[0]
    assert first.startswith(f"# accelerate launch --config_file launch/{name}.yaml "), first
    config = load_config_from_file(str(path))  # refuses unknown top-level keys
    assert config.distributed_type.value == kind
    assert config.num_processes >= 2
    if stage is not None:
        # `accelerate launch` turns each deepspeed_config key into its own option; an unknown one would be ignored
        options = {action.dest for action in launch_command_parser()._actions}
        assert set(config.deepspeed_config) <= options, set(config.deepspeed_config) - options
        assert config.deepspeed_config["zero_stage"] == stage
        assert "gradient_accumulation_steps" not in config.deepspeed_config  # left to the run's parameters


def test_train_entry_point_resolves_parameters_without_training(capsys):
    from searchrl.experiments.train import main

    assert main(["-f", str(ROOT / "params/quickstart/smoke.yaml"), "-p", "rl_steps", "3", "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "rl_steps: 3" in out and "model: tiny-searcher" in out
    assert main(["-p", "rl_stepz", "3", "--dry-run"]) == 2
    assert "did you mean 'rl_steps'" in capsys.readouterr().err


def test_train_entry_point_refuses_zero3(monkeypatch, capsys):
    from searchrl.experiments.train import main

    monkeypatch.setenv("ACCELERATE_DEEPSPEED_ZERO_STAGE", "3")  # what `accelerate launch` sets for zero3.yaml
    assert main(["-f", str(ROOT / "params/quickstart/smoke.yaml")]) == 2
    assert "ZeRO-3" in capsys.readouterr().err


def test_mean_over_processes_weighs_each_slice_by_its_size():
    from searchrl.trainer.across_processes import mean_over_processes

    # process 0 averaged 2 samples (and 10 tokens), process 1 averaged 4 samples (and 30 tokens)
    slices = [({"searches": 1.0, "masked": 0.5}, {"searches": 2, "masked": 10}),
              ({"searches": 4.0, "masked": 0.0}, {"searches": 4, "masked": 30})]
    sent = []

    class Sending:  # what each process contributes to the sum
        num_processes, device = 2, "cpu"

        def reduce(self, tensor, reduction):
            sent.append(tensor)
            return tensor

    for values, weights in slices:
        mean_over_processes(values, weights, Sending())

    class Summing:  # the reduction every process gets back
        num_processes, device = 2, "cpu"

        def reduce(self, tensor, reduction):
            assert reduction == "sum"
            return sent[0] + sent[1]

    assert mean_over_processes(*slices[1], Summing()) == pytest.approx({"searches": (2 * 1 + 4 * 4) / 6,
                                                                         "masked": 5 / 40})

    class Alone:
        num_processes = 1

    assert mean_over_processes(*slices[0], Alone()) == slices[0][0]
