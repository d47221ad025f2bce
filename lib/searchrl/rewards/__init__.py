"""Metrics and reward functions (TRL signature) for search-while-reasoning RL, and each paper's reward preset.

    from searchrl.rewards import make_reward, make_preset
    em = make_reward("em", protocol)                      # em.__name__ == "em"
    funcs, weights = make_preset("r1_searcher_stage2", protocol)

Reward functions return one float per completion. None ("not applicable" in TRL) is never returned by default; the
evidence reward can be configured to return it for completions without evidence (see evidence.py).
"""

from searchrl.metrics.answers import cover_exact_match, exact_match, f1_score, normalize_answer, word_count
from searchrl.rewards.answer import AnswerReward
from searchrl.rewards.base import RewardFunction, RewardSpec
from searchrl.rewards.evidence import (
    EVIDENCE_TEMPLATE,
    EvidenceReward,
    TransformersAnswerer,
    evidence_prompt,
    load_answerer,
)
from searchrl.rewards.format import FormatReward, RSearchFormatReward, r_search_format_reward
from searchrl.rewards.group import GroupReward, group_reward
from searchrl.rewards.inputs import completion_text
from searchrl.rewards.registry import (
    PRESET_PREFIX,
    REWARD_PRESETS,
    REWARDS,
    expand_rewards,
    make_preset,
    make_reward,
    make_rewards,
    reward_options,
    reward_problems,
)
from searchrl.rewards.search_count import RepeatedQueryPenalty, RetrievalReward

__all__ = [
    "EVIDENCE_TEMPLATE",
    "PRESET_PREFIX",
    "REWARDS",
    "REWARD_PRESETS",
    "AnswerReward",
    "EvidenceReward",
    "FormatReward",
    "GroupReward",
    "RSearchFormatReward",
    "RepeatedQueryPenalty",
    "RetrievalReward",
    "RewardFunction",
    "RewardSpec",
    "TransformersAnswerer",
    "completion_text",
    "cover_exact_match",
    "evidence_prompt",
    "exact_match",
    "expand_rewards",
    "f1_score",
    "group_reward",
    "load_answerer",
    "make_preset",
    "make_reward",
    "make_rewards",
    "normalize_answer",
    "r_search_format_reward",
    "reward_options",
    "reward_problems",
    "word_count",
]
