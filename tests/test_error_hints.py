"""Error messages say what is wrong and which parameter, file or command to change."""

from __future__ import annotations

import json
import re
from pathlib import Path
from types import SimpleNamespace

import pytest

from searchrl.analysis.seeds import seed_tables
from searchrl.config import ConfigError, RunConfig
from searchrl.data.benchmarks import load_benchmark
from searchrl.data.tokenize import tokenize_sft
from searchrl.experiments import runner
from searchrl.experiments.ablation import report

ROOT = Path(__file__).resolve().parents[1]


def write_jsonl(path: Path, records: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


def qa_file(path: Path, n: int) -> Path:
    return write_jsonl(path, [{"id": f"q{i}", "question": f"Who is {i}?", "golden_answers": [f"a{i}"]}
                              for i in range(n)])


def corpus_file(path: Path) -> Path:
    return write_jsonl(path, [{"id": "d0", "title": "A", "text": "a0 is someone."}])


# 1. --seeds on an ablation notebook


def test_seeds_flag_is_refused_for_an_ablation_before_any_run(monkeypatch, capsys, tmp_path):
    def no_run(*args, **kwargs):
        raise AssertionError("no run may start")

    monkeypatch.setattr(runner, "run_notebook", no_run)
    code = runner.main([str(ROOT / "notebooks/ablate_mask.ipynb"), "--output-root", str(tmp_path),
                        "--seeds", "0", "1", "2"])
    assert code == 2
    err = capsys.readouterr().err
    assert "--seeds cannot run ablate_mask" in err and '-p seeds "[0, 1, 2]"' in err
    assert not list(tmp_path.iterdir())  # no run folder was made


def test_spread_over_ablation_runs_points_to_the_seeds_parameter(tmp_path):
    run = tmp_path / "ablate_mask" / "20250101-000000-ab12"
    run.mkdir(parents=True)
    (run / "ablation.json").write_text("{}")
    with pytest.raises(ValueError, match=r"none of the runs.*ablation runs.*-p seeds"):
        seed_tables({0: run})
    with pytest.raises(ValueError, match=r"none of the runs.*notebook that evaluates its stages"):
        seed_tables({0: tmp_path / "missing"})


# 2. temperature 0 with RL


def test_zero_temperature_is_refused_when_rl_samples():
    with pytest.raises(ConfigError, match=r"temperature is 0 but rl_steps > 0.*set temperature > 0"):
        RunConfig.from_params({"temperature": 0, "rl_steps": 5})
    assert RunConfig.from_params({"temperature": 0, "rl_steps": 0}).temperature == 0.0  # evaluation only


# 3. empty training or evaluation questions


def test_zero_question_counts_are_refused_before_the_run():
    with pytest.raises(ConfigError, match=r"n_eval is 0.*set n_eval >= 1"):
        RunConfig.from_params({"n_eval": 0})
    with pytest.raises(ConfigError, match=r"n_train is 0.*set n_train >= 1"):
        RunConfig.from_params({"n_train": 0})
    with pytest.raises(ConfigError, match=r"n_eval is 0.*synthetic one in benchmarks"):
        RunConfig.from_params({"n_eval": 0, "benchmarks": ["synthetic", "hotpotqa"]})
    # eval_benchmarks passes 0 on as "all questions" of a released benchmark
    assert RunConfig.from_params({"n_eval": 0, "benchmarks": ["hotpotqa"]}).n_eval == 0


def test_empty_evaluation_side_names_n_eval(tmp_path):
    from searchrl.experiments.experiment import Experiment

    cfg = RunConfig.from_params({"dataset": str(qa_file(tmp_path / "qa.jsonl", 1)),
                                 "corpus": str(corpus_file(tmp_path / "corpus.jsonl")), "n_eval": 5})
    with pytest.raises(ValueError, match=r"no evaluation questions: n_eval=5 .*qa.jsonl \(1 questions"):
        Experiment._load_data(SimpleNamespace(cfg=cfg))


def test_empty_training_side_names_its_filters(tmp_path):
    from searchrl.experiments.experiment import Experiment

    cfg = RunConfig.from_params({"dataset": str(qa_file(tmp_path / "qa.jsonl", 6)),
                                 "corpus": str(corpus_file(tmp_path / "corpus.jsonl")), "n_eval": 2,
                                 "train_question_types": ["comparison"]})
    with pytest.raises(ValueError, match=r"no training questions: n_train=256 with "
                                         r"train_question_types=\['comparison'\].*widen train_question_types"):
        Experiment._load_data(SimpleNamespace(cfg=cfg))


# 4. cold-start items too long


def test_too_long_demonstrations_name_the_settings_that_shorten_them():
    items = [{"prompt_ids": list(range(1, 20)), "completion_ids": [7, 8], "env_mask": [1, 1]}]
    with pytest.raises(ValueError, match=r"shorten the demonstrations: lower top_k, world_passage_words or "
                                         r"max_searches"):
        tokenize_sft(items, SimpleNamespace(eos_token_id=0), max_length=10)


# 5. the custom benchmark


def test_custom_benchmark_is_for_python_callers(tmp_path):
    with pytest.raises(ConfigError, match=r"benchmarks: 'custom' reads its questions from a file no parameter can "
                                          r"name.*from Python: load_benchmark\('custom', questions="):
        RunConfig.from_params({"benchmarks": ["custom"]})
    bench = load_benchmark("custom", questions=qa_file(tmp_path / "qa.jsonl", 3),
                           corpus=corpus_file(tmp_path / "corpus.jsonl"))
    assert len(bench.rows) == 3 and len(bench.corpus) == 1


# 6. a missing data folder


def test_missing_data_folder_names_data_dir_and_the_environment_variable(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"data folder .*nowhere does not exist; point data_dir .*"
                                                r"\$SEARCHRL_DATA"):
        load_benchmark("hotpotqa", data_dir=tmp_path / "nowhere")


# 7. report_runs naming a folder inside an ablation run


def test_report_names_the_run_folder_above_an_arm_folder(tmp_path):
    run = tmp_path / "ablate_mask" / "20250101-000000-ab12"
    arm = run / "arms" / "masked" / "seed0"
    arm.mkdir(parents=True)
    (run / "ablation.json").write_text("{}")
    expected = rf"not ablation run folders.*inside the run folder {re.escape(str(run))}: give that instead"
    with pytest.raises(FileNotFoundError, match=expected + r".*outputs/<ablation notebook>/<run>"):
        report.resolve_runs([str(arm)], tmp_path)
    with pytest.raises(FileNotFoundError, match=r"not ablation run folders \(no ablation.json\): [^;]*other; list "
                                                r"in report_runs"):
        report.resolve_runs([str(tmp_path / "other")], tmp_path)
    assert report.resolve_runs([str(run)], tmp_path) == [run]
