import torch

from searchrl.trainer.levers.search_payoff import advantage_by_searches


def test_advantage_by_searches_reads_each_type_within_its_groups():
    # two groups of 4: an inference group where two searches earn more, a single-hop group where they earn less,
    # and a third group whose rollouts all searched once (no evidence about the count: skipped)
    rewards = torch.tensor([1.0, 1.0, -1.0, -1.0, 1.0, -1.0, -1.0, 1.0, 1.0, -1.0, 1.0, -1.0])
    counts = [2, 2, 1, 1, 1, 2, 2, 1, 1, 1, 1, 1]
    qtypes = ["inference"] * 4 + ["single_hop"] * 4 + ["single_hop"] * 4
    got = advantage_by_searches(rewards, counts, qtypes, 4)
    assert got == {("inference", 1): -1.0, ("inference", 2): 1.0, ("single_hop", 1): 1.0,
                   ("single_hop", 2): -1.0}


def test_advantage_by_searches_averages_over_groups_and_refuses_ragged_input():
    rewards = torch.tensor([1.0, 0.0, 0.0, 0.0])  # two groups of two: a 2-search winner, then a tie
    got = advantage_by_searches(rewards, [2, 1, 1, 2], ["inference"] * 4, 2)
    assert got == {("inference", 1): -0.25, ("inference", 2): 0.25}
    assert advantage_by_searches(rewards, [1, 2, 1], ["x"] * 3, 2) == {}
    assert advantage_by_searches(rewards, [1, 2, 1, 2], ["x"] * 4, 3) == {}
