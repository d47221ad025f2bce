"""Long steps that used to run in silence say what they are doing: the evaluations of a suite, the first conversion
or build of a model, and the lazy load of the evidence answerer."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from searchrl import models
from searchrl.config import RunConfig
from searchrl.experiments.eval_suite import EvalSuite


@pytest.fixture
def fake_suite(tmp_path, monkeypatch):
    """An EvalSuite over two benchmarks, two baselines and the untrained policy, whose evaluations only print."""
    cfg = RunConfig.from_params(None, model="tiny-random", output_root=str(tmp_path),
                                benchmarks=["synthetic", "hotpotqa"], baselines=["naive", "rag"], eval_models=["policy"])
    suite = EvalSuite.__new__(EvalSuite)  # no tokenizer, model or data: every evaluation is a fake
    suite.cfg, suite.run_dir, suite._judge, suite.results = cfg, tmp_path / "run", None, {}
    suite.run_dir.mkdir()
    suite.benchmark = lambda name: SimpleNamespace(rows=[{"id": "q0", "question": "?"}], corpus=None)
    suite._retriever = lambda bench: None
    suite._evaluate_baseline = lambda bench, baseline, *rest: print(f"scored {baseline} on {bench}")
    suite._evaluate_policy = lambda bench, label, *rest: print(f"scored {label} on {bench}")
    monkeypatch.setattr(models, "load_policy", lambda *args, **kwargs: (object(), None))
    return suite


def test_each_evaluation_of_a_suite_is_announced_with_its_place_in_the_run(fake_suite, capsys):
    fake_suite.run()
    lines = capsys.readouterr().out.splitlines()
    assert lines == [
        "evaluation 1 of 6: naive on synthetic", "scored naive on synthetic",
        "evaluation 2 of 6: rag on synthetic", "scored rag on synthetic",
        "evaluation 3 of 6: naive on hotpotqa", "scored naive on hotpotqa",
        "evaluation 4 of 6: rag on hotpotqa", "scored rag on hotpotqa",
        "evaluation 5 of 6: policy on synthetic", "scored policy on synthetic",
        "evaluation 6 of 6: policy on hotpotqa", "scored policy on hotpotqa",
        "protocol: not recorded",  # the fake evaluations stamp nothing, and the suite's protocol summary says so
    ]


class _Loads:
    """Stands in for a transformers Auto class reading a GGUF file: hands back a model or tokenizer already built."""

    def __init__(self, built):
        self.built = built

    def from_pretrained(self, *args, **kwargs):
        return self.built


def test_the_first_conversion_of_a_bundled_model_is_announced_and_later_loads_are_quiet(monkeypatch, tmp_path,
                                                                                        capsys):
    model, tokenizer = models.tiny_test_policy(hidden_size=16, num_layers=1)  # before the cache moves: it is read
    monkeypatch.setenv(models.CACHE_ENV, str(tmp_path))  # nothing converted yet
    monkeypatch.setattr(models, "_gguf_location", lambda spec, scratch: (scratch, spec.gguf_file))
    monkeypatch.setattr("transformers.AutoModelForCausalLM", _Loads(model))
    monkeypatch.setattr("transformers.AutoTokenizer", _Loads(tokenizer))
    capsys.readouterr()
    target = models.bundled_model_path(models.DEFAULT_POLICY)
    said = capsys.readouterr().err.splitlines()[0]  # then transformers' own bar over the shards it writes
    assert f"converting the bundled model {models.DEFAULT_POLICY} from GGUF to safetensors" in said
    assert models.BUNDLED[models.DEFAULT_POLICY].conversion in said and str(target) in said
    assert models.bundled_model_path(models.DEFAULT_POLICY) == target
    assert capsys.readouterr().err == ""


def test_the_first_build_of_a_tiny_policy_is_announced(monkeypatch, tmp_path, capsys, tiny_policy):
    monkeypatch.setenv(models.CACHE_ENV, str(tmp_path))
    monkeypatch.setattr(models, "_build_tiny_policy", lambda name: tiny_policy)
    capsys.readouterr()
    models.policy_path(models.TINY_SEARCHER)
    said = capsys.readouterr().err
    assert f"building the test model {models.TINY_SEARCHER}" in said
    assert models.TINY_BUILD_TIME[models.TINY_SEARCHER] in said
    models.policy_path(models.TINY_SEARCHER)
    assert capsys.readouterr().err == ""


def test_the_evidence_answerer_is_announced_when_it_is_loaded(monkeypatch, capsys):
    from searchrl.protocols import get_protocol
    from searchrl.rewards import evidence

    loads = []
    monkeypatch.setattr(evidence, "load_answerer", lambda name, **kwargs: loads.append(name) or (lambda p: p))
    reward = evidence.EvidenceReward("evidence", get_protocol("r_search"), answerer_model="gemma3-270m")
    capsys.readouterr()
    assert reward.answerer is reward.answerer and loads == ["gemma3-270m"]
    said = capsys.readouterr().err
    assert said.count("\n") == 1 and "loading its evidence answerer gemma3-270m" in said
