"""A reward or loss that never acted in an RL stage is named when the stage ends."""

from __future__ import annotations

import math

import pytest

from searchrl.config import RunConfig
from searchrl.experiments.experiment import Experiment
from searchrl.runs.folder import RUN_DIR_ENV
from searchrl.trainer.monitors.idle_mechanisms import idle_mechanisms
from searchrl.trainer.schedules import Stage


def _step(group_std, rewrites_kept, f1_std=0.3):
    return {"reward": -1.0, "rewards/f1/mean": 0.2, "rewards/f1/std": f1_std, "rewards/group_r1spp/mean": 0.0,
            "rewards/group_r1spp/std": group_std, "memorization/rewrites_kept": rewrites_kept}


def test_rewards_that_told_no_rollouts_apart_and_a_memorization_loss_that_never_acted_are_named():
    # ablate_knowledge's cpu profile, seed 0: RL stopped searching, so the group reward stayed 0 and nothing was
    # rewritten; the summary row TRL logs at the end carries no reward columns
    rows = [_step(0.0, 0), _step(0.0, 0), _step(math.nan, 0), {"train_runtime": 10.0}]
    lines = idle_mechanisms(rows, memorization_coef=0.1)
    assert len(lines) == 2
    assert lines[0].startswith("reward group_r1spp gave every rollout the same value (0) in each of 2 logged steps")
    assert lines[1].startswith("the memorization loss (memorization_coef 0.1) never acted: in 3 logged steps")
    # one step in which the group reward told rollouts apart, or one kept rewrite: each acted
    assert idle_mechanisms([_step(0.0, 0), _step(0.5, 1)], memorization_coef=0.1) == []
    # the loss switched off is not a loss that failed to act; a reward constant in each step but not across them
    # still moved no advantage
    varying = [_step(0.0, 0) | {"rewards/group_r1spp/mean": m} for m in (0.0, 1.0)]
    expected = ("reward group_r1spp gave every rollout the same value in each of 2 logged steps: it told no rollouts "
                "apart, so it moved no advantage")
    assert idle_mechanisms(varying, memorization_coef=0.0) == [expected]
    assert idle_mechanisms([], memorization_coef=0.1) == []  # nothing logged: nothing to say


def test_an_rl_stage_warns_about_what_never_acted_in_it(tmp_path, monkeypatch):
    monkeypatch.setenv(RUN_DIR_ENV, str(tmp_path / "run"))
    cfg = RunConfig.from_params({"model": "tiny-random", "world_entities": 40, "n_train": 8, "n_eval": 4,
                                 "output_root": str(tmp_path), "memorization_coef": 0.1,
                                 "protocol": "r1_searcher_pp"})
    exp = Experiment(cfg, notebook="t")
    exp.history.append(_step(0.0, 0) | {"stage": "rl_stage1"}, step=1)
    exp.history.append(_step(0.4, 2) | {"stage": "rl_stage2"}, step=2)
    idle_reward = r"rl_stage1: reward group_r1spp gave every rollout the same value \(0\) in each of 1 logged step:"
    with pytest.warns(UserWarning, match=idle_reward) as caught:
        exp._warn_idle_mechanisms(Stage("rl_stage1", [], 1))
    assert any("rl_stage1: the memorization loss" in str(w.message) for w in caught)
    assert not any("rl_stage2" in str(w.message) for w in caught)
