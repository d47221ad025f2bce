"""Multi-turn search rollouts shared by training, evaluation and rejection sampling.

base.py        RolloutConfig (the rollout settings), TurnOutput, the TurnGenerator interface, turn trimming
engine.py      SearchRollout: generate -> retrieve -> append, building env_mask where tokens are appended
generators.py  turn generators: transformers (cached across turns, or whole-sequence) and vLLM
kv_turns.py    the KV cache kept across turns; kv_batch.py its batch with hole columns
loop.py        rollout_questions: the batched question loop that evaluation and rejection sampling share
"""

from searchrl.config.rollout import RolloutConfig
from searchrl.rollout.base import TurnGenerator, TurnOutput, cut_turn, first_stop_end
from searchrl.rollout.engine import RetrieverError, SearchRollout, Trajectory, summarize
from searchrl.rollout.generators import CachedHFTurnGenerator, HFTurnGenerator, Sampler, VLLMTurnGenerator

__all__ = [
    "CachedHFTurnGenerator",
    "HFTurnGenerator",
    "RetrieverError",
    "RolloutConfig",
    "Sampler",
    "SearchRollout",
    "Trajectory",
    "TurnGenerator",
    "TurnOutput",
    "VLLMTurnGenerator",
    "cut_turn",
    "first_stop_end",
    "summarize",
]
