"""benchmarks/decision_point.py: the contexts stop exactly where the demonstrations decide, and the odds it reads are
the policy's next-token odds of the search words against the answer word."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from searchrl.config import RunConfig
from searchrl.experiments.experiment import Experiment
from searchrl.runs.folder import RUN_DIR_ENV

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "decision_point.py"


@pytest.fixture(scope="module")
def probe():
    spec = importlib.util.spec_from_file_location("decision_point", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def experiment(tmp_path, monkeypatch):
    monkeypatch.setenv(RUN_DIR_ENV, str(tmp_path / "run"))
    cfg = RunConfig.from_params({"model": "tiny-random", "world_entities": 40, "n_eval": 40, "rl_steps": 0,
                                 "top_k": 1, "max_searches": 2, "output_root": str(tmp_path)})
    return Experiment(cfg, notebook="t")


def test_contexts_end_after_the_first_reading(probe, experiment):
    contexts = probe.decision_contexts(experiment, ["single_hop", "inference"])
    assert {c["qtype"] for c in contexts} == {"single_hop", "inference"}
    for c in contexts:
        completion = c["context"][c["prompt_chars"]:]
        assert completion.endswith(".") and completion.count("</information>") == 1
        for word in sum(probe.WORDS["reading"], ()):  # every decision word is its own first token
            probe.first_token(experiment.tokenizer, c["context"], word)


def test_plan_contexts_stop_at_the_count(probe, experiment):
    contexts = probe.decision_contexts(experiment, ["single_hop", "inference"], at="plan")
    assert len({c["context"][c["prompt_chars"]:] for c in contexts}) == 1  # the same opening after every question
    assert contexts[0]["context"].endswith("<think> This needs")
    for word in sum(probe.WORDS["plan"], ()):
        probe.first_token(experiment.tokenizer, contexts[0]["context"], word)


class _Favours(torch.nn.Module):
    """A stand-in policy whose next token is always `token`."""

    def __init__(self, token: int, vocab: int):
        super().__init__()
        self.token, self.vocab = token, vocab

    def forward(self, input_ids):
        logits = torch.zeros(1, input_ids.shape[1], self.vocab)
        logits[0, -1, self.token] = 30.0
        return SimpleNamespace(logits=logits)


def test_odds_follow_the_policys_next_token(probe, experiment):
    tok = experiment.tokenizer
    contexts = probe.decision_contexts(experiment, ["single_hop"])[:2]
    vocab = len(tok)
    answer = probe.first_token(tok, contexts[0]["context"], " So")
    search = probe.first_token(tok, contexts[0]["context"], " Next")
    says_answer = probe.decision_odds(_Favours(answer, vocab), tok, contexts)
    says_search = probe.decision_odds(_Favours(search, vocab), tok, contexts)
    assert (says_answer["log_odds_search"] < -20).all() and (says_search["log_odds_search"] > 20).all()
    assert says_answer["mass"].gt(0.99).all()
    assert probe.summary(says_search).loc["single_hop", "search_likelier"] == 1.0
