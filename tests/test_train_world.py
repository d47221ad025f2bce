"""A training world apart from the evaluation world (train_world_seed), and held-out questions by type and hops."""

from __future__ import annotations

import pytest

from searchrl.config import ConfigError, RunConfig
from searchrl.experiments.experiment_data import ExperimentData


class _Data(ExperimentData):
    def __init__(self, cfg):
        self.cfg = cfg


def test_training_world_joins_the_corpus_and_the_held_out_questions_stay_apart():
    cfg = RunConfig(world_entities=40, world_passage_words=20, train_world_seed=5, eval_split="train",
                    eval_question_types=["single_hop", "bridge"], eval_max_hops=2, n_eval=30, n_train=40)
    data = _Data(cfg)
    corpus, train, evaluation = data._load_data()
    ids = [d.id for d in corpus]
    assert len(ids) == len(set(ids))  # the two worlds' passages, ids made unique
    own = {d.id for d in data.world.corpus}
    assert all(i in own for r in train for i in r["metadata"]["supporting_ids"])  # training facts: its own world
    eval_ids = {i for r in evaluation for i in r["metadata"]["supporting_ids"]}
    assert eval_ids and not eval_ids & own and eval_ids <= set(ids)  # held-out facts: only the other world's
    train_names = {s for r in train for s in r["metadata"]["hop_subjects"]}
    assert not train_names & {s for r in evaluation for s in r["metadata"]["hop_subjects"]}
    assert {r["metadata"]["type"] for r in evaluation} == {"single_hop", "bridge"}
    assert max(r["metadata"]["hops"] for r in evaluation) == 2


def test_without_a_training_world_the_run_trains_on_its_own_world():
    cfg = RunConfig(world_entities=40, world_passage_words=20, n_eval=10, n_train=10)
    data = _Data(cfg)
    corpus, train, _ = data._load_data()
    assert data.world.corpus == corpus and all(r["id"].startswith(("single_hop", "bridge", "comparison",
                                                                   "inference")) for r in train)


def test_many_training_worlds_join_the_corpus_with_unique_ids_and_none_is_the_evaluation_world():
    cfg = RunConfig(world_entities=40, world_passage_words=20, train_world_seed=5, train_worlds=3, eval_split="train",
                    eval_question_types=["single_hop"], n_eval=20, n_train=60)
    data = _Data(cfg)
    corpus, train, evaluation = data._load_data()
    ids = [d.id for d in corpus]
    assert len(ids) == len(set(ids))
    assert {i.split(":")[0] for i in ids if ":" in i} == {"w5", "w6", "w7"}
    assert len({r["id"] for r in data.world.splits["train"]}) == len(data.world.splits["train"])  # row ids unique
    assert {r["id"].split(":")[0] for r in train} == {"w5", "w6", "w7"}  # training questions from every world
    own = {d.id for d in data.world.corpus}
    assert all(i in own for r in train for i in r["metadata"]["supporting_ids"])
    assert not {i for r in evaluation for i in r["metadata"]["supporting_ids"]} & own
    one = _Data(cfg.replace(train_worlds=1))
    assert len(one._load_data()[0]) < len(corpus)


def test_a_training_world_that_is_the_evaluation_world_fails_before_anything_runs():
    with pytest.raises(ConfigError, match="world_seed 6 is among the training worlds"):
        RunConfig.from_params({"world_seed": 6, "train_world_seed": 5, "train_worlds": 3})
    with pytest.raises(ConfigError, match="needs train_world_seed"):
        RunConfig.from_params({"train_worlds": 2})
