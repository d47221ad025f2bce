"""Multi-turn search rollouts shared by training, evaluation and rejection sampling."""

from searchrl.rollout.engine import RolloutConfig, SearchRollout, Trajectory, summarize
from searchrl.rollout.generators import HFTurnGenerator, TurnGenerator, TurnOutput, VLLMTurnGenerator, cut_turn

__all__ = [
           "HFTurnGenerator",
           "RolloutConfig",
           "SearchRollout",
           "Trajectory",
           "TurnGenerator",
           "TurnOutput",
           "VLLMTurnGenerator",
           "cut_turn",
           "summarize",
]
