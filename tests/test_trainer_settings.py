"""RunConfig and SearchGRPOConfig declare the trainer's own settings twice, and the two declarations agree.

They cannot share one dataclass: RunConfig is frozen and SearchGRPOConfig is a transformers TrainingArguments, which
sets its own fields after construction, and Python refuses a dataclass that mixes frozen and unfrozen bases. So
this test holds them together: the same fields (beyond TRL's own), the same types and defaults, the same choices,
and `grpo_args` hands each run value to the trainer setting of the same name.
"""

from __future__ import annotations

import dataclasses

import pytest
from trl import GRPOConfig

from searchrl.config import RunConfig
from searchrl.trainer.arguments import grpo_args
from searchrl.trainer.grpo_config import SearchGRPOConfig

SHARED = ("advantage_estimator", "drop_zero_variance", "dynamic_sampling", "dynamic_sampling_draw",
          "dynamic_sampling_max_draws", "length_grouped_micro_batches", "mask_retrieved", "prompt_selection",
          "protocol", "reward_kl_coef", "shared_prefix", "skip_empty_steps", "train_top_layers", "value_lr",
          "value_lr_scheduler_type", "value_warmup_ratio")
# The one default that differs: runs share the prompt prefix by default (RunConfig), while a SearchGRPOConfig built
# by hand runs TRL's own pass; grpo_args always passes the run's value, so a run never sees the trainer's default.
DEFAULTS_THAT_DIFFER = {"shared_prefix": (True, False)}
# A value other than the default for every shared field (valid together), to follow each one through grpo_args.
OTHER_VALUES = {"advantage_estimator": "rloo", "drop_zero_variance": True, "dynamic_sampling": True,
                "dynamic_sampling_draw": "shortfall", "dynamic_sampling_max_draws": 5,
                "length_grouped_micro_batches": True, "mask_retrieved": False, "prompt_selection": "stratified",
                "protocol": "r1_searcher", "reward_kl_coef": 0.25, "shared_prefix": False, "skip_empty_steps": True,
                "train_top_layers": 2,
                "value_lr": 3e-5, "value_lr_scheduler_type": "constant_with_warmup", "value_warmup_ratio": 0.05}


def _fields(cls) -> dict[str, dataclasses.Field]:
    return {f.name: f for f in dataclasses.fields(cls)}


def _default(f: dataclasses.Field):
    return f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default


def test_the_trainer_settings_declared_in_both_are_these():
    trl_own = set(_fields(GRPOConfig))
    assert sorted(set(_fields(RunConfig)) & set(_fields(SearchGRPOConfig)) - trl_own) == sorted(SHARED)
    assert sorted(OTHER_VALUES) == sorted(SHARED)


@pytest.mark.parametrize("name", SHARED)
def test_both_declarations_have_one_type_and_default(name):
    run, grpo = _fields(RunConfig)[name], _fields(SearchGRPOConfig)[name]
    assert run.type == grpo.type
    expected = DEFAULTS_THAT_DIFFER.get(name, (_default(grpo), _default(grpo)))
    assert (_default(run), _default(grpo)) == expected
    assert OTHER_VALUES[name] != _default(run)


def test_both_refuse_the_same_choices(tmp_path):
    for name, bad in (("prompt_selection", "sometimes"), ("dynamic_sampling_draw", "half"),
                      ("value_lr_scheduler_type", "step")):
        with pytest.raises(ValueError, match=name):
            SearchGRPOConfig(output_dir=str(tmp_path), use_cpu=True, **{name: bad})
        with pytest.raises(ValueError, match=name):
            RunConfig.from_params({name: bad})


def test_each_run_value_reaches_the_trainer_setting_of_its_name(tmp_path):
    cfg = RunConfig.from_params({**OTHER_VALUES, "device": "cpu"})
    args = grpo_args(cfg, tmp_path)
    assert {name: getattr(args, name) for name in SHARED} == OTHER_VALUES
    assert grpo_args(RunConfig.from_params({"device": "cpu"}), tmp_path).shared_prefix is True
