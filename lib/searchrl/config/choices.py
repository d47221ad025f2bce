"""Choices that the schema checks and the mechanisms that act on them share, declared once as plain tuples, so that
checking a parameter file imports none of those mechanisms."""

from __future__ import annotations

__all__ = ["DRAW_SIZES", "LR_SCHEDULES", "PROMPT_SELECTIONS"]

DRAW_SIZES = ("batch", "shortfall")
"""How many questions an extra draw takes: a whole batch (DAPO), or what the missing groups need (`extra_draw_size`)."""

PROMPT_SELECTIONS = ("uniform", "informative", "stratified")
"""How RL draws its training prompts: uniformly, favouring informative questions, or stratified by type."""

LR_SCHEDULES = ("linear", "constant", "constant_with_warmup", "cosine")
"""Learning-rate schedules of RL's policy (transformers' names) and of the ppo critic (`lr_factor`, same meanings)."""
