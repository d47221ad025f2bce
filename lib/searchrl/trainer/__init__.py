"""The RL trainer: TRL's GRPOTrainer with search rollouts, retrieved-token masks and the papers' rewards.

Names load lazily, so that reading the estimator registry (e.g. to validate parameters) does not import TRL.
"""

from __future__ import annotations

import importlib

_EXPORTS = {
    "ADVANTAGE_ESTIMATORS": "searchrl.trainer.advantages",
    "gae_advantages": "searchrl.trainer.advantages",
    "reinforce_pp_advantages": "searchrl.trainer.advantages",
    "rloo_advantages": "searchrl.trainer.advantages",
    "prompt_dataset": "searchrl.trainer.data",
    "SearchGRPOConfig": "searchrl.trainer.grpo_config",
    "SearchGRPOTrainer": "searchrl.trainer.search_grpo",
}

__all__ = ["ADVANTAGE_ESTIMATORS", "SearchGRPOConfig", "SearchGRPOTrainer", "gae_advantages", "prompt_dataset",
           "reinforce_pp_advantages", "rloo_advantages"]


def __getattr__(name: str):
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'searchrl.trainer' has no attribute {name!r}")
