"""Ablations: arms checked before anything runs, one cold start per seed and cold-start key, resume at the first
unfinished arm, band curves, the evaluation table and the verdicts on hand-worked numbers, and one tiny real run."""

from __future__ import annotations

import importlib
import json
import math
import os
import warnings

import numpy as np
import pandas as pd
import pytest

from searchrl.config import ConfigError, RunConfig
from searchrl.core.files import write_trajectories
from searchrl.experiments.ablation import Ablation, Claim, arm_table, band_curves, band_frame, verdict, verdict_table
from searchrl.experiments.ablation.layout import arm_folder, records_path, trained_policy
from searchrl.runs.history import MetricsHistory

# Per-question F1 of each arm, the same for every seed: f1 beats em on questions q0 and q2.
SCORES = {"em": [0.0, 1.0, 0.0, 0.0], "f1": [1.0, 1.0, 0.5, 0.0], "r1s": [0.0, 0.0, 0.0, 0.0],
          "cem": [0.0, 1.0, 0.5, 0.0], "sft": [0.0, 0.0, 1.0, 0.0], "cold_start": [0.0, 0.0, 0.5, 0.0]}


class FakeWork:
    """Writes what an Experiment would (history, per-question records) without training; can fail once."""

    def __init__(self, fail_at: tuple[str, int] | None = None, fail_in: str = "training"):
        self.fail_at, self.fail_in = fail_at, fail_in
        self.cold_starts: list[tuple[str, int]] = []
        self.runs: list[tuple[str, int, str]] = []

    def cold_start(self, cfg, folder):
        self.cold_starts.append((folder.name, cfg.seed))
        model = folder / "checkpoints" / "cold_start"
        model.mkdir(parents=True)
        (model / "config.json").write_text("{}")
        return model

    def train_and_evaluate(self, cfg, folder, start):
        arm = folder.parent.name
        self.runs.append((arm, cfg.seed, str(start)))
        failing = (arm, cfg.seed) == self.fail_at
        # as ExperimentWork: a policy trained before is only evaluated, and an arm without RL only evaluates
        if cfg.rl_steps > 0 and trained_policy(cfg, folder) is None:
            history = MetricsHistory(folder)
            for step in (1, 2):
                history.append({"reward": step + cfg.seed, "search/searches_per_sample": 1.0}, step=step)
            if failing and self.fail_in == "training":  # logged its steps, saved no checkpoint
                self.fail_at = None
                raise RuntimeError("killed mid-arm")
            (folder / "checkpoints" / "rl").mkdir(parents=True)
            (folder / "checkpoints" / "rl" / "config.json").write_text("{}")
        if failing:
            self.fail_at = None
            raise RuntimeError("killed mid-arm")
        write_trajectories(records_path(folder), [{"id": f"q{i}", "em": float(s == 1.0), "f1": s, "searches": 1,
                                                   "model_tokens": 10 * (i + 1)}
                                                  for i, s in enumerate(SCORES[arm.split(".")[0]])])


def _cfg(tmp_path, **changes):
    return RunConfig.from_params({"output_root": str(tmp_path), "sft_examples": 4, **changes})


ARMS = {"em": {"rewards": ["em"]}, "f1": {"rewards": ["f1"], "learning_rate": 2e-5}}


def test_a_mistyped_arm_fails_naming_the_arm_before_any_folder_is_made(tmp_path):
    run = tmp_path / "run"
    cases = [
        ({"em": {"rewards": ["em"]}, "f1": {"rewardz": ["f1"]}},
         r"arm 'f1': unknown parameter 'rewardz' \(did you mean 'rewards'\?\)"),
        ({"lr": {"learning_rate": "fast"}}, r"arm 'lr': parameter 'learning_rate' expects float, got 'fast'"),
        ({"s": {"seed": 3}}, r"arm 's' may not set seed"),
        ({"a/b": {}}, r"arm 'a/b': a name is a folder name"),
        ({"em": ["rewards"]}, r"arm 'em' must map parameter names to values"),
    ]
    for arms, message in cases:
        with pytest.raises(ConfigError, match=message):
            Ablation(_cfg(tmp_path), arms, seeds=[0], work=FakeWork(), run_dir=run)
    with pytest.raises(ConfigError, match=r"names arm 'f2', which is not among the arms \(em, f1\)"):
        Ablation(_cfg(tmp_path), ARMS, [0], [Claim("F1 beats EM", better="f2", worse="em")], work=FakeWork(),
                 run_dir=run)
    with pytest.raises(ConfigError, match=r"metric 'f2' is not one of .*\(did you mean 'f1'\?\)"):
        Ablation(_cfg(tmp_path), ARMS, [0], [Claim("x", better="f1", worse="em", metric="f2")], work=FakeWork(),
                 run_dir=run)
    with pytest.raises(ConfigError, match="seed 1 is listed twice"):
        Ablation(_cfg(tmp_path), ARMS, seeds=[1, 1], work=FakeWork(), run_dir=run)
    assert not run.exists()


def test_arms_share_one_cold_start_per_seed_unless_they_change_what_it_depends_on(tmp_path):
    arms = {**ARMS, "r1s": {"protocol": "r1_searcher"}}  # another protocol: other prompts, another cold start
    work = FakeWork()
    ablation = Ablation(_cfg(tmp_path), arms, seeds=[0, 1], work=work, run_dir=tmp_path / "run")
    plan = ablation.run()
    assert plan["state"].tolist() == ["done"] * 6
    assert len(work.cold_starts) == 4 and {seed for _, seed in work.cold_starts} == {0, 1}
    starts = {(arm, seed): start for arm, seed, start in work.runs}
    assert starts["em", 0] == starts["f1", 0] != starts["r1s", 0]
    assert starts["em", 0] != starts["em", 1]  # each seed has its own cold start
    assert "/shared/seed0/cold_start-" in starts["em", 0]
    # each arm and seed in its own folder, with the arm's settings
    params = json.loads((arm_folder(ablation.run_dir, "f1", 1) / "arm.json").read_text())["params"]
    assert params["rewards"] == ["f1"] and params["learning_rate"] == 2e-5 and params["seed"] == 1
    assert json.loads((ablation.run_dir / "ablation.json").read_text())["seeds"] == [0, 1]


def test_the_cold_start_arm_evaluates_the_shared_cold_start_without_rl(tmp_path):
    claims = {"F1 beats the cold start": {"better": "f1", "worse": "cold_start", "metric": "f1"}}
    work = FakeWork()
    ablation = Ablation(_cfg(tmp_path, arms=ARMS, cold_start_arm=True, claims=claims), seeds=[0, 1], work=work,
                        run_dir=tmp_path / "run")
    plan = ablation.run()
    assert plan["arm"].tolist() == ["em", "f1", "cold_start"] * 2 and set(plan["state"]) == {"done"}
    # it starts from the cold start the arms share, and trains nothing
    starts = {(arm, seed): start for arm, seed, start in work.runs}
    assert starts["cold_start", 0] == starts["em", 0] != starts["cold_start", 1] == starts["em", 1]
    assert len(work.cold_starts) == 2
    assert MetricsHistory(arm_folder(ablation.run_dir, "cold_start", 0)).to_frame().empty
    assert ablation.table().index.tolist() == ["em", "f1", "cold_start"]
    verdict = ablation.verdicts().iloc[0]
    assert verdict["difference"] == pytest.approx((2.5 - 0.5) / 4)  # f1's mean F1 minus the cold start's
    # without the setting no arm is called cold_start, so a claim naming it fails before anything runs
    with pytest.raises(ConfigError, match=r"names arm 'cold_start', which is not among the arms"):
        _cfg(tmp_path, arms=ARMS, claims=claims)
    with pytest.raises(ConfigError, match="arm 'em' may not set cold_start_arm"):
        Ablation(_cfg(tmp_path), {"em": {"cold_start_arm": True}}, seeds=[0], work=FakeWork(), run_dir=tmp_path / "x")


def test_an_arm_can_start_from_another_arms_cold_start(tmp_path):
    # f1 and r1s change the search budget, which the cold start reads; f1 starts from em's cold start all the same
    arms = {"em": {}, "f1": {"max_searches": 1, "cold_start_from": "em"}, "r1s": {"max_searches": 1}}
    work = FakeWork()
    ablation = Ablation(_cfg(tmp_path), arms, seeds=[0], work=work, run_dir=tmp_path / "run")
    ablation.run()
    starts = {arm: start for arm, _, start in work.runs}
    assert starts["f1"] == starts["em"] != starts["r1s"] and len(work.cold_starts) == 2
    keys = {arm: d["cold_start"]["0"] for arm, d in json.loads((ablation.run_dir / "ablation.json").read_text())[
        "arms"].items()}
    assert keys["f1"] == keys["em"] != keys["r1s"]
    assert json.loads((arm_folder(ablation.run_dir, "f1", 0) / "arm.json").read_text())["params"]["max_searches"] == 1
    # set for the whole ablation, every arm starts from the one named (it keeps its own)
    work = FakeWork()
    Ablation(_cfg(tmp_path, cold_start_from="em"), {"em": {}, "r1s": {"max_searches": 1}}, seeds=[0], work=work,
             run_dir=tmp_path / "run2").run()
    assert len(work.cold_starts) == 1 and work.runs[0][2] == work.runs[1][2]
    # a name that is no arm, or a chain, fails before anything runs (in a params file too)
    bad = [({"em": {}, "f1": {"cold_start_from": "e"}}, r"arm 'f1': cold_start_from names no arm: 'e'"),
           ({"em": {"cold_start_from": "f1"}, "f1": {"cold_start_from": "r1s"}, "r1s": {}},
            r"arm 'em': cold_start_from 'f1' starts from 'r1s' in turn")]
    for arms, message in bad:
        with pytest.raises(ConfigError, match=message):
            Ablation(_cfg(tmp_path), arms, seeds=[0], work=FakeWork(), run_dir=tmp_path / "run3")
        with pytest.raises(ConfigError, match=message):
            _cfg(tmp_path, arms=arms)
    assert not (tmp_path / "run3").exists()


def test_the_cold_start_arm_evaluates_every_cold_start_an_arm_starts_from(tmp_path):
    # em keeps the shared cold start; f1 and r1s change the search budget, r1s starting from f1's cold start
    arms = {"em": {}, "f1": {"max_searches": 1}, "r1s": {"max_searches": 1, "learning_rate": 2e-5,
                                                         "cold_start_from": "f1"}}
    claims = {"RL gains": {"better": "f1", "worse": "cold_start.f1", "metric": "f1"}}
    cfg = _cfg(tmp_path, arms=arms, cold_start_arm=True, claims=claims)  # the added arm may be named in a claim
    work = FakeWork()
    ablation = Ablation(cfg, seeds=[0], work=work, run_dir=tmp_path / "run")
    assert [a.name for a in ablation.arms] == ["em", "f1", "r1s", "cold_start", "cold_start.f1"]
    ablation.run()
    starts = {arm: start for arm, _, start in work.runs}
    assert starts["cold_start"] == starts["em"] != starts["cold_start.f1"] == starts["f1"] == starts["r1s"]
    assert len(work.cold_starts) == 2
    # evaluated with f1's settings and no RL
    params = json.loads((arm_folder(ablation.run_dir, "cold_start.f1", 0) / "arm.json").read_text())["params"]
    assert params["max_searches"] == 1 and params["rl_steps"] == 0
    assert MetricsHistory(arm_folder(ablation.run_dir, "cold_start.f1", 0)).to_frame().empty
    assert ablation.verdicts().iloc[0]["difference"] == pytest.approx((2.5 - 0.5) / 4)
    # arms that all share one cold start add only `cold_start`
    assert [a.name for a in Ablation(_cfg(tmp_path, arms=ARMS, cold_start_arm=True), seeds=[0], work=FakeWork(),
                                     run_dir=tmp_path / "run2").arms] == ["em", "f1", "cold_start"]


def test_an_interrupted_ablation_resumes_at_the_first_unfinished_arm(tmp_path):
    arms = {**ARMS, "r1s": {"rewards": ["f1"], "beta": 0.01}}
    first = FakeWork(fail_at=("f1", 1))
    with pytest.raises(RuntimeError, match="killed mid-arm"):
        Ablation(_cfg(tmp_path), arms, seeds=[0, 1], work=first, run_dir=tmp_path / "run").run()
    assert [(a, s) for a, s, _ in first.runs] == [("em", 0), ("f1", 0), ("r1s", 0), ("em", 1), ("f1", 1)]
    again = FakeWork()
    ablation = Ablation(_cfg(tmp_path), arms, seeds=[0, 1], work=again, run_dir=tmp_path / "run")
    plan = ablation.plan()
    assert plan["state"].tolist() == ["done"] * 4 + ["partial", "to do"]
    # a finished arm shows its held-out F1 and searches; an unfinished one has none yet
    assert plan.loc[0, "F1"] == pytest.approx(sum(SCORES["em"]) / len(SCORES["em"]))
    assert plan.loc[0, "searches/question"] == 1.0 and plan[["F1", "searches/question"]].iloc[4:].isna().all().all()
    ablation.run()
    assert [(a, s) for a, s, _ in again.runs] == [("f1", 1), ("r1s", 1)]
    assert again.cold_starts == []  # seed 1's cold start was finished before the interruption
    # the partial arm had no checkpoint, so it restarted: its history holds each step once
    assert MetricsHistory(arm_folder(ablation.run_dir, "f1", 1)).to_frame()["step"].tolist() == [1, 2]
    assert not Ablation(_cfg(tmp_path), arms, seeds=[0, 1], work=again, run_dir=tmp_path / "run").run().empty
    assert len(again.runs) == 2  # a finished ablation runs nothing more


def _stopped_in_evaluation_then_resumed(tmp_path, arms, arm):
    """Run `arms` until `arm` seed 0 fails during its evaluation, mark its folder, run again; the arm's folder."""
    work = FakeWork(fail_at=(arm, 0), fail_in="evaluation")
    with pytest.raises(RuntimeError, match="killed mid-arm"):
        Ablation(_cfg(tmp_path), arms, seeds=[0], work=work, run_dir=tmp_path / "run").run()
    folder = arm_folder(tmp_path / "run", arm, 0)
    (folder / "kept").write_text("")
    Ablation(_cfg(tmp_path), arms, seeds=[0], work=work, run_dir=tmp_path / "run").run()
    return folder


def test_an_arm_stopped_during_evaluation_keeps_its_trained_policy(tmp_path):
    folder = _stopped_in_evaluation_then_resumed(tmp_path, ARMS, "f1")
    assert (folder / "kept").exists() and (folder / "done.json").exists()  # the folder was continued, not wiped
    assert MetricsHistory(folder).to_frame()["step"].tolist() == [1, 2]


def test_an_arm_without_rl_stopped_during_evaluation_keeps_its_folder(tmp_path):
    # The cold start alone (no RL stage) has no checkpoint to show; what it leaves is evaluation records to continue
    folder = _stopped_in_evaluation_then_resumed(tmp_path, {"sft": {"rl_steps": 0}}, "sft")
    assert (folder / "kept").exists() and (folder / "done.json").exists()


def test_resuming_with_changed_arm_settings_is_refused(tmp_path):
    Ablation(_cfg(tmp_path), ARMS, seeds=[0], work=FakeWork(), run_dir=tmp_path / "run").run()
    changed = {**ARMS, "f1": {"rewards": ["f1"], "learning_rate": 3e-5}}
    with pytest.raises(ConfigError, match=r"arm 'f1' seed 0 .* other settings \(learning_rate: 2e-05 -> 3e-05\)"):
        Ablation(_cfg(tmp_path), changed, seeds=[0], work=FakeWork(), run_dir=tmp_path / "run")


def test_an_arm_resumes_with_less_memory_and_keeps_its_cold_start(tmp_path):
    # A kernel killed for memory continues with a smaller micro-batch: how a step is cut changes no measurement.
    work = FakeWork(fail_at=("f1", 0))
    with pytest.raises(RuntimeError, match="killed mid-arm"):
        Ablation(_cfg(tmp_path), ARMS, seeds=[0], work=work, run_dir=tmp_path / "run").run()
    [made] = (tmp_path / "run" / "shared" / "seed0").glob("cold_start-*")
    settings = json.loads((made / "settings.json").read_text())
    (made / "settings.json").write_text(json.dumps({**settings, "max_concurrent_rollouts": 8}))  # as once recorded
    record = arm_folder(tmp_path / "run", "em", 0) / "arm.json"  # and a finished arm's record, then
    info = json.loads(record.read_text())
    record.write_text(json.dumps({**info, "params": {**info["params"], "micro_batch_size": 0, "eval_batch_size": 16}}))
    smaller = _cfg(tmp_path, micro_batch_size=2, max_concurrent_rollouts=4, eval_batch_size=1,
                   activation_checkpointing=True)
    Ablation(smaller, ARMS, seeds=[0], work=work, run_dir=tmp_path / "run").run()
    assert [(a, s) for a, s, _ in work.runs] == [("em", 0), ("f1", 0), ("f1", 0)]
    assert len(work.cold_starts) == 1 and work.runs[-1][2].startswith(str(made))


def test_a_setting_added_since_an_arm_started_resumes_at_its_default(tmp_path):
    Ablation(_cfg(tmp_path), ARMS, seeds=[0], work=FakeWork(), run_dir=tmp_path / "run").run()
    record = arm_folder(tmp_path / "run", "f1", 0) / "arm.json"
    info = json.loads(record.read_text())
    del info["params"]["center_opener_advantage"]  # as an arm started before the setting existed records it
    record.write_text(json.dumps(info))
    Ablation(_cfg(tmp_path), ARMS, seeds=[0], work=FakeWork(), run_dir=tmp_path / "run")  # resumes
    changed = {**ARMS, "f1": {"rewards": ["f1"], "center_opener_advantage": True, "explore_openers": ["a", "b"]}}
    with pytest.raises(ConfigError, match=r"other settings \(center_opener_advantage: False -> True"):
        Ablation(_cfg(tmp_path), changed, seeds=[0], work=FakeWork(), run_dir=tmp_path / "run")


def _made_earlier(made, settings):
    """Turn the finished cold start `made` into one made by earlier code: it recorded `settings`, and its folder is
    named by a key that hashed the settings of the time."""
    (made / "settings.json").write_text(json.dumps(settings))
    old = made.with_name("cold_start-0ld0ld00")
    made.rename(old)
    done = json.loads((old / "done.json").read_text())
    (old / "done.json").write_text(json.dumps({**done, "model": str(old / "checkpoints" / "cold_start")}))


def test_a_cold_start_made_before_a_setting_existed_is_reused(tmp_path):
    work = FakeWork()
    Ablation(_cfg(tmp_path), ARMS, seeds=[0], work=work, run_dir=tmp_path / "run").run()
    [made] = (tmp_path / "run" / "shared" / "seed0").glob("cold_start-*")
    settings = json.loads((made / "settings.json").read_text())
    del settings["center_opener_advantage"]  # as a cold start made before the setting existed records it
    _made_earlier(made, settings)
    more = {**ARMS, "cem": {"rewards": ["cem"]}}
    Ablation(_cfg(tmp_path), more, seeds=[0], work=work, run_dir=tmp_path / "run").run()
    assert len(work.cold_starts) == 1 and work.runs[-1][2].endswith("cold_start-0ld0ld00/checkpoints/cold_start")
    other = {"sft": {"rewards": ["em"], "sft_examples": 8}}  # a cold-start setting that differs: made anew
    Ablation(_cfg(tmp_path), other, seeds=[0], work=work, run_dir=tmp_path / "run").run()
    assert len(work.cold_starts) == 2


def test_arms_that_differ_only_in_the_memorization_loss_share_a_cold_start(tmp_path):
    # As ablate_knowledge's full vs no_memorization (named after FakeWork's scores here). The loss is RL's alone, so
    # the cold start is one; a cold start made when the memorization settings still keyed it (its settings.json
    # records them) is reused on resume.
    arms = {"em": {"memorization_coef": 0.1}, "f1": {"memorization_coef": 0.0}}
    work = FakeWork()
    Ablation(_cfg(tmp_path), arms, seeds=[0], work=work, run_dir=tmp_path / "run").run()
    assert len(work.cold_starts) == 1
    [made] = (tmp_path / "run" / "shared" / "seed0").glob("cold_start-*")
    settings = json.loads((made / "settings.json").read_text())
    _made_earlier(made, {**settings, "memorization_coef": 0.1, "rewrite_batch_size": 8})
    more = {**arms, "cem": {"rewards": ["cem"]}}
    Ablation(_cfg(tmp_path), more, seeds=[0], work=work, run_dir=tmp_path / "run").run()
    assert len(work.cold_starts) == 1 and work.runs[-1][2].endswith("cold_start-0ld0ld00/checkpoints/cold_start")


class WeightsWork(FakeWork):
    """FakeWork whose cold start saves weights: the same bytes each time unless `drift` (another thread count, say)."""

    def __init__(self, drift=False, **kwargs):
        super().__init__(**kwargs)
        self.drift = drift

    def cold_start(self, cfg, folder):
        model = super().cold_start(cfg, folder)
        (model / "model.safetensors").write_bytes(bytes([cfg.seed, int(self.drift)]) * 64)
        return model


def test_a_cold_start_made_again_after_a_slim_copy_is_checked_against_the_first(tmp_path):
    from searchrl.runs.slim import slim_copy

    with pytest.raises(RuntimeError, match="killed mid-arm"):
        Ablation(_cfg(tmp_path), ARMS, seeds=[0], work=WeightsWork(fail_at=("f1", 0)), run_dir=tmp_path / "run").run()
    [made] = (tmp_path / "run" / "shared" / "seed0").glob("cold_start-*")
    first = json.loads((made / "weights.json").read_text())["sha256"]
    assert json.loads((arm_folder(tmp_path / "run", "em", 0) / "done.json").read_text())["cold_start_sha256"] == first
    # The machine is lost; its slim copy (no weights, no cold-start done marker) is resumed elsewhere.
    for name, drift in (("same", False), ("drifted", True)):
        copy = slim_copy(tmp_path / "run", tmp_path / name)
        work = WeightsWork(drift=drift)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            Ablation(_cfg(tmp_path), ARMS, seeds=[0], work=work, run_dir=copy).run()
        assert len(work.cold_starts) == 1 and [(a, s) for a, s, _ in work.runs] == [("f1", 0)]
        record = json.loads((copy / "shared" / "seed0" / made.name / "weights.json").read_text())
        f1_start = json.loads((arm_folder(copy, "f1", 0) / "done.json").read_text())["cold_start_sha256"]
        assert record["sha256"] == first and len(record["made"]) == 2
        assert record["same_as_first"] is (not drift) and (f1_start == first) is (not drift)
        assert any("was made again and its weights differ" in str(w.message) for w in caught) is drift


def test_an_evidence_copy_follows_every_finished_arm(tmp_path):
    kept = tmp_path / "kept"
    with pytest.raises(RuntimeError, match="killed mid-arm"):
        Ablation(_cfg(tmp_path, evidence_copy_dir=str(kept)), ARMS, seeds=[0, 1], work=WeightsWork(fail_at=("em", 1)),
                 run_dir=tmp_path / "run").run()
    copy = kept / tmp_path.name / "run"
    assert sorted(done.parent.parent.name + str(done.parent.name) for done in copy.glob("arms/*/*/done.json")) == [
        "emseed0", "f1seed0"]  # the copy after the last finished arm; the failed one is not in it as done
    assert not list(copy.rglob("*.safetensors")) and list(copy.rglob("weights.json"))


class LostFormatWork(FakeWork):
    """FakeWork whose 'em' arm then logs steps 3-10 in which the sampled format goes 0.25 -> 0 (as RLOO's seed 0 did
    in ablate_algorithm's cpu profile)."""

    def train_and_evaluate(self, cfg, folder, start):
        super().train_and_evaluate(cfg, folder, start)
        if folder.parent.name == "em":
            history = MetricsHistory(folder)
            for step in range(3, 11):
                history.append({"reward": -2.0, "search/format_ok_rate": 0.25 if step == 3 else 0.0}, step=step)


def test_the_plan_shows_the_training_alarms_of_each_finished_arm(tmp_path):
    ablation = Ablation(_cfg(tmp_path), ARMS, seeds=[0], work=LostFormatWork(), run_dir=tmp_path / "run")
    # the last-4 format means: step 6 0.0625 (some format), step 7 0.0 (none left)
    assert ablation.run()["health"].tolist() == ["format lost at step 7", ""]
    off = Ablation(_cfg(tmp_path, health_action="off"), ARMS, seeds=[0], work=LostFormatWork(), run_dir=tmp_path / "off")
    assert off.run()["health"].tolist() == ["", ""]


def test_reports_of_a_fake_ablation(tmp_path):
    claims = [Claim("F1 reward beats EM", better="f1", worse="em", metric="f1", paper="R1-Searcher Table 5")]
    ablation = Ablation(_cfg(tmp_path), ARMS, [0, 1], claims, work=FakeWork(), run_dir=tmp_path / "run")
    ablation.run()
    table = ablation.table()
    assert list(table.index) == ["em", "f1"]
    assert table.loc["f1", "F1"] == pytest.approx(2.5 / 4) and table.loc["em", "EM"] == pytest.approx(0.25)
    assert table.loc["f1", "response tokens"] == pytest.approx(25.0) and table.loc["f1", "seeds"] == 2
    verdicts = ablation.verdicts()
    assert verdicts.loc[0, "difference"] == pytest.approx((1 + 0 + 0.5 + 0) / 4)
    assert verdicts.loc[0, "pairs"] == 8 and verdicts.loc[0, "paper"] == "R1-Searcher Table 5"
    ablation.curves()
    for name in ("eval_table.csv", "eval_table.json", "verdicts.csv", "verdicts.json", "figures/curves.png"):
        assert (ablation.run_dir / name).is_file(), name


def _records(arm, scores_by_seed, metric="f1"):
    return [{"arm": arm, "seed": seed, "id": f"q{i}", metric: s}
            for seed, scores in scores_by_seed.items() for i, s in enumerate(scores)]


def test_verdicts_pair_by_question_and_seed_on_hand_worked_scores():
    better = _records("f1", {0: [1.0, 1.0, 0.5, 0.0], 1: [1.0, 0.0]})
    worse = _records("em", {0: [0.0, 1.0, 0.0, 0.0], 1: [0.0, 0.0, 1.0]})  # q2 of seed 1: em only, unpaired
    records = pd.DataFrame(better + worse).sample(frac=1.0, random_state=3)  # order must not matter
    claims = [Claim("F1 beats EM", "f1", "em"), Claim("EM beats F1", "em", "f1"), Claim("tie", "f1", "f1x")]
    table = verdict_table(records, claims[:2])
    # differences: seed 0: 1, 0, 0.5, 0; seed 1: 1, 0 -> per question over seeds: 1, 0, 0.5, 0 -> mean 1.5 / 4
    forward, backward = table.iloc[0], table.iloc[1]
    assert forward["difference"] == pytest.approx(1.5 / 4) and backward["difference"] == pytest.approx(-1.5 / 4)
    assert forward["questions"] == 4 and forward["pairs"] == 6
    assert forward["seeds"] == 2 and forward["questions/seed"] == 2
    # per question over seeds: better 1, 0.5, 0.5, 0; worse 0, 0.5, 0, 0
    assert forward["better mean"] == pytest.approx(2 / 4) and forward["worse mean"] == pytest.approx(0.5 / 4)
    assert "only 2 held-out questions per seed (< 100)" in forward["warning"]
    assert "1 question(s) evaluated by only one of the two arms left out" in forward["warning"]
    # a clear gap on 100 questions: reproduced one way round, opposite the other
    wide = pd.DataFrame(_records("a", {0: [1.0] * 70 + [0.0] * 30, 1: [1.0] * 70 + [0.0] * 30})
                        + _records("b", {0: [0.0] * 50 + [1.0] * 50, 1: [0.0] * 50 + [1.0] * 50}))
    ahead, behind = verdict_table(wide, [Claim("a beats b", "a", "b"), Claim("b beats a", "b", "a")]).to_dict("records")
    assert ahead["verdict"] == "reproduced" and ahead["95% low"] > 0
    assert ahead["per seed"] == "+0.200, +0.200" and "every seed" not in ahead["warning"]
    assert behind["verdict"] == "opposite" and behind["95% high"] < 0
    # differences +1 and -1 in equal numbers: the interval contains 0
    even = pd.DataFrame(_records("a", {0: [1.0, 0.0] * 60}) + _records("b", {0: [0.0, 1.0] * 60}))
    tie = verdict_table(even, [Claim("a beats b", "a", "b")]).iloc[0]
    assert tie["difference"] == pytest.approx(0.0) and tie["verdict"] == "inconclusive"
    assert tie["95% low"] < 0 < tie["95% high"]
    assert "held-out questions" not in tie["warning"] and "one seed" in tie["warning"]
    missing = verdict_table(records, [claims[2]]).iloc[0]
    assert missing["verdict"] == "not run" and missing["pairs"] == missing["questions"] == 0


def test_an_interval_ending_at_zero_up_to_float_rounding_is_inconclusive(monkeypatch):
    # ablate_knowledge's restarted cpu run: the group-reward claim's interval was [-0.073, -5.6e-19], differences
    # of +-1/3 a question cancelling in the resample at its upper end
    assert verdict(-0.073, -5.551115123125783e-19) == "inconclusive"
    assert verdict(5.551115123125783e-19, 0.073) == "inconclusive"
    assert verdict(0.001, 0.073) == "reproduced" and verdict(-0.073, -0.001) == "opposite"
    assert verdict(float("nan"), 0.1) == "not run"
    # the table writes such a bound as 0, so that it reads "0.000", not "-0.000"
    verdicts = importlib.import_module("searchrl.experiments.ablation.verdict")  # the package's `verdict` is the function
    monkeypatch.setattr(verdicts, "bootstrap_mean", lambda *a, **k: (-0.037, -0.073, -5.551115123125783e-19))
    records = pd.DataFrame(_records("a", {0: [0.0, 1.0]}) + _records("b", {0: [1.0, 1.0]}))
    row = verdict_table(records, [Claim("a beats b", "a", "b")]).iloc[0]
    assert row["95% high"] == 0.0 and row["95% low"] == -0.073 and row["verdict"] == "inconclusive"


def test_a_decided_verdict_names_the_seeds_that_point_the_other_way():
    # ablate_knowledge's first cpu run: no_group searched 0.2 a question more than full in seed 1 and exactly as
    # much (none) in seeds 0 and 2, and the interval over questions still cleared 0
    def arm(name, searches_by_seed):
        return [{"arm": name, "seed": seed, "id": f"q{i}", "searches": float(i < n)}
                for seed, n in searches_by_seed.items() for i in range(100)]

    records = pd.DataFrame(arm("no_group", {0: 0, 1: 21, 2: 0}) + arm("full", {0: 0, 1: 1, 2: 0}))
    row = verdict_table(records, [Claim("no_group searches more", "no_group", "full", "searches")]).iloc[0]
    assert row["verdict"] == "reproduced" and row["per seed"] == "+0.000, +0.200, +0.000"
    assert ("not every seed points this way (seeds 0, 2: +0.000, +0.000): the interval resamples questions, not "
            "training runs") in row["warning"]
    # one seed against an opposite verdict is named too; an inconclusive verdict has no direction to point
    flipped = verdict_table(records, [Claim("full searches more", "full", "no_group", "searches")]).iloc[0]
    assert flipped["verdict"] == "opposite" and "(seeds 0, 2: +0.000, +0.000)" in flipped["warning"]
    even = pd.DataFrame(arm("a", {0: 60, 1: 40}) + arm("b", {0: 40, 1: 60}))
    tie = verdict_table(even, [Claim("a beats b", "a", "b", "searches")]).iloc[0]
    assert tie["verdict"] == "inconclusive" and "every seed" not in tie["warning"]


def test_a_verdict_names_the_seeds_that_answered_without_searching():
    def arm(name, searches_by_seed):
        return [{"arm": name, "seed": seed, "id": f"q{i}", "f1": 0.5, "searches": n}
                for seed, n in searches_by_seed.items() for i in range(3)]

    records = pd.DataFrame(arm("two", {0: 1, 1: 0, 2: 0}) + arm("one", {0: 2, 1: 1, 2: 0}) + arm("x", {0: 0}))
    row = verdict_table(records, [Claim("two beats one", "two", "one")]).iloc[0]
    assert "answered without searching (< 0.1 searches per question): two seeds 1, 2; one seed 2" in row["warning"]
    searching = records[records["seed"] == 0]
    assert "without searching" not in verdict_table(searching, [Claim("two beats one", "two", "one")]).iloc[0]["warning"]


def test_a_verdict_names_the_seeds_that_lost_the_answer_format():
    # ppo seed 1 as in ablate_algorithm's cpu profile: no answer well formed, yet read and scored
    records = pd.DataFrame([{"arm": arm, "seed": seed, "id": f"q{i}", "f1": 0.3, "searches": 1,
                             "format_ok": float(not (arm == "ppo" and seed == 1) and (i > 0 or arm == "grpo"))}
                            for arm in ("grpo", "ppo") for seed in (0, 1) for i in range(3)])
    row = verdict_table(records, [Claim("GRPO beats PPO", "grpo", "ppo")]).iloc[0]
    assert "lost the answer format (< 0.5 of answers well formed): ppo seed 1" in row["warning"]
    assert "format" not in verdict_table(records.drop(columns="format_ok"), [Claim("x", "grpo", "ppo")]).iloc[0][
        "warning"]  # older records without the column: nothing to say


def test_a_verdict_names_the_seeds_that_searched_for_nothing():
    # ablate_evidence's cpu profile, seed 2: one search a question, most of them the query "and", which finds nothing
    def arm(name, empty_by_seed, searches=1):
        return [{"arm": name, "seed": seed, "id": f"q{i}", "f1": 0.3, "searches": searches,
                 "empty_results": int(i < empty)} for seed, empty in empty_by_seed.items() for i in range(4)]

    records = pd.DataFrame(arm("evidence", {0: 0, 1: 1, 2: 2}) + arm("no_evidence", {0: 0, 1: 0, 2: 4}))
    row = verdict_table(records, [Claim("evidence helps", "evidence", "no_evidence")]).iloc[0]
    # seed 1 of evidence: a quarter of its searches empty, which is not more than 0.25
    assert ("searched for nothing (> 0.25 of searches found no document): evidence seed 2; no_evidence seed 2"
            in row["warning"])
    # a seed that hardly searches is the no-search warning's, whatever its few searches found
    quiet = pd.DataFrame(arm("a", {0: 0}) + arm("b", {0: 4}, searches=0.05))
    assert "searched for nothing" not in verdict_table(quiet, [Claim("a beats b", "a", "b")]).iloc[0]["warning"]
    older = records.drop(columns="empty_results")  # records from before the column: nothing to say
    assert "searched for nothing" not in verdict_table(older, [Claim("x", "evidence", "no_evidence")]).iloc[0][
        "warning"]


def test_a_verdict_names_the_seeds_in_which_the_arms_wrote_the_same_responses():
    # ablate_knowledge's cpu profile, seed 0: RL stopped searching, so neither the memorization loss nor the group
    # reward ever acted, and the arms trained alike
    def arm(name, completions_by_seed):
        return [{"arm": name, "seed": seed, "id": f"q{i}", "f1": 0.1 * i, "prediction": text.split()[-1],
                 "queries": [], "completion": text} for seed, texts in completions_by_seed.items()
                for i, text in enumerate(texts)]

    same = ["<answer> Radrus", "<answer> Bromu"]
    records = pd.DataFrame(arm("full", {0: same, 1: same, 2: same})
                           + arm("no_memorization", {0: same, 1: ["<answer> Radrus", "I think <answer> Bromu"],
                                                     2: same[::-1]}))
    row = verdict_table(records, [Claim("memorization helps", "full", "no_memorization")]).iloc[0]
    # seed 1: the same answers in different words; seed 2: different answers to the same questions
    assert "the two arms wrote the same response to every question in seed 0:" in row["warning"]
    both = records.assign(completion="same")  # and the same queries and predictions in seed 0
    assert "in seeds 0, 1:" in verdict_table(both, [Claim("x", "full", "no_memorization")]).iloc[0]["warning"]
    older = records.drop(columns=["completion", "prediction", "queries"])  # nothing recorded to compare
    assert "same response" not in verdict_table(older, [Claim("x", "full", "no_memorization")]).iloc[0]["warning"]


def test_seeds_that_agree_do_not_narrow_the_interval():
    # Three seeds that score every question alike carry no more evidence about these questions than one seed:
    # the bootstrap resamples questions, so the interval is one seed's (pairs resampled as if independent would
    # shrink it by about sqrt(3)).
    gains = [1.0, 0.0, 0.0, 1.0, -1.0, 0.0, 1.0, 0.0, 0.5, 0.0] * 10
    one = _records("a", {0: gains}) + _records("b", {0: [0.0] * 100})
    three = _records("a", {s: gains for s in (0, 1, 2)}) + _records("b", {s: [0.0] * 100 for s in (0, 1, 2)})
    claim = [Claim("a beats b", "a", "b")]
    single, pooled = (verdict_table(pd.DataFrame(r), claim).iloc[0] for r in (one, three))
    assert pooled["questions"] == 100 and pooled["pairs"] == 300 and pooled["seeds"] == 3
    assert (pooled["95% low"], pooled["95% high"]) == pytest.approx((single["95% low"], single["95% high"]))
    table_one, table_three = arm_table(pd.DataFrame(one)).loc["a"], arm_table(pd.DataFrame(three)).loc["a"]
    assert (table_three["F1 95% low"], table_three["F1 95% high"]) == pytest.approx(
        (table_one["F1 95% low"], table_one["F1 95% high"]))


def test_arm_table_pools_seeds_with_the_spread_of_seed_means():
    records = pd.DataFrame(_records("a", {0: [1.0, 0.0], 1: [1.0, 1.0]}, "em")).assign(f1=1.0, searches=2)
    table = arm_table(records)
    row = table.loc["a"]
    assert row["EM"] == pytest.approx(0.75) and row["EM sd over seeds"] == pytest.approx(math.sqrt(0.125))
    assert row["EM 95% low"] <= 0.75 <= row["EM 95% high"] and row["F1 95% low"] == row["F1 95% high"] == 1.0
    assert row["searches/question"] == 2 and row["questions"] == 2 and row["seeds"] == 2


def test_band_curves_show_the_mean_over_seeds_with_a_band():
    histories = {
        "em": {0: pd.DataFrame({"step": [1, 2, 3], "reward": [1.0, 2.0, 3.0]}),
               1: pd.DataFrame({"step": [1, 2], "reward": [3.0, 4.0]})},  # seed 1 stopped after step 2
        "f1": {0: pd.DataFrame({"step": [1, 2], "reward": [0.5, np.nan]})},
    }
    frame = band_frame(histories, "reward")
    em = frame[frame["arm"] == "em"].set_index("step")
    assert em["mean"].tolist() == [2.0, 3.0, 3.0] and em["seeds"].tolist() == [2, 2, 1]
    assert em["sd"].iloc[0] == pytest.approx(math.sqrt(2)) and math.isnan(em["sd"].iloc[2])
    assert em["min"].tolist() == [1.0, 2.0, 3.0] and em["max"].tolist() == [3.0, 4.0, 3.0]
    assert frame[frame["arm"] == "f1"]["step"].tolist() == [1]  # the NaN step is not a point
    smoothed = band_frame({"em": {0: histories["em"][0]}}, "reward", smooth=0.5)
    assert smoothed["mean"].tolist() == [1.0, 1.5, 2.25]
    fig = band_curves(histories, metrics=("reward", "search/searches_per_sample"), band="sd")
    left, right = fig.axes
    assert left.lines[0].get_ydata().tolist() == [2.0, 3.0, 3.0] and left.lines[0].get_label() == "em (2 seeds)"
    band = left.collections[0].get_paths()[0].vertices[:, 1]
    assert band.min() == pytest.approx(2 - math.sqrt(2)) and band.max() == pytest.approx(3 + math.sqrt(2))
    assert right.get_title().endswith("(not logged)")
    with pytest.raises(ValueError, match="band must be one of minmax, sd"):
        band_curves(histories, band="range")


def test_an_arm_experiment_writes_into_its_folder_and_leaves_no_kernel_hooks(tmp_path, monkeypatch):
    from searchrl.experiments.ablation.work import experiment_in
    from searchrl.runs import kernel_watch
    from searchrl.runs.folder import RUN_DIR_ENV, current_run_dir

    class Events:
        def __init__(self):
            self.callbacks = {"post_run_cell": ["the notebook's own hook"]}

        def register(self, name, hook):
            self.callbacks[name].append(hook)

        def unregister(self, name, hook):
            self.callbacks[name].remove(hook)

    shell = type("Shell", (), {"events": Events()})()
    monkeypatch.setattr("IPython.get_ipython", lambda: shell)
    monkeypatch.setattr(kernel_watch, "_die_with_parent", lambda *args: None)  # no watchdog thread in a test

    class Recorder:  # an Experiment takes its folder as Experiment does
        def __init__(self, cfg, notebook):
            self.run_dir = current_run_dir(notebook, cfg)
            self.hooks = list(shell.events.callbacks["post_run_cell"])

    monkeypatch.setattr("searchrl.experiments.experiment.Experiment", Recorder)
    monkeypatch.setenv(RUN_DIR_ENV, str(tmp_path / "ablation"))
    exp = experiment_in(tmp_path / "ablation" / "arms" / "em" / "seed0", _cfg(tmp_path), "t")
    assert exp.run_dir == tmp_path / "ablation" / "arms" / "em" / "seed0" and exp.run_dir.is_dir()
    assert len(exp.hooks) == 2  # current_run_dir hooked the arm's folder to failing cells...
    assert shell.events.callbacks["post_run_cell"] == ["the notebook's own hook"]  # ...and that hook is gone again
    assert os.environ[RUN_DIR_ENV] == str(tmp_path / "ablation")


TINY = {"model": "tiny-random", "world_entities": 40, "n_train": 4, "n_eval": 2, "eval_batch_size": 2,
        "sft_examples": 2, "rl_steps": 1, "prompts_per_step": 1, "num_generations": 2, "max_searches": 1,
        "max_turn_tokens": 16, "max_completion_tokens": 32, "save_steps": 1, "world_passage_words": 20, "top_k": 1,
        "torch_threads": 1}


@pytest.mark.slow
def test_a_tiny_real_ablation_end_to_end(tmp_path):
    cfg = RunConfig.from_params({**TINY, "output_root": str(tmp_path), "arms": {"em": {"rewards": ["em"]},
                                 "f1": {"rewards": ["f1"]}}, "claims": {"F1 beats EM": {"better": "f1",
                                                                                        "worse": "em"}}})
    ablation = Ablation(cfg, run_dir=tmp_path / "run", notebook="t")
    ablation.run()
    for arm in ("em", "f1"):
        folder = arm_folder(ablation.run_dir, arm, 0)
        assert (folder / "eval" / "after_RL.json").is_file() and records_path(folder).is_file()
        assert (folder / "checkpoints" / "rl" / "config.json").is_file()  # the final policy stays
        assert not list((folder / "checkpoints").glob("*/checkpoint-*"))  # resume state of a finished arm goes
        assert MetricsHistory(folder).to_frame()["step"].tolist() == [1]
    shared = list((ablation.run_dir / "shared" / "seed0").glob("cold_start-*/checkpoints/cold_start/config.json"))
    assert len(shared) == 1
    assert set(ablation.table().index) == {"em", "f1"}
    verdicts = ablation.verdicts()
    assert verdicts.loc[0, "pairs"] == 2 and verdicts.loc[0, "verdict"] in ("reproduced", "opposite", "inconclusive")
    ablation.curves()


def fake_finished_ablation(output_root, notebook: str = "ablate_reward"):
    """A finished two-arm ablation run folder (fake work, two seeds, one claim) under output_root/notebook/."""
    claims = {"F1 reward beats EM": {"better": "f1", "worse": "em", "metric": "f1", "source": "R1-Searcher Table 5"}}
    ablation = Ablation(_cfg(output_root), ARMS, [0, 1], claims, work=FakeWork(),
                        run_dir=output_root / notebook / "20261123-000000-aaaa")
    ablation.run()
    ablation.table()
    ablation.verdicts()
    ablation.curves()
    ablation.finish()
    return ablation.run_dir


def test_the_report_collects_the_newest_finished_run_of_each_notebook(tmp_path):
    from searchrl.experiments.ablation import report

    run = fake_finished_ablation(tmp_path)
    unfinished = tmp_path / "ablate_reward" / "20261124-000000-bbbb"  # newer, but not finished: not reported
    unfinished.mkdir()
    (unfinished / "ablation.json").write_text("{}")
    assert report.latest_runs(tmp_path) == [run]
    claims = report.claims_table(report.resolve_runs([], tmp_path))
    # four questions that two identical seeds answer alike: too few for the direction to count
    assert list(claims["notebook"]) == ["ablate_reward"] and list(claims["verdict"]) == ["inconclusive"]
    assert claims.loc[0, "difference"] == pytest.approx(1.5 / 4)
    # worked out again from the records, not read from the saved verdicts.csv
    (run / "verdicts.csv").write_text("paper,claim,difference,verdict\nx,stale,9.0,reproduced\n")
    assert report.claims_table([run]).loc[0, "difference"] == pytest.approx(1.5 / 4)
    text = report.write_report([run], tmp_path / "out").read_text()
    assert (tmp_path / "out" / "figures" / "claims.png").is_file() and "![claims](figures/claims.png)" in text
    figure = report.claims_figure(claims)
    assert [t.get_text() for t in figure.axes[0].get_yticklabels()] == [
        "ablate_reward: F1 reward beats EM (f1) *"]  # starred: its warning says four questions are too few
    # each seed's own difference is drawn below the interval (the two seeds here are alike: 1.5 / 4 each)
    ticks = [line for line in figure.axes[0].get_lines() if line.get_gid() == "seeds"]
    assert [list(line.get_xdata()) for line in ticks] == [[pytest.approx(0.375, abs=1e-3)] * 2]
    assert report.claims_figure(claims.assign(difference=float("nan"))) is None
    assert "| ablate_reward | R1-Searcher Table 5 | F1 reward beats EM | f1 |" in text and "## ablate_reward" in text
    with pytest.raises(FileNotFoundError, match="no finished ablation run"):
        report.resolve_runs([], tmp_path / "empty")
    with pytest.raises(FileNotFoundError, match="not ablation run folders"):
        report.resolve_runs([str(tmp_path)], tmp_path)


def test_split_table_gives_searches_and_accuracy_per_knowledge_split():
    from searchrl.experiments.ablation.tables import split_table

    records = pd.DataFrame({
        "arm": ["full"] * 4 + ["plain"] * 4, "seed": [0] * 8, "id": ["a", "b", "c", "d"] * 2,
        "knowledge": ["internal", "internal", "external", "external"] * 2,
        "em": [1.0, 0.0, 1.0, 1.0, 1.0, 1.0, 0.0, 1.0], "f1": [1.0, 0.5, 1.0, 1.0, 1.0, 1.0, 0.0, 1.0],
        "searches": [0, 1, 1, 2, 1, 1, 1, 1],
    })
    table = split_table(records, "knowledge", arms=["full", "plain"]).set_index(["arm", "knowledge"])
    assert table.loc[("full", "internal"), "searches/question"] == pytest.approx(0.5)
    assert table.loc[("full", "internal"), "no search"] == pytest.approx(0.5)
    assert table.loc[("full", "internal"), "F1"] == pytest.approx(0.75)
    assert table.loc[("plain", "internal"), "no search"] == 0.0
    assert table.loc[("plain", "external"), "EM"] == pytest.approx(0.5) and table.loc[("full", "external"), "questions"] == 2
    assert split_table(records.drop(columns="knowledge"), "knowledge").empty
