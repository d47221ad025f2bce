"""Frozen copies of the policy keep their own weights: REINFORCE++'s reward KL moves once the policy does."""

from __future__ import annotations

import torch

from test_trainer_masks import make_trainer


def test_reinforce_pp_reward_kl_sees_the_policy_move(tmp_path, tiny_policy_path, tokenizer):
    trainer, inputs = make_trainer(tmp_path, tiny_policy_path, tokenizer, mask_retrieved=True, beta=0.0,
                                   estimator="reinforce_pp")
    trainer.model.train()
    batch = trainer._generate_and_score_completions(inputs)  # the reference copy is taken here, before any update
    batch.pop("old_per_token_logps", None)  # so the KL reads the policy as it is now
    assert trainer._reward_kl(batch).abs().max().item() < 1e-4  # still the same weights
    with torch.no_grad():
        for p in trainer.model.parameters():
            p.add_(0.05 * torch.randn_like(p, generator=torch.Generator().manual_seed(0)))
    assert trainer._reward_kl(batch).abs().mean().item() > 1e-3  # the copy kept the old weights
