"""Ablations: arms of one RunConfig trained from a shared cold start per seed, evaluated on the same held-out
questions, and compared with the papers' claims (curves with seed bands, an evaluation table, verdicts).

See :mod:`searchrl.experiments.ablation.run` for the calls a notebook makes and :mod:`searchrl.experiments.ablation.layout` for the folder.
"""

from searchrl.experiments.ablation.arms import (
    Arm,
    arm_config,
    cold_start_key,
    cold_start_settings,
    model_on_this_machine,
    parse_arms,
    parse_seeds,
    require_models,
)
from searchrl.experiments.ablation.curves import CURVE_METRICS, band_curves, band_frame, read_histories
from searchrl.experiments.ablation.run import Ablation
from searchrl.experiments.ablation.tables import TABLE_METRICS, arm_table, read_records
from searchrl.experiments.ablation.verdict import Claim, paired_differences, parse_claims, verdict, verdict_table
from searchrl.experiments.ablation.work import ArmWork, ExperimentWork, experiment_in

__all__ = [
    "CURVE_METRICS",
    "TABLE_METRICS",
    "Ablation",
    "Arm",
    "ArmWork",
    "Claim",
    "ExperimentWork",
    "arm_config",
    "arm_table",
    "band_curves",
    "band_frame",
    "cold_start_key",
    "cold_start_settings",
    "experiment_in",
    "model_on_this_machine",
    "paired_differences",
    "parse_arms",
    "parse_claims",
    "parse_seeds",
    "read_histories",
    "read_records",
    "require_models",
    "verdict",
    "verdict_table",
]
