"""The RL trainer: TRL's GRPOTrainer with search rollouts, retrieved-token masks and the papers' rewards."""

from searchrl.trainer.advantages import ADVANTAGE_ESTIMATORS, reinforce_pp_advantages, rloo_advantages
from searchrl.trainer.data import prompt_dataset
from searchrl.trainer.search_grpo import SearchGRPOConfig, SearchGRPOTrainer

__all__ = ["ADVANTAGE_ESTIMATORS", "SearchGRPOConfig", "SearchGRPOTrainer", "prompt_dataset",
           "reinforce_pp_advantages", "rloo_advantages"]
