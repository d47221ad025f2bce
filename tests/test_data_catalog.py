"""The data catalogue: names the schema knows, every gpu profile resolved against a data folder laid out as
`searchrl data prepare` writes it, the one-line error of a profile whose data is absent, and the prepare steps."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fake_data import build_fake_data
from searchrl.config import ConfigError, RunConfig
from searchrl.config.data_names import CORPUS_NAMES, DATASET_NAMES, INDEX_NAMES
from searchrl.data import catalog
from searchrl.data.catalog import (
    CATALOG,
    MissingDataError,
    missing_data,
    resolve_corpus,
    resolve_index,
    resolve_questions,
)
from searchrl.data.loaders import load_corpus, load_qa
from searchrl.data.prepare import kilt_passages, search_r1_rows

ROOT = Path(__file__).resolve().parents[1]
# gpu profiles of notebooks that train on `dataset` (eval_benchmarks names benchmarks; report reads run folders)
GPU_PROFILES = sorted(p for p in (ROOT / "params").glob("*/gpu.yaml") if p.parent.name not in ("eval_benchmarks",
                                                                                                "report"))


def test_the_schema_knows_exactly_the_catalogue_names():
    by_kind = {k: tuple(sorted(e.name for e in CATALOG.values() if e.kind == k)) for k in ("questions", "corpus",
                                                                                              "index")}
    assert by_kind == {"questions": DATASET_NAMES, "corpus": CORPUS_NAMES, "index": INDEX_NAMES}


def test_a_misspelt_name_fails_in_the_schema_with_the_nearest_one():
    with pytest.raises(ConfigError, match="'r1searcher-stage3' is neither a file nor a data catalogue name; did "
                                          "you mean 'r1searcher-stage2'"):
        RunConfig.from_params({"dataset": "r1searcher-stage3", "corpus": "kilt-2019"})
    with pytest.raises(ConfigError, match="corpus: 'nq_hotpotqa_train' is a catalogue entry of another kind"):
        RunConfig.from_params({"dataset": "r1searcher-stage2", "corpus": "nq_hotpotqa_train"})
    with pytest.raises(ConfigError, match="no such file"):
        RunConfig.from_params({"dataset": "missing/train.jsonl", "corpus": "kilt-2019"})
    assert RunConfig.from_params({"dataset": "r1searcher-stage2"}).corpus == ""  # the entry's default corpus


DATA_KEYS = ("dataset", "corpus", "eval_split", "retriever_index", "stage1_dataset")


def _profile_data(path: Path) -> list[dict]:
    """The data settings of the profile and of each ablation arm that sets its own."""
    cfg = RunConfig.from_params(None, path)
    top = {key: getattr(cfg, key) for key in DATA_KEYS}
    found = [top]
    for arm in (getattr(cfg, "arms", None) or {}).values():
        if any(key in arm for key in DATA_KEYS):
            found.append({key: arm.get(key, top[key]) for key in DATA_KEYS})
    return found


@pytest.mark.parametrize("path", GPU_PROFILES, ids=lambda p: p.parent.name)
def test_every_gpu_profile_names_its_data_and_resolves_in_a_prepared_folder(path, tmp_path, monkeypatch):
    root = build_fake_data(tmp_path / "data", monkeypatch)
    names = set()
    for data in _profile_data(path):
        dataset, corpus, index, stage1 = data["dataset"], data["corpus"], data["retriever_index"], data["stage1_dataset"]
        assert dataset in CATALOG, f"{path}: a gpu profile names its paper's data (dataset: {dataset!r})"
        assert corpus in CATALOG, f"{path}: a gpu profile names its corpus (corpus: {corpus!r})"
        for name in (index, stage1):
            assert not name or name in CATALOG, f"{path}: an index or stage-1 file is named, not a path ({name!r})"
        assert missing_data(dataset, corpus, data["eval_split"], [root], index=index, stage1_dataset=stage1) is None
        assert load_qa(resolve_questions(dataset, "train", [root]))
        assert load_corpus(resolve_corpus(corpus, dataset, [root]))
        if index:
            assert resolve_index(index, [root]).is_file()
        if stage1:
            assert load_qa(resolve_questions(stage1, "train", [root]))
        names |= {dataset, corpus} | ({index, stage1} - {""})
    # `searchrl data list` says which profiles need an entry: the same names the profile sets
    listed = {e.name for e in CATALOG.values() if path.parent.name in e.profiles}
    assert names == listed


def test_a_profile_whose_data_is_absent_stops_with_the_fetch_command(tmp_path, monkeypatch, capsys):
    from searchrl.experiments.runner import main

    monkeypatch.setattr(catalog, "data_dirs", lambda: [tmp_path])
    code = main([str(ROOT / "notebooks" / "ablate_reward.ipynb"), "-f", str(ROOT / "params/ablate_reward/gpu.yaml"),
                 "--output-root", str(tmp_path / "out")])
    err = capsys.readouterr().err.strip()
    assert code == 2 and not (tmp_path / "out").exists()
    assert err.count("\n") == 0 and err.startswith("error: questions 'r1searcher-stage2' (train) is not in")
    assert err.endswith("run `searchrl data fetch r1searcher-stage2 && searchrl data prepare r1searcher-stage2`")


def test_the_experiment_stops_on_absent_data_before_any_model_loads(tmp_path, monkeypatch):
    from searchrl import models
    from searchrl.experiments.experiment import Experiment

    monkeypatch.setattr(catalog, "data_dirs", lambda: [tmp_path])
    monkeypatch.setattr(models, "load_tokenizer", lambda *a, **k: pytest.fail("a model loaded"))
    cfg = RunConfig.from_params({"dataset": "hotpotqa-distractor", "output_root": str(tmp_path)})
    with pytest.raises(MissingDataError, match=r"searchrl data fetch hotpotqa-distractor"):
        Experiment(cfg, notebook="t", run_dir=tmp_path / "run")


def test_a_named_dataset_trains_on_train_and_evaluates_on_eval_split(tmp_path, monkeypatch):
    from searchrl.experiments.experiment import Experiment

    build_fake_data(tmp_path / "data", monkeypatch)
    cfg = RunConfig.from_params({"model": "tiny-random", "dataset": "hotpotqa-distractor", "corpus": "hotpotqa-pool",
                                 "eval_split": "test", "n_train": 50, "n_eval": 5, "output_root": str(tmp_path)})
    exp = Experiment(cfg, notebook="t", run_dir=tmp_path / "run")
    assert {r["id"] for r in exp.train_rows} == {f"train-{i}" for i in range(12)}
    assert len(exp.eval_rows) == 5 and all(r["id"].startswith("test-") for r in exp.eval_rows)
    # the pool holds every split's paragraphs: 5 per row, 12 rows in each of train, dev and test
    assert len(exp.corpus) == 3 * 12 * 5
    summary = json.loads((exp.run_dir / "data.json").read_text())
    assert summary["dataset"] == "hotpotqa-distractor" and summary["files"]["eval"].endswith("hotpotqa_test.jsonl")


def test_prepare_steps_write_what_the_loaders_read(tmp_path, monkeypatch):
    root = build_fake_data(tmp_path / "data", monkeypatch)
    wiki = load_corpus(root / "wiki-18/corpus.jsonl")
    assert [(d.title, d.text) for d in wiki][:1] == [("Title 0", "Passage 0 text.")]
    assert (root / "wiki-18-e5-index/e5_Flat.index").read_bytes() == bytes([0]) * 10 + bytes([1]) * 10
    assert [r["golden_answers"] for r in load_qa(root / "nq_hotpotqa_train/train.jsonl")] == [["a0"], ["a1"], ["a2"]]
    assert load_qa(root / "ircot-2wiki/train.jsonl")[0]["golden_answers"] == ["person 0"]
    assert len(load_qa(root / "hotpotqa-distractor/hotpotqa_dev.jsonl")) == 12


def test_kilt_articles_become_100_word_passages_with_titles():
    article = {"wikipedia_id": "7", "wikipedia_title": "Paris", "text": ["Paris\n", "a " * 150, "Section::::X.\n",
                                                                         "b " * 30]}
    passages = list(kilt_passages([article]))
    assert [len(p["text"].split()) for p in passages] == [100, 80]
    assert {p["title"] for p in passages} == {"Paris"} and [p["id"] for p in passages] == ["7-0", "7-1"]


def test_search_r1_rows_read_the_question_from_the_prompt_when_no_column_holds_it():
    rows = list(search_r1_rows([{"prompt": [{"content": "Answer... Question: who?"}],
                                 "reward_model": {"ground_truth": {"target": ["me"]}}}]))
    assert rows[0]["question"] == "who?" and rows[0]["golden_answers"] == ["me"]


def test_data_list_shows_every_entry_with_its_profiles_and_presence(tmp_path, monkeypatch, capsys):
    from searchrl.cli import main

    build_fake_data(tmp_path / "data", monkeypatch)
    (tmp_path / "data" / "kilt-2019" / "corpus.jsonl").unlink()
    assert main(["data", "list"]) == 0
    out = capsys.readouterr().out
    rows = {line.split()[0]: line for line in out.splitlines() if line and line.split()[0] in CATALOG}
    assert set(rows) == set(CATALOG)
    assert "ablate_reward" in rows["kilt-2019"] and " no " in rows["kilt-2019"]
    assert " yes " in rows["wiki-18"] and str(tmp_path / "data") in rows["wiki-18"]
