"""Run folders (searchrl.runs.folder) and the notebook runner (searchrl.experiments.runner).

Runner tests that execute a notebook start a Jupyter kernel (a few seconds each) and are marked slow; the checks
that must reject bad input before anything runs are fast.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import re
import shutil
import subprocess
import sys
import types
from pathlib import Path

import nbformat
import numpy as np
import pandas as pd
import pytest
import yaml

from searchrl.config import ConfigError, RunConfig
from searchrl.core.files import save_figure, write_json, write_trajectories
from searchrl.experiments.runner import main, summarize
from searchrl.experiments.runner_exec import RunError, run_notebook
from searchrl.experiments.runner_plan import NotebookError, parameters_cell_values, plan_run
from searchrl.runs import folder as rundir
from searchrl.runs import history as run_history
from searchrl.runs import provenance
from searchrl.runs.folder import RUN_DIR_ENV, create_run_dir, current_run_dir
from searchrl.runs.history import MetricsHistory
from searchrl.runs.listing import list_runs, load_run
from searchrl.runs.provenance import git_state, write_provenance
from searchrl.runs.status import mark_status, read_status

# --------------------------------------------------------------------------------------------------------------
# run folders
# --------------------------------------------------------------------------------------------------------------


def test_run_ids_never_collide(tmp_path: Path) -> None:
    made = [create_run_dir("notebooks/demo.ipynb", "same name", tmp_path) for _ in range(30)]
    assert len(set(made)) == 30
    assert all(p.parent == tmp_path / "demo" and p.is_dir() and not any(p.iterdir()) for p in made)
    assert all(re.fullmatch(r"\d{8}-\d{6}-[0-9a-f]{4}-same-name", p.name) for p in made)


def test_collision_draws_a_new_suffix(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fixed = _dt.datetime(2025, 1, 2, 3, 4, 5)
    fake_dt = types.SimpleNamespace(datetime=types.SimpleNamespace(now=lambda *a: fixed), timezone=_dt.timezone)
    monkeypatch.setattr(rundir, "_dt", fake_dt)
    suffixes = iter(["aaaa", "aaaa", "bbbb"])
    monkeypatch.setattr(rundir.secrets, "token_hex", lambda n: next(suffixes))
    first = create_run_dir("nb", root=tmp_path)
    second = create_run_dir("nb", root=tmp_path)
    assert first.name == "20250102-030405-aaaa" and second.name == "20250102-030405-bbbb"


def test_current_run_dir_uses_runner_folder_or_makes_one(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    given = tmp_path / "given"
    monkeypatch.setenv(RUN_DIR_ENV, str(given))
    assert current_run_dir("nb") == given and given.is_dir()
    monkeypatch.delenv(RUN_DIR_ENV)
    cfg = RunConfig(output_root=str(tmp_path / "out"), run_name="by-hand", seed=3)
    made = current_run_dir("nb", cfg)
    assert made.parent == tmp_path / "out" / "nb" and made.name.endswith("-by-hand")
    assert RunConfig.from_params(None, made / "params.yaml") == cfg
    assert read_status(made)["status"] == "running"
    assert current_run_dir("nb", cfg) != made  # each hand-run gets its own folder


def test_provenance_contents(tmp_path: Path) -> None:
    cfg = RunConfig(seed=5, rewards=["em", "f1"])
    path = write_provenance(tmp_path, cfg, notebook="demo", command=["python", "-m", "searchrl.runner", "x"])
    info = json.loads(path.read_text())
    assert info["notebook"] == "demo" and info["command"][-1] == "x"
    assert info["versions"]["python"] and info["versions"]["torch"] and "trl" in info["versions"]
    assert info["hostname"] and _dt.datetime.fromisoformat(info["started"])
    assert info["changed_params"] == {"seed": 5, "rewards": ["em", "f1"]}
    assert set(info["git"]) == {"commit", "branch", "dirty", "changed_files"}
    assert RunConfig.from_params(None, tmp_path / "params.yaml") == cfg


def test_a_resume_that_changes_what_the_run_measures_says_so_and_records_it(tmp_path: Path, capsys) -> None:
    write_provenance(tmp_path, RunConfig(seed=5, micro_batch_size=4), notebook="demo", command=["first"])
    provenance.record_resume(tmp_path, RunConfig(seed=5, micro_batch_size=2, torch_threads=1), ["less memory"])
    assert capsys.readouterr().err == ""  # how a run computes is not what it measures
    provenance.record_resume(tmp_path, RunConfig(seed=5, learning_rate=3e-5, micro_batch_size=2), ["other lr"])
    assert "this resume changes what the run measures (learning_rate 1e-05 -> 3e-05)" in capsys.readouterr().err
    first, second = json.loads((tmp_path / "provenance.json").read_text())["resumed"]
    assert "changed" not in first and second["changed"] == {"learning_rate": [1e-05, 3e-05]}
    assert RunConfig.from_params(None, tmp_path / "params.yaml").learning_rate == 3e-5


@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
def test_git_commit_and_dirty_flag(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-c", "commit.gpgsign=false"]
    subprocess.run([*git, "init", "-q"], cwd=repo, check=True)
    (repo / "a.txt").write_text("1")
    subprocess.run([*git, "add", "a.txt"], cwd=repo, check=True)
    subprocess.run([*git, "commit", "-q", "-m", "c"], cwd=repo, check=True)
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=repo, capture_output=True, text=True, check=True).stdout
    head = head.strip()
    clean = git_state(repo)
    assert clean["commit"] == head and clean["dirty"] is False
    (repo / "a.txt").write_text("2")
    dirty = git_state(repo)
    assert dirty["dirty"] is True and dirty["changed_files"] == ["a.txt"]


def test_git_absent_or_not_a_repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert git_state(tmp_path)["commit"] is None  # not a repository

    def no_git(*args: object, **kwargs: object) -> None:
        raise FileNotFoundError("git")

    monkeypatch.setattr(provenance.subprocess, "run", no_git)
    assert git_state()["commit"] is None
    info = json.loads(write_provenance(tmp_path / "run", RunConfig()).read_text())
    assert info["git"]["commit"] is None


def test_status_records_error_and_traceback(tmp_path: Path) -> None:
    mark_status(tmp_path, "running")
    started = read_status(tmp_path)["started"]

    def failing_step() -> None:
        raise RuntimeError("out of memory")

    try:
        failing_step()
    except RuntimeError as err:
        mark_status(tmp_path, "failed", err, cell_index=3)
    status = read_status(tmp_path)
    assert status["status"] == "failed" and status["error"] == "RuntimeError: out of memory"
    assert "failing_step" in status["traceback"] and status["cell_index"] == 3
    assert status["started"] == started
    with pytest.raises(ValueError, match="status must be one of"):
        mark_status(tmp_path, "done")


def test_writers(tmp_path: Path) -> None:
    path = write_json(tmp_path / "eval" / "after.json", {"em": np.float32(0.5), "n": np.int64(3), "p": tmp_path})
    assert json.loads(path.read_text()) == {"em": 0.5, "n": 3, "p": str(tmp_path)}
    with pytest.raises(TypeError, match="cannot write object to JSON"):
        write_json(tmp_path / "bad.json", {"x": object()})
    traj = write_trajectories(tmp_path / "trajectories" / "eval", [{"q": "é"}, {"q": "b"}])
    assert traj.suffix == ".jsonl" and [json.loads(x)["q"] for x in traj.read_text().splitlines()] == ["é", "b"]

    from matplotlib.figure import Figure

    fig = Figure()
    fig.subplots().plot([0, 1], [1, 0])
    png = save_figure(fig, tmp_path / "figures" / "curve")
    assert png.name == "curve.png" and png.read_bytes()[:4] == b"\x89PNG"


# --------------------------------------------------------------------------------------------------------------
# metrics history
# --------------------------------------------------------------------------------------------------------------


def test_history_appends_and_reloads(tmp_path: Path) -> None:
    history = MetricsHistory(tmp_path)
    history.append({"reward": np.float64(0.5), "loss": 1.0})
    history.append({"reward": 0.7, "note": "x"})  # a new column appears; step defaults to previous + 1
    history.append({"reward": 0.9}, step=10)
    frame = pd.read_parquet(tmp_path / "metrics.parquet")
    assert frame["step"].tolist() == [0, 1, 10] and frame.columns[0] == "step"
    assert frame["reward"].tolist() == [0.5, 0.7, 0.9] and frame["loss"].isna().tolist() == [False, True, True]
    resumed = MetricsHistory(tmp_path)
    assert len(resumed) == 3
    resumed.truncate_after(1)  # resume from the checkpoint at step 1
    resumed.append({"reward": 1.0})
    assert pd.read_parquet(tmp_path / "metrics.parquet")["step"].tolist() == [0, 1, 2]


def test_history_survives_a_crash(tmp_path: Path) -> None:
    # A child process logs three steps and dies without any cleanup (os._exit skips finalizers and atexit).
    code = (
        "import os, sys\nfrom searchrl.runs.history import MetricsHistory\nh = MetricsHistory(sys.argv[1])\n"
        "for i in range(3):\n    h.append({'reward': i / 10})\nos._exit(1)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 1, done.stderr
    assert pd.read_parquet(tmp_path / "metrics.parquet")["reward"].tolist() == [0.0, 0.1, 0.2]
    assert not list(tmp_path.glob(".*.tmp"))  # no half-written temporary file left


def test_history_csv_fallback_without_pyarrow(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(run_history, "_have_pyarrow", lambda: False)
    history = MetricsHistory(tmp_path)
    history.append({"reward": 0.25})
    history.append({"reward": 0.5})
    assert (tmp_path / "metrics.csv").is_file() and not (tmp_path / "metrics.parquet").exists()
    assert len(MetricsHistory(tmp_path)) == 2
    monkeypatch.undo()
    assert len(MetricsHistory(tmp_path)) == 2  # pyarrow back: the CSV history is picked up and continued


def test_history_callback_appends_trainer_logs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A stand-in for transformers (importing it takes seconds); the callback only relies on on_log's signature.
    monkeypatch.setitem(sys.modules, "transformers", types.SimpleNamespace(TrainerCallback=object))
    history = MetricsHistory(tmp_path)
    callback = run_history.history_callback(history)
    state = types.SimpleNamespace(global_step=4, is_world_process_zero=True)
    callback.on_log(None, state, None, logs={"reward": 0.3, "loss": 0.1})
    callback.on_log(None, types.SimpleNamespace(global_step=5, is_world_process_zero=False), None, logs={"x": 1})
    assert history.to_frame().to_dict("records") == [{"step": 4, "reward": 0.3, "loss": 0.1}]
    second_stage = run_history.history_callback(history, offset=6, stage="rl_stage2")
    second_stage.on_log(None, types.SimpleNamespace(global_step=1, is_world_process_zero=True), None, logs={"x": 2})
    assert history.rows[-1] == {"step": 7, "x": 2, "stage": "rl_stage2"}


def test_a_history_whose_steps_restart_at_each_stage_is_read_as_one_step_count(tmp_path: Path) -> None:
    # Written before stages were numbered on: a probe at step 0, stage 1's steps 1-2, then stage 2's probe and steps.
    legacy = [{"step": 0, "probe/f1": 0.4}, {"step": 1, "reward": 0.1}, {"step": 2, "reward": 0.2},
              {"step": 0, "probe/f1": 0.5}, {"step": 1, "reward": 0.3}, {"step": 2, "reward": 0.4}]
    pd.DataFrame(legacy).to_csv(tmp_path / "metrics.csv", index=False)
    history = MetricsHistory(tmp_path)
    assert [row["step"] for row in history.rows] == [0, 1, 2, 2, 3, 4]
    assert history.rows[3] == {"step": 2, "probe/f1": 0.5}  # stage 2's start is stage 1's end


# --------------------------------------------------------------------------------------------------------------
# readers for reports
# --------------------------------------------------------------------------------------------------------------


def test_list_runs_and_load_run(tmp_path: Path) -> None:
    first = create_run_dir("quickstart", "a", tmp_path)
    write_provenance(first, RunConfig(rl_steps=3, run_name="a"))
    mark_status(first, "completed")
    MetricsHistory(first).append({"reward": 0.5}, step=1)
    write_json(first / "eval" / "after_rl.json", {"em": 0.4})
    second = create_run_dir("other", "", tmp_path)
    write_provenance(second, RunConfig(seed=9))
    mark_status(second, "failed", "boom")
    (tmp_path / "quickstart" / "not-a-run").mkdir()

    table = list_runs(tmp_path)
    assert table["run_id"].tolist() == [first.name, second.name]
    assert table["status"].tolist() == ["completed", "failed"]
    assert table.loc[0, "rl_steps"] == 3 and "rl_steps=3" in table.loc[0, "changed"]
    assert table.loc[1, "changed"] == "seed=9"
    assert list_runs(tmp_path, notebook="other")["run_id"].tolist() == [second.name]

    run = load_run(first)
    assert run["config"].rl_steps == 3 and run["status"]["status"] == "completed"
    assert run["history"]["reward"].tolist() == [0.5] and run["eval"] == {"after_rl": {"em": 0.4}}
    assert load_run(second)["history"].empty
    with pytest.raises(FileNotFoundError, match="not a run folder"):
        load_run(tmp_path / "quickstart" / "not-a-run")
    with pytest.raises(FileNotFoundError, match="run a notebook first"):
        list_runs(tmp_path / "missing")


# --------------------------------------------------------------------------------------------------------------
# the runner: checks before anything runs (fast)
# --------------------------------------------------------------------------------------------------------------

WRITER_CELL = """\
import os
from searchrl.config import RunConfig
from searchrl.core.files import write_json
from searchrl.runs.folder import current_run_dir
from searchrl.runs.history import MetricsHistory
cfg = RunConfig.from_globals(globals())
run_dir = current_run_dir("demo", cfg)
write_json(run_dir / "eval" / "seen.json", {"env": os.environ.get("SEARCHRL_RUN_DIR"), "cfg": cfg.to_dict()})
MetricsHistory(run_dir).append({"reward": float(cfg.rl_steps)})
print("wrote", run_dir)
"""


def make_notebook(path: Path, parameters: str, *cells: str) -> Path:
    nb = nbformat.v4.new_notebook()
    params = nbformat.v4.new_code_cell(parameters)
    params.metadata["tags"] = ["parameters"]
    nb.cells = [nbformat.v4.new_code_cell("import math"), params, *(nbformat.v4.new_code_cell(c) for c in cells)]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, str(path))
    return path


@pytest.fixture
def demo(tmp_path: Path) -> Path:
    return make_notebook(tmp_path / "notebooks" / "demo.ipynb", "seed = 1  # seed\nrl_steps = 2\n", WRITER_CELL)


def write_params(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def test_unknown_p_key_is_rejected_before_execution(
    demo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    code = main([str(demo), "-p", "lerning_rate", "0.1", "--output-root", str(out)])
    assert code == 2
    err = capsys.readouterr().err
    assert "-p: unknown parameter 'lerning_rate'" in err and "did you mean 'learning_rate'" in err
    assert not out.exists()  # nothing was created


def test_an_unusable_output_root_is_one_clear_line(demo: Path, tmp_path: Path, capsys) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    code = main([str(demo), "--output-root", str(blocker / "outputs")])
    assert code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: output_root: cannot create a run folder in")
    assert "Traceback" not in "\n".join(err)


def test_cli_exit_code_in_a_fresh_process(demo: Path, tmp_path: Path) -> None:
    cmd = [sys.executable, "-m", "searchrl.runner", str(demo), "-p", "rl_steps", "many", "--output-root", str(tmp_path)]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 2 and "'rl_steps' expects int, got 'many'" in done.stderr


def test_params_for_another_notebook_are_rejected(demo: Path, tmp_path: Path) -> None:
    by_folder = write_params(tmp_path / "params" / "other" / "cpu.yaml", "seed: 2\n")
    with pytest.raises(ConfigError, match="params file for another notebook .'other'., not 'demo'"):
        plan_run(demo, [by_folder])
    by_key = write_params(tmp_path / "loose.yaml", "notebook: other\nseed: 2\n")
    with pytest.raises(ConfigError, match="params file for another notebook"):
        plan_run(demo, [by_key])
    own = write_params(tmp_path / "params" / "demo" / "cpu.yaml", "notebook: demo\nseed: 2\n")
    assert plan_run(demo, [own]).config.seed == 2


def test_notebook_problems_are_reported(tmp_path: Path) -> None:
    with pytest.raises(NotebookError, match="notebook not found"):
        plan_run(tmp_path / "nope.ipynb")
    no_tag = tmp_path / "no_tag.ipynb"
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("seed = 1")]
    nbformat.write(nb, str(no_tag))
    with pytest.raises(NotebookError, match="no cell tagged 'parameters'"):
        plan_run(no_tag)
    with pytest.raises(NotebookError, match="line 2 is not 'name = value'"):
        parameters_cell_values(make_notebook(tmp_path / "code.ipynb", "seed = 1\nprint(seed)\n"))
    with pytest.raises(NotebookError, match="must be a literal"):
        parameters_cell_values(make_notebook(tmp_path / "expr.ipynb", "seed = 1 + len('ab')\n"))
    with pytest.raises(ConfigError, match="parameters cell of .*unknown parameter 'sed'"):
        parameters_cell_values(make_notebook(tmp_path / "typo.ipynb", "sed = 1\n"))


def test_plan_precedence_and_minimal_injection(demo: Path, tmp_path: Path) -> None:
    low = write_params(tmp_path / "params" / "demo" / "a.yaml", "# python -m searchrl.runner\nseed: 5\ntop_k: 4\n")
    high = write_params(tmp_path / "params" / "demo" / "b.yaml", "top_k: 6\n")
    plan = plan_run(demo, [low, high], {"top_k": 7, "run_name": "x"}, output_root=tmp_path / "o")
    cfg = plan.config
    assert (cfg.seed, cfg.top_k, cfg.rl_steps, cfg.run_name) == (5, 7, 2, "x")  # rl_steps from the cell
    # only what differs from the notebook's own values is injected
    assert plan.injected == {"seed": 5, "top_k": 7, "run_name": "x", "output_root": str(tmp_path / "o")}
    assert plan.output_root == tmp_path / "o"
    assert "top_k: 7" in plan.describe()


def test_p_values_are_yaml_but_text_fields_keep_text(demo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv = [str(demo), "--dry-run", "-p", "rewards", "[em, f1]", "-p", "learning_rate", "1e-4", "-p", "run_name", "7"]
    assert main(argv) == 0
    shown = yaml.safe_load(capsys.readouterr().out.split("resolved parameters:\n", 1)[1])
    assert shown["rewards"] == ["em", "f1"] and shown["learning_rate"] == 1e-4 and shown["run_name"] == "7"


# --------------------------------------------------------------------------------------------------------------
# the runner: executing notebooks (a kernel each, slow)
# --------------------------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_run_then_resume_into_the_same_folder(demo: Path, tmp_path: Path) -> None:
    params = write_params(tmp_path / "params" / "demo" / "cpu.yaml", "# python -m searchrl.runner\nseed: 4\n")
    run_dir = run_notebook(
        demo, [params], {"rl_steps": 3}, output_root=tmp_path / "out", progress_bar=False, log_output=False
    )
    assert run_dir.parent == tmp_path / "out" / "demo"
    seen = json.loads((run_dir / "eval" / "seen.json").read_text())
    assert seen["env"] == str(run_dir)  # the notebook wrote into the runner's folder
    saved = RunConfig.from_params(None, run_dir / "params.yaml")
    assert seen["cfg"] == saved.to_dict()  # the notebook ran with exactly the recorded parameters
    assert (saved.seed, saved.rl_steps) == (4, 3)
    assert read_status(run_dir)["status"] == "completed"
    executed = nbformat.read(str(run_dir / "demo.ipynb"), as_version=4)
    injected = [c for c in executed.cells if "injected-parameters" in c.metadata.get("tags", [])]
    assert len(injected) == 1 and "rl_steps = 3" in injected[0].source
    prov = json.loads((run_dir / "provenance.json").read_text())
    assert prov["params_files"] == [str(params)] and prov["notebook_path"] == str(demo)

    again = run_notebook(None, overrides={"rl_steps": 5}, resume_dir=run_dir, progress_bar=False, log_output=False)
    assert again == run_dir and len(list((tmp_path / "out" / "demo").iterdir())) == 1
    seen = json.loads((run_dir / "eval" / "seen.json").read_text())
    assert seen["cfg"]["resume"] is True and seen["cfg"]["rl_steps"] == 5 and seen["cfg"]["seed"] == 4
    assert (run_dir / "demo.attempt-1.ipynb").is_file() and (run_dir / "demo.ipynb").is_file()
    assert pd.read_parquet(run_dir / "metrics.parquet")["reward"].tolist() == [3.0, 5.0]  # history kept
    assert len(json.loads((run_dir / "provenance.json").read_text())["resumed"]) == 1
    notebook_lines = [line for line in summarize(run_dir).splitlines() if ".ipynb" in line]
    assert notebook_lines == [f"  notebook   {run_dir / 'demo.ipynb'} (earlier attempts: 1 *.attempt-N.ipynb beside it)"]


@pytest.mark.slow
def test_failing_cell_saves_notebook_and_exits_nonzero(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    nb = make_notebook(tmp_path / "broken.ipynb", "seed = 1\n", "x = 41", "raise ValueError(f'bad value {x + 1}')")
    code = main([str(nb), "--output-root", str(tmp_path / "out"), "--quiet", "-p", "evidence_copy_dir",
                 str(tmp_path / "kept")])
    assert code == 1
    err = capsys.readouterr().err
    assert "ValueError: bad value 42" in err and "raise ValueError" in err and "broken.ipynb" in err
    (run_dir,) = (tmp_path / "out" / "broken").iterdir()
    status = read_status(run_dir)
    assert status["status"] == "failed" and status["error"] == "ValueError: bad value 42"
    assert "ValueError" in status["traceback"] and "raise ValueError" in status["cell_source"]
    executed = nbformat.read(str(run_dir / "broken.ipynb"), as_version=4)
    assert any(o.get("ename") == "ValueError" for c in executed.cells for o in c.get("outputs", []))
    # evidence_copy_dir: the failed run's slim copy, made after its status was written
    assert read_status(tmp_path / "kept" / "broken" / run_dir.name)["status"] == "failed"
    assert not (tmp_path / "kept" / "broken" / run_dir.name / "broken.ipynb").exists()


@pytest.mark.slow
def test_sigterm_marks_the_run_interrupted(tmp_path: Path) -> None:
    # The kernel's parent is this process: the cell sends it SIGTERM, as a job scheduler would.
    nb = make_notebook(
        tmp_path / "slow.ipynb",
        "seed = 1\n",
        "import os, signal, time\nos.kill(os.getppid(), signal.SIGTERM)\ntime.sleep(30)",
    )
    with pytest.raises(RunError) as err:
        run_notebook(nb, output_root=tmp_path / "out", progress_bar=False, log_output=False)
    assert err.value.status == "interrupted"
    assert read_status(err.value.run_dir)["status"] == "interrupted"
    assert (err.value.run_dir / "slow.ipynb").is_file()
    assert os.environ.get(RUN_DIR_ENV) is None  # the runner restored the environment
