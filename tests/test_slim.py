"""python -m searchrl.slim: a run folder's evidence without its weights, still readable by the tools."""

from __future__ import annotations

import json

import pytest

from searchrl.analysis.pooled import stage_scores
from searchrl.core.files import write_json, write_trajectories
from searchrl.experiments.ablation import layout
from searchrl.runs.folder import stage_trajectories_path
from searchrl.runs.slim import copy_evidence, main, refresh_slim_copy, slim_copy


def _run_folder(root):
    run = root / "run"
    write_json(run / "eval" / "table.json", [{"stage": "after RL", "F1": 0.5}])
    (run / "params.yaml").write_text("seed: 1\n")
    write_trajectories(stage_trajectories_path(run, "after RL"),
                       [{"id": f"q{i}", "f1": i / 4, "completion": "<think> This needs two facts: " + "x" * 500}
                        for i in range(4)])
    (run / "checkpoints" / "cold_start").mkdir(parents=True)
    (run / "checkpoints" / "cold_start" / "model.safetensors").write_bytes(b"\0" * 4096)
    (run / "figures").mkdir()
    (run / "figures" / "curves.png").write_bytes(b"png")
    (run / "quickstart.ipynb").write_text("{}")
    arm = layout.arm_folder(run, "f1", 0)
    write_trajectories(layout.records_path(arm), [{"id": "q0", "f1": 1.0}])
    layout.mark_done(arm, {"arm": "f1", "seed": 0})
    cold = layout.cold_start_folder(run, 0, "k")
    layout.mark_done(cold, {"seed": 0, "model": str(run / "checkpoints" / "cold_start")})
    return run


def test_the_copy_keeps_the_evidence_and_drops_the_weights(tmp_path):
    run = _run_folder(tmp_path)
    slim = slim_copy(run, tmp_path / "slim", keep_chars=30)
    assert not (slim / "checkpoints").exists() and not (slim / "figures").exists()
    assert not (slim / "quickstart.ipynb").exists()
    assert json.loads((slim / "eval" / "table.json").read_text()) == [{"stage": "after RL", "F1": 0.5}]
    assert (slim / "params.yaml").read_text() == "seed: 1\n"
    records = [json.loads(x) for x in stage_trajectories_path(slim, "after RL").read_text().splitlines()]
    assert [r["completion"] for r in records] == ["<think> This needs two facts: "] * 4
    assert stage_scores(slim, "after RL").tolist() == [0.0, 0.25, 0.5, 0.75]  # the pooling tools read it as a run


def test_finished_arms_stay_finished_and_a_dropped_cold_start_is_made_again(tmp_path):
    slim = slim_copy(_run_folder(tmp_path), tmp_path / "slim")
    assert list(layout.finished_arm_folders(slim)) == [("f1", 0)]  # a resume skips it
    assert layout.read_done(layout.cold_start_folder(slim, 0, "k")) is None  # its weights were not copied


def test_a_copy_never_overwrites(tmp_path, capsys):
    run = _run_folder(tmp_path)
    assert main([str(run), "--to", str(tmp_path / "out")]) == 0
    assert "KiB" in capsys.readouterr().out
    with pytest.raises(FileExistsError, match="never overwrite"):
        slim_copy(run, tmp_path / "out" / "run")
    with pytest.raises(FileNotFoundError, match="no run folder"):
        slim_copy(tmp_path / "missing", tmp_path / "other")


def test_a_refreshed_copy_replaces_the_last_one_whole(tmp_path, capsys):
    run = _run_folder(tmp_path)
    first = refresh_slim_copy(run, tmp_path / "kept")
    # under the run's parent folder's name, as under an output root (<root>/<notebook>/<run>)
    assert first == tmp_path / "kept" / tmp_path.name / "run" and (first / "params.yaml").read_text() == "seed: 1\n"
    (run / "params.yaml").write_text("seed: 2\n")
    (tmp_path / "kept" / "run.new").mkdir()  # left by a copy that crashed midway
    assert (refresh_slim_copy(run, tmp_path / "kept") / "params.yaml").read_text() == "seed: 2\n"
    assert sorted(p.name for p in first.parent.iterdir()) == ["run"]
    with pytest.raises(ValueError, match="would replace the run folder itself"):
        refresh_slim_copy(run, tmp_path.parent)
    assert copy_evidence(run, str(tmp_path.parent)) is None  # reported, not raised
    assert copy_evidence(run, "") is None
    (tmp_path / "blocked").write_text("a file where a folder should be")
    assert copy_evidence(run, str(tmp_path / "blocked")) is None  # reported, and the run goes on
    assert "could not refresh the evidence copy of run" in capsys.readouterr().out
