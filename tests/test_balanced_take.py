"""balanced_take: the round robin over question types that picks cold-start, training and evaluation rows."""

from collections import Counter

import pytest

from searchrl.config import ConfigError, RunConfig
from searchrl.experiments.experiment_data import balanced_take


def _rows(per_type: int = 30) -> list[dict]:
    return [{"id": f"{t}-{i}", "metadata": {"type": t, "hops": 1 if t == "single_hop" else 2}}
            for t in ("single_hop", "inference", "bridge", "comparison") for i in range(per_type)]


def _types(rows: list[dict]) -> Counter:
    return Counter(r["metadata"]["type"] for r in rows)


def test_round_robin_gives_each_type_an_equal_share():
    assert _types(balanced_take(_rows(), 40)) == {"single_hop": 10, "inference": 10, "bridge": 10, "comparison": 10}


def test_weights_give_a_type_that_many_rows_a_round():
    picked = balanced_take(_rows(), 48, None, 0, weights={"single_hop": 3})
    assert _types(picked) == {"single_hop": 24, "inference": 8, "bridge": 8, "comparison": 8}
    # any prefix keeps the share: the first round is three single-hop rows and one of each other type
    assert _types(picked[:6])["single_hop"] == 3


def test_a_type_that_runs_out_leaves_the_rest_to_the_others():
    picked = balanced_take(_rows(5), 20, ["single_hop", "inference"], 0, weights={"single_hop": 3})
    assert _types(picked) == {"single_hop": 5, "inference": 5}


def test_unweighted_order_is_unchanged_by_an_empty_weights_mapping():
    assert balanced_take(_rows(), 40, None, 3) == balanced_take(_rows(), 40, None, 3, weights={})
    # one row of each type per round, types in sorted order
    order = [r["metadata"]["type"] for r in balanced_take(_rows(), 8, None, 3)]
    assert order == ["bridge", "comparison", "inference", "single_hop"] * 2


def test_cold_start_weights_must_name_a_cold_start_type_and_be_whole():
    with pytest.raises(ConfigError, match="not in sft_question_types"):
        RunConfig.from_params(None, sft_question_types=["single_hop"], sft_type_weights={"bridge": 2})
    with pytest.raises(ConfigError, match="whole number >= 1"):
        RunConfig.from_params(None, sft_question_types=["single_hop"], sft_type_weights={"single_hop": 0.5})
    cfg = RunConfig.from_params(None, sft_question_types=["single_hop", "bridge"], sft_type_weights={"single_hop": 3})
    assert cfg.sft_type_weights == {"single_hop": 3}
    # an empty sft_question_types means every type, so any type may be weighted
    assert RunConfig.from_params(None, sft_question_types=[], sft_type_weights={"bridge": 2}).sft_type_weights == {"bridge": 2}
