"""Every parameter file under params/ loads, validates against RunConfig, belongs to an existing notebook, and
starts with a comment giving the command that runs it."""

from __future__ import annotations

import warnings
from pathlib import Path

import papermill
import pytest

from searchrl.config import RunConfig, load_params_file
from searchrl.experiments.runner_plan import parameters_cell_values, plan_run

ROOT = Path(__file__).resolve().parents[1]
PARAM_FILES = sorted((ROOT / "params").glob("*/*.yaml"))
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))


def test_there_are_params_and_notebooks():
    assert PARAM_FILES and NOTEBOOKS


@pytest.mark.parametrize("path", PARAM_FILES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_params_file_validates_and_names_its_command(path):
    first = path.read_text().splitlines()[0]
    assert first.startswith("#") and "searchrl.runner" in first and f"notebooks/{path.parent.name}.ipynb" in first
    assert f"-f params/{path.parent.name}/{path.name}" in first
    # Overlays name the profile they sit on first; validate them as the command line combines them.
    words = first.split()
    files = [ROOT / words[i + 1] for i, word in enumerate(words[:-1]) if word == "-f"]
    _, notebook = load_params_file(path)
    assert notebook in (None, path.parent.name)
    RunConfig.from_params(None, *files)
    plan = plan_run(ROOT / "notebooks" / f"{path.parent.name}.ipynb", files)
    assert plan.name == path.parent.name


# Notebooks whose comparison needs models no CPU can run or no package bundles (a base/instruct pair of one family).
NO_CPU_PROFILE = ("base_vs_instruct",)


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_is_thin_and_has_all_three_profiles(notebook):
    import nbformat

    nb = nbformat.read(notebook, as_version=4)
    values = parameters_cell_values(notebook)
    # papermill reads the cell too (plain `papermill -p` and its parameter help): a line it cannot parse (an "="
    # inside a comment) drops that parameter from what it knows, with only a log line to say so.
    assert set(papermill.inspect_notebook(str(notebook))) == set(values), "papermill cannot parse every parameter"
    for cell in nb.cells:
        if cell.cell_type == "code":
            assert not cell.get("outputs") and cell.get("execution_count") is None, "commit notebooks without outputs"
            assert "def " not in cell.source and "class " not in cell.source, "notebooks call into searchrl"
    for profile in ("smoke", "cpu", "gpu"):
        if profile == "cpu" and notebook.stem in NO_CPU_PROFILE:
            # Such a notebook must say why in its introduction and stop with a clear message (require_models).
            assert "no cpu profile" in nb.cells[0].source.lower() and "require_models(cfg)" in nb.cells[2].source
            continue
        assert (ROOT / "params" / notebook.stem / f"{profile}.yaml").exists()


def test_a_preset_and_a_users_reward_are_chosen_by_name_from_params():
    from searchrl.protocols import get_protocol
    from searchrl.rewards import make_rewards

    cfg = RunConfig.from_params(None, ROOT / "params/quickstart/cpu.yaml", ROOT / "params/quickstart/preset_r1_searcher.yaml")
    funcs, weights = make_rewards(cfg.rewards, get_protocol(cfg.protocol), cfg.reward_weights)
    assert [f.__name__ for f in funcs] == ["f1", "format_r1s_stage2"] and weights == [1.0, 1.0]
    cfg = RunConfig.from_params(None, ROOT / "params/quickstart/cpu.yaml", ROOT / "params/quickstart/custom_reward.yaml")
    funcs, weights = make_rewards(cfg.rewards, get_protocol(cfg.protocol), cfg.reward_weights)
    assert [f.__name__ for f in funcs] == ["f1", "concise_answer"] and weights == [1.0, 0.2]
    answer = "<think>x</think>\n<answer> {} </answer>"
    assert funcs[1](prompts=["p", "p"], completions=[answer.format("Paris"), answer.format("a b c d e f g")]) == [1.0, 0.5]


# The RL notebooks' cpu profiles train on two-hop questions. A budget that cannot hold a correct two-search answer
# leaves RL nothing to reward for the second search, and every arm would compare the same one-search policy. The
# quickstart's cpu profile is left out on purpose: it is the demo whose numbers the README and the LOG's lever table
# are measured against, and it trains on every type of the world (four-hop ones included) as it always has.
ABLATION_CPU_PROFILES = [p for p in PARAM_FILES if p.name == "cpu.yaml" and "arms" in
                         parameters_cell_values(ROOT / "notebooks" / f"{p.parent.name}.ipynb")]


@pytest.mark.slow
@pytest.mark.parametrize("path", ABLATION_CPU_PROFILES, ids=lambda p: p.parent.name)
def test_every_arm_of_a_cpu_profile_has_room_for_a_correct_answer_to_each_trained_type(path, tmp_path):
    from searchrl.experiments.ablation.arms import arm_config, parse_arms
    from searchrl.experiments.experiment import Experiment

    cfg = plan_run(ROOT / "notebooks" / f"{path.parent.name}.ipynb", [path]).config
    problems = []
    for arm in parse_arms(cfg, cfg.arms):
        arm_cfg = arm_config(cfg, arm, seed=0)
        if arm_cfg.rl_steps <= 0:
            continue
        with warnings.catch_warnings():  # the same sentences are collected and asserted below
            warnings.simplefilter("ignore")
            exp = Experiment(arm_cfg, notebook=path.parent.name, run_dir=tmp_path / arm.name)
            report = exp.check_answer_budget()
        # Only the token budget is checked: questions no search budget can answer are an arm's own choice (budget1).
        problems += [f"arm {arm.name}: {qtype}: {row['over_budget']:.0%} of correct answers are longer than "
                     f"max_completion_tokens={arm_cfg.max_completion_tokens} (longest {row['max_tokens']})"
                     for qtype, row in report.items() if row["written"] and row["over_budget"] > 0]
    assert not problems, "\n".join(problems)


ABLATION_PROFILES = [p for p in PARAM_FILES if p.name in ("cpu.yaml", "gpu.yaml") and "arms" in
                     parameters_cell_values(ROOT / "notebooks" / f"{p.parent.name}.ipynb")]


@pytest.mark.parametrize("path", ABLATION_PROFILES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_every_ablation_profile_can_add_the_cold_start_arm(path):
    from searchrl.experiments.ablation.arms import (
        COLD_START_ARM,
        Arm,
        arm_config,
        cold_start_key,
        parse_arms,
        with_cold_start_arm,
    )
    from searchrl.trainer.schedules import rl_schedule

    cfg = plan_run(ROOT / "notebooks" / f"{path.parent.name}.ipynb", [path]).config
    cfg = RunConfig.merge(("profile", cfg.to_dict()), ("command line", {"cold_start_arm": True}))
    own = parse_arms(cfg, cfg.arms)
    arms = parse_arms(cfg, with_cold_start_arm(own, cfg.to_dict()))
    added = {a.name: arm_config(cfg, a, seed=0) for a in arms[len(own):]}
    assert COLD_START_ARM in added and not any(rl_schedule(c) for c in added.values())
    # `cold_start` evaluates the cold start of an arm that changes nothing a cold start depends on
    assert cold_start_key(added[COLD_START_ARM]) == cold_start_key(arm_config(cfg, Arm("unchanged"), seed=0))
    # and every other cold start an arm starts from is evaluated too, once
    starts = {cold_start_key(arm_config(cfg, a, seed=0)) for a in own if not a.overrides.get("cold_start_from")}
    assert sorted(cold_start_key(c) for c in added.values()) == sorted(starts | {cold_start_key(added[COLD_START_ARM])})
