"""`python -m searchrl.train --resume RUN_DIR`: a two-process run SIGKILLed mid-RL continues in its folder and
ends where an uninterrupted two-process run ends; what it refuses (a live owner, a folder that is no run, -f files).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from fakes import free_port
from kill_and_resume import assert_same_history, kill_after_checkpoint
from searchrl.experiments.train import main
from searchrl.runs.folder import create_run_dir
from searchrl.runs.status import mark_status, read_status

ROOT = Path(__file__).resolve().parents[1]
SMOKE = ROOT / "params" / "quickstart" / "smoke.yaml"
REWARD = f"[{Path(__file__).with_name('fault_rewards.py')}:varied]"
ENV = {"HF_HUB_OFFLINE": "1", **os.environ, "OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false"}


def _launch(*args: str) -> list[str]:
    """`accelerate launch` of searchrl.experiments.train in two CPU processes (launch/cpu_2proc.yaml)."""
    return [sys.executable, "-m", "accelerate.commands.launch", "--config_file", str(ROOT / "launch" / "cpu_2proc.yaml"),
            "--num_processes", "2", "--main_process_port", str(free_port()), "-m", "searchrl.train", *args]


def _fresh(out: Path) -> subprocess.Popen:
    # The random model rather than the smoke profile's searcher: its rollouts of a group differ, so the `varied`
    # reward gives every step a gradient, and a checkpoint after every step gives the kill somewhere to land.
    cmd = _launch("-f", str(SMOKE), "-p", "model", "tiny-random", "-p", "max_completion_tokens", "48",
                  "-p", "rewards", REWARD, "-p", "rl_steps", "4", "-p", "save_steps", "1", "-p", "sft_examples", "0",
                  "-p", "device", "cpu", "-p", "output_root", str(out))
    return subprocess.Popen(cmd, cwd=ROOT, env=ENV, start_new_session=True, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)


@pytest.mark.slow
def test_a_two_process_run_killed_mid_rl_resumes_to_the_same_history(tmp_path):
    clean = _fresh(tmp_path / "clean")
    _, err = clean.communicate(timeout=900)
    assert clean.returncode == 0, err[-8000:]
    (clean_dir,) = (tmp_path / "clean" / "train").iterdir()

    # The launcher and both training processes are one process group: all three die together.
    run_dir = kill_after_checkpoint(_fresh(tmp_path / "killed"), tmp_path / "killed", "train", timeout=900)
    assert read_status(run_dir)["status"] in ("running", "died")
    assert not (run_dir / "checkpoints" / "rl" / "checkpoint-4").exists(), "the kill came too late to test a resume"

    resumed = subprocess.run(_launch("--resume", str(run_dir)), cwd=ROOT, env=ENV, capture_output=True, text=True,
                             timeout=900, check=False)
    assert resumed.returncode == 0, resumed.stderr[-8000:]
    assert read_status(run_dir)["status"] == "completed"
    assert "resume: rl continues from checkpoint-" in resumed.stdout
    assert_same_history(run_dir, clean_dir)
    provenance = json.loads((run_dir / "provenance.json").read_text())
    assert provenance["resumed"] and "--resume" in provenance["resumed"][0]["command"]
    assert "resume: true" in (run_dir / "params.yaml").read_text()


def test_resume_refuses_a_live_run_a_folder_that_is_no_run_and_parameter_files(tmp_path, capsys):
    assert main(["--resume", str(tmp_path)]) == 2
    assert "not a run folder (no params.yaml)" in capsys.readouterr().err

    run_dir = create_run_dir("train", "", tmp_path)
    (run_dir / "params.yaml").write_text(SMOKE.read_text())
    assert main(["--resume", str(run_dir), "-f", str(SMOKE)]) == 2
    assert "drop the -f files" in capsys.readouterr().err

    assert main(["--resume", str(run_dir), "-p", "rl_steps", "3", "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "resume: true" in out and "rl_steps: 3" in out and "model: tiny-searcher" in out

    mark_status(run_dir, "running")
    code = ("import time; from searchrl.runs.ownership import RunOwnership; "
            f"RunOwnership({str(run_dir)!r}).acquire(); print('owned', flush=True); time.sleep(600)")
    owner = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        assert owner.stdout.readline().strip() == "owned"
        assert main(["--resume", str(run_dir), "-p", "device", "cpu"]) == 2
        assert "is being run by another live process" in capsys.readouterr().err
        provenance = run_dir / "provenance.json"
        assert not provenance.exists() or "resumed" not in json.loads(provenance.read_text())
        assert (run_dir / "params.yaml").read_text() == SMOKE.read_text()  # the live run's folder is left alone
    finally:
        owner.kill()
        owner.wait()
