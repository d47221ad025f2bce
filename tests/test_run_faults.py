"""Faults for real: a run SIGKILLed mid-RL and resumed, a resume of a live run, a dead owner seen by readers,
a half-written checkpoint at resume."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kill_and_resume import assert_same_history, history, kill_after_checkpoint
from searchrl.experiments.runner import main
from searchrl.runs.folder import create_run_dir
from searchrl.runs.listing import list_runs
from searchrl.runs.ownership import RunOwnership, owner_alive
from searchrl.runs.status import mark_status, read_status

ROOT = Path(__file__).resolve().parents[1]
SMOKE = ROOT / "params" / "quickstart" / "smoke.yaml"
REWARD = f"[{Path(__file__).with_name('fault_rewards.py')}:varied]"


def _hold(run_dir: Path) -> subprocess.Popen:
    """Another process that owns `run_dir` until killed."""
    code = ("import sys, time; from searchrl.runs.ownership import RunOwnership; "
            f"RunOwnership({str(run_dir)!r}).acquire(); print('owned', flush=True); time.sleep(600)")
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "owned"
    return proc


def test_resume_of_a_live_run_is_refused_and_a_dead_owner_reads_as_died(tmp_path, capsys):
    run_dir = create_run_dir("quickstart", "", tmp_path)
    (run_dir / "params.yaml").write_text("seed: 0\n")
    mark_status(run_dir, "running")
    owner = _hold(run_dir)
    try:
        assert owner_alive(run_dir)
        assert main(["--resume", str(run_dir), str(ROOT / "notebooks" / "quickstart.ipynb")]) == 2
        err = capsys.readouterr().err
        assert "is being run by another live process" in err and f"pid {owner.pid}" in err
        assert list_runs(tmp_path)["status"].tolist() == ["running"]
    finally:
        owner.kill()
        owner.wait()
    assert not owner_alive(run_dir)
    assert list_runs(tmp_path)["status"].tolist() == ["died"]  # status.json still says running; nobody owns it
    RunOwnership(run_dir).acquire().release()  # a dead owner's folder can be taken over


def _runner(out: Path, *extra: str) -> subprocess.Popen:
    # The random model rather than the smoke profile's searcher: its rollouts of a group differ, so the `varied`
    # reward gives every step a gradient to check.
    cmd = [sys.executable, "-m", "searchrl.runner", str(ROOT / "notebooks" / "quickstart.ipynb"), "-f", str(SMOKE),
           "-p", "model", "tiny-random", "-p", "max_completion_tokens", "48",
           "-p", "rewards", REWARD, "-p", "rl_steps", "4", "-p", "save_steps", "1", "-p", "sft_examples", "0",
           "--output-root", str(out), "--quiet", *extra]
    return subprocess.Popen(cmd, cwd=ROOT, start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            text=True)


def _processes_running(run_dir: Path) -> list[int]:
    """Processes whose environment names `run_dir` as their run folder (the runner and its kernel)."""
    needle = f"SEARCHRL_RUN_DIR={run_dir}".encode()
    found = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                if needle in (proc / "environ").read_bytes().split(b"\0"):
                    found.append(int(proc.name))
            except OSError:
                continue
    return found


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="finds the run's processes through /proc (Linux)")
def test_a_run_killed_mid_rl_resumes_to_the_same_history(tmp_path):
    clean = _runner(tmp_path / "clean")
    assert clean.wait(timeout=600) == 0, clean.stderr.read()
    (clean_dir,) = (tmp_path / "clean" / "quickstart").iterdir()

    # SIGKILL to the runner and its group; the kernel has a session of its own.
    run_dir = kill_after_checkpoint(_runner(tmp_path / "killed"), tmp_path / "killed", "quickstart", timeout=600)
    # The kernel follows its runner within seconds (usually writing why into status.json first); then nothing
    # writes into the folder any more, and readers see the run as died either way.
    for _ in range(100):
        if not _processes_running(run_dir):
            break
        time.sleep(0.1)
    assert not _processes_running(run_dir), "the kernel outlived its runner"
    status = read_status(run_dir)
    assert status["status"] in ("died", "running"), status
    if status["status"] == "died":
        assert "runner" in status["error"]
    assert not owner_alive(run_dir)
    assert list_runs(tmp_path / "killed")["status"].tolist() == ["died"]
    steps_at_kill = len(history(run_dir))
    time.sleep(2)
    assert len(history(run_dir)) == steps_at_kill

    resumed = subprocess.run([sys.executable, "-m", "searchrl.runner", "--resume", str(run_dir), "--quiet"],
                             cwd=ROOT, capture_output=True, text=True, timeout=600, check=False)
    assert resumed.returncode == 0, resumed.stderr
    assert read_status(run_dir)["status"] == "completed"
    assert_same_history(run_dir, clean_dir)
    assert json.loads((run_dir / "provenance.json").read_text())["resumed"]


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="finds the run's processes through /proc (Linux)")
def test_a_kernel_killed_mid_run_fails_the_run_instead_of_hanging(tmp_path):
    # What the out-of-memory killer does to a kernel that grows too large: SIGKILL to the kernel alone, while the
    # runner waits for the cell's reply. The runner used to wait for ever (its blocking kernel manager kept the
    # liveness check from running); it must fail the run, say what happened and how to continue.
    victim = _runner(tmp_path, "-p", "rl_steps", "40")
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline and not list(tmp_path.glob("quickstart/*/checkpoints/rl/checkpoint-1")):
        assert victim.poll() is None, victim.stderr.read()
        time.sleep(0.2)
    (run_dir,) = (tmp_path / "quickstart").iterdir()
    (kernel,) = [pid for pid in _processes_running(run_dir) if pid != victim.pid]
    os.kill(kernel, signal.SIGKILL)
    try:
        returncode = victim.wait(timeout=60)
    except subprocess.TimeoutExpired:
        os.killpg(victim.pid, signal.SIGKILL)
        raise AssertionError("the runner still waits for a kernel that was killed a minute ago") from None
    assert returncode != 0
    stderr = victim.stderr.read()
    assert "kernel died" in stderr and "--resume" in stderr, stderr
    status = read_status(run_dir)
    assert status["status"] == "failed" and "kernel died" in status["error"], status


def test_resume_skips_half_written_checkpoints(tmp_path, tiny_policy):
    import shutil

    from searchrl.models import save_policy
    from searchrl.runs.checkpoints import last_complete_checkpoint

    good = save_policy(*tiny_policy, tmp_path / "checkpoint-1")
    (good / "trainer_state.json").write_text(json.dumps({"global_step": 1}))
    no_state = tmp_path / "checkpoint-2"
    shutil.copytree(good, no_state)
    (no_state / "trainer_state.json").unlink()  # the crash came before the Trainer's last file
    cut = tmp_path / "checkpoint-3"
    shutil.copytree(good, cut)
    weights = next(cut.glob("*.safetensors"))
    weights.write_bytes(weights.read_bytes()[: weights.stat().st_size // 2])  # torn mid-write
    chosen, skipped = last_complete_checkpoint(tmp_path)
    assert chosen == good
    assert [(p.name, why.split(" ")[0]) for p, why in skipped] == [("checkpoint-3", "model.safetensors"),
                                                                   ("checkpoint-2", "no")]
    assert last_complete_checkpoint(tmp_path / "nothing") == (None, [])


def test_a_crash_while_saving_a_policy_leaves_the_previous_one(tmp_path, tiny_policy):
    from searchrl.models import save_policy

    model, tokenizer = tiny_policy
    folder = save_policy(model, tokenizer, tmp_path / "cold_start")
    before = sorted(p.name for p in folder.iterdir())

    class Broken:
        def save_pretrained(self, path):
            raise OSError("disk full")

    with pytest.raises(OSError, match="disk full"):
        save_policy(model, Broken(), folder)
    assert sorted(p.name for p in folder.iterdir()) == before  # untouched, not half replaced
    assert [p.name for p in tmp_path.iterdir()] == ["cold_start"]  # no temporary folder left behind


def test_saving_a_policy_keeps_the_trainer_checkpoints_beside_it(tmp_path, tiny_policy):
    from searchrl.models import save_policy

    (tmp_path / "rl" / "checkpoint-2").mkdir(parents=True)
    (tmp_path / "rl" / "checkpoint-2" / "trainer_state.json").write_text("{}")
    save_policy(*tiny_policy, tmp_path / "rl")
    assert (tmp_path / "rl" / "checkpoint-2" / "trainer_state.json").exists()
    assert (tmp_path / "rl" / "config.json").exists() and list((tmp_path / "rl").glob("*.safetensors"))
