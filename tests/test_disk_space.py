"""A checkpoint that would not fit on the disk stops the run before anything is written, with a message that says
what to do (a full disk otherwise fails mid-write with a cryptic serialization error and a cut-short checkpoint)."""

from __future__ import annotations

import errno
import shutil
from collections import namedtuple

import pytest

from fakes import SEARCH_SCRIPTS, FakeRetriever, MiniProtocol, ScriptedGenerator
from searchrl.config import RunConfig
from searchrl.core.disk import checkpoint_space_problem
from searchrl.rollout import RolloutConfig, SearchRollout
from searchrl.runs.checkpoints import drop_resume_state
from searchrl.trainer import SearchGRPOTrainer, prompt_dataset
from searchrl.trainer.arguments import grpo_args

Usage = namedtuple("Usage", "total used free")


def _free(monkeypatch, free_bytes: int) -> None:
    monkeypatch.setattr(shutil, "disk_usage", lambda path: Usage(10**12, 10**12 - free_bytes, free_bytes))


def test_space_problem_names_the_sizes_and_what_to_do(monkeypatch, tmp_path):
    _free(monkeypatch, 2 * 10**9)
    assert checkpoint_space_problem(tmp_path, 10**9) is None
    problem = checkpoint_space_problem(tmp_path / "not" / "yet" / "made", 3 * 10**9)
    assert problem is not None
    assert "2.0 GB free" in problem and "needs about 3.0 GB" in problem
    assert "save_steps" in problem and "--resume" in problem and "optimizer.pt" in problem


def _trainer(tmp_path, policy_path, tokenizer, save_only_model=False):
    cfg = RunConfig(prompts_per_step=1, num_generations=4, rl_steps=1, learning_rate=1e-3, save_steps=1,
                    device="cpu", max_completion_tokens=96, health_action="off")
    args = grpo_args(cfg, tmp_path / "rl")
    args.save_only_model = save_only_model
    rows = [{"id": "q0", "question": "When was Entity1 founded?", "golden_answers": ["1901"], "metadata": {}}]
    protocol = MiniProtocol()
    trainer = SearchGRPOTrainer(model=str(policy_path), reward_funcs=[lambda completions, **kw: [1.0] * len(completions)],
                                args=args, train_dataset=prompt_dataset(rows, protocol, tokenizer),
                                retriever=FakeRetriever(), protocol=protocol, processing_class=tokenizer)
    trainer._engine = SearchRollout(protocol, trainer.retriever, tokenizer, ScriptedGenerator(tokenizer, SEARCH_SCRIPTS),
                                    RolloutConfig(max_completion_tokens=96))
    return trainer


def test_checkpoint_size_is_weights_plus_adams_two_moments(tmp_path, tiny_policy_path, tokenizer):
    trainer = _trainer(tmp_path, tiny_policy_path, tokenizer)
    params = list(trainer.model.parameters())
    n = sum(p.numel() for p in params)
    assert all(p.requires_grad and p.element_size() == 4 for p in params)
    assert trainer.checkpoint_bytes() == 4 * n + 8 * n
    trainer.args.save_only_model = True
    assert trainer.checkpoint_bytes() == 4 * n


def test_a_checkpoint_that_does_not_fit_stops_the_run_before_writing(monkeypatch, tmp_path, tiny_policy_path,
                                                                    tokenizer):
    trainer = _trainer(tmp_path, tiny_policy_path, tokenizer)
    _free(monkeypatch, trainer.checkpoint_bytes() - 1)
    with pytest.raises(OSError, match="cannot save checkpoint-1: .* GB free") as caught:
        trainer.train()
    assert caught.value.errno == errno.ENOSPC
    assert not (tmp_path / "rl" / "checkpoint-1").exists()


def test_a_checkpoint_that_fits_is_written(monkeypatch, tmp_path, tiny_policy_path, tokenizer):
    trainer = _trainer(tmp_path, tiny_policy_path, tokenizer)
    _free(monkeypatch, trainer.checkpoint_bytes())
    trainer.train()
    assert (tmp_path / "rl" / "checkpoint-1" / "trainer_state.json").is_file()


def test_a_completed_run_drops_its_resume_state_and_keeps_its_policies(tmp_path):
    def write(relative, size):
        path = tmp_path / "checkpoints" / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"x" * size)

    for policy in ("cold_start", "rl"):
        write(f"{policy}/config.json", 10)
    write("rl/checkpoint-4/optimizer.pt", 1000)
    write("rl/checkpoint-8/model.safetensors", 500)
    write("rl_start/model.safetensors", 300)
    assert drop_resume_state(tmp_path) == 1800
    left = sorted(str(p.relative_to(tmp_path / "checkpoints")) for p in (tmp_path / "checkpoints").rglob("*"))
    assert left == ["cold_start", "cold_start/config.json", "rl", "rl/config.json"]
    assert drop_resume_state(tmp_path / "nothing here") == 0
