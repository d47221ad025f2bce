"""Format rewards.

- R1-Searcher eq. 2 (Stage 1): 0.5 when the format is correct, 0 otherwise (`format_r1s_stage1`).
- R1-Searcher eq. 3 (Stage 2): 0 when correct, -2 otherwise (`format_r1s_stage2`).
- R1-Searcher++ eq. 3: 0 when correct, -2 otherwise (`format_r1spp`).
  For these three, "correct" is the protocol's own verdict, `Parsed.format_ok`, which implements the paper's rules.
- R-Search eq. 5 (`format_r_search`): r = (1 - I_S)(g_e + g_a I_A) + I_S (g_e I_E + g_a I_A), with g_e = g_a = 0.2.
  I_S: at least one search; I_A / I_E: exactly one non-empty <answer> / <original_evidence> box in the model's own
  text (observations removed first, so a retrieved passage quoting a tag cannot change the verdict).
"""

from __future__ import annotations

import re
from typing import Any

from searchrl.protocols.base import SearchProtocol
from searchrl.rewards.base import REWARDS, RewardFunction, RewardSpec
from searchrl.rewards.inputs import Sample

# R-Search's evidence tags; a protocol may override them with `evidence_open` / `evidence_close` attributes.
DEFAULT_EVIDENCE_OPEN = "<original_evidence>"
DEFAULT_EVIDENCE_CLOSE = "</original_evidence>"


def r_search_format_reward(
    searched: bool, evidence_ok: bool, answer_ok: bool, gamma_e: float = 0.2, gamma_a: float = 0.2
) -> float:
    """R-Search eq. 5. Without a search the evidence part is granted (the prompt says to omit evidence then)."""
    i_s, i_e, i_a = float(bool(searched)), float(bool(evidence_ok)), float(bool(answer_ok))
    return (1.0 - i_s) * (gamma_e + gamma_a * i_a) + i_s * (gamma_e * i_e + gamma_a * i_a)


class FormatReward(RewardFunction):
    """`valid` when the protocol judges the completion well formed, else `invalid`."""

    needs_golden_answers = False

    def __init__(self, name: str, protocol: SearchProtocol, *, valid: float, invalid: float) -> None:
        super().__init__(name, protocol)
        self.valid = float(valid)
        self.invalid = float(invalid)

    def score(self, samples: list[Sample], prompts: list[Any] | None, kwargs: dict[str, Any]) -> list[float | None]:
        return [self.valid if s.parsed.format_ok else self.invalid for s in samples]


def without_spans(text: str, open_tag: str, close_tag: str) -> str:
    """The text with every open_tag...close_tag span removed (an unclosed span runs to the end)."""
    pattern = re.escape(open_tag) + r".*?(?:" + re.escape(close_tag) + r"|\Z)"
    return re.sub(pattern, " ", text, flags=re.DOTALL)


def model_text(protocol: SearchProtocol, text: str) -> str:
    """The model's own text: the protocol's `model_view` (observations blanked out) when it has one."""
    view = getattr(protocol, "model_view", None)
    if callable(view):
        return view(text)
    return without_spans(text, protocol.obs_open, protocol.obs_close)


def has_one_box(text: str, open_tag: str, close_tag: str) -> bool:
    """Exactly one open and one close tag, in that order, around non-blank content."""
    if text.count(open_tag) != 1 or text.count(close_tag) != 1:
        return False
    start = text.index(open_tag) + len(open_tag)
    end = text.find(close_tag, start)
    return end >= 0 and bool(text[start:end].strip())


class RSearchFormatReward(RewardFunction):
    """R-Search eq. 5 computed from the completion text and the search count."""

    needs_golden_answers = False

    def __init__(self, name: str, protocol: SearchProtocol, *, gamma_e: float = 0.2, gamma_a: float = 0.2) -> None:
        super().__init__(name, protocol)
        self.gamma_e = float(gamma_e)
        self.gamma_a = float(gamma_a)
        self.evidence_open = getattr(protocol, "evidence_open", DEFAULT_EVIDENCE_OPEN)
        self.evidence_close = getattr(protocol, "evidence_close", DEFAULT_EVIDENCE_CLOSE)

    def indicators(self, sample: Sample) -> tuple[bool, bool, bool]:
        """(I_S, I_E, I_A) of eq. 5 for one sample.

        I_E and I_A come from the protocol's `format_indicators(text)` when it has one (the R-Search protocol does),
        else from counting boxes here. I_S is the search count of the sample: the rollout's count of retrievals
        really run when it reports one.
        """
        reader = getattr(self.protocol, "format_indicators", None)
        if callable(reader):
            flags = reader(sample.text)
            evidence_ok, answer_ok = bool(flags.evidence_ok), bool(flags.answer_ok)
        else:
            own_text = model_text(self.protocol, sample.text)
            evidence_ok = has_one_box(own_text, self.evidence_open, self.evidence_close)
            answer_ok = has_one_box(own_text, self.protocol.answer_open, self.protocol.answer_close)
        return sample.num_searches >= 1, evidence_ok, answer_ok

    def score(self, samples: list[Sample], prompts: list[Any] | None, kwargs: dict[str, Any]) -> list[float | None]:
        return [
            r_search_format_reward(*self.indicators(s), gamma_e=self.gamma_e, gamma_a=self.gamma_a) for s in samples
        ]


REWARDS.register("format_r1s_stage1", RewardSpec(FormatReward, {"valid": 0.5, "invalid": 0.0}), doc="0.5 when well formed (R1-Searcher eq. 2, stage 1)")
REWARDS.register("format_r1s_stage2", RewardSpec(FormatReward, {"valid": 0.0, "invalid": -2.0}), doc="-2 when malformed (R1-Searcher eq. 3, stage 2)")
REWARDS.register("format_r1spp", RewardSpec(FormatReward, {"valid": 0.0, "invalid": -2.0}), doc="-2 when malformed (R1-Searcher++ eq. 3)")
REWARDS.register("format_r_search", RewardSpec(RSearchFormatReward, {"gamma_e": 0.2, "gamma_a": 0.2}), doc="answer and evidence boxes (R-Search eq. 5)")
# R-Search "w/o Evidence" ablation (Table 3): the evidence part of the format reward is disabled.
REWARDS.register("format_r_search_no_evidence", RewardSpec(RSearchFormatReward, {"gamma_e": 0.0, "gamma_a": 0.2}), doc="R-Search eq. 5 without its evidence part (Table 3 ablation)")

__all__ = [
        "FormatReward",
    "RSearchFormatReward",
    "has_one_box",
    "model_text",
    "r_search_format_reward",
    "without_spans",
]
