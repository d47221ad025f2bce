"""`bf16` is mixed precision: the trained policy's weights stay float32, so a small learning rate still moves them.
Stored in bfloat16, most updates round away (the cause of a GPU cold start that learned almost nothing)."""

from __future__ import annotations

import pytest
import torch
from trl import SFTConfig

from fakes import short_sft_items
from searchrl.config import RunConfig
from searchrl.experiments.experiment import Experiment
from searchrl.models import tiny_test_policy
from searchrl.runs.folder import RUN_DIR_ENV
from searchrl.sft.cold_start import sft_train


def _share_of_weights_moved(model, tokenizer, tmp_path) -> float:
    """One SFT step at lr 1e-5 under bf16 autocast; the share of trainable weights whose value changed."""
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    args = SFTConfig(output_dir=str(tmp_path), use_cpu=True, bf16=True, activation_checkpointing=False,
                     report_to="none", save_strategy="no", logging_steps=1, max_length=1024, max_steps=1,
                     per_device_train_batch_size=4, learning_rate=1e-5, warmup_steps=0, lr_scheduler_type="constant")
    sft_train(model, tokenizer, short_sft_items(tokenizer), args)
    trained = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
    moved = sum(int((p.detach() != before[n]).sum()) for n, p in trained)
    return moved / sum(p.numel() for _, p in trained)


def test_bf16_autocast_on_float32_weights_moves_them_and_bf16_storage_does_not(tokenizer, tmp_path):
    # One Adam step at lr 1e-5 moves every weight with a gradient by about 1e-5. In float32 (bf16 autocast for the
    # compute) nearly all of them move; stored in bfloat16, a step smaller than half an ulp rounds back.
    model, _ = tiny_test_policy(seed=3)
    mixed = _share_of_weights_moved(model, tokenizer, tmp_path / "mixed")
    stored, _ = tiny_test_policy(seed=3)
    stored = stored.to(torch.bfloat16)
    pure = _share_of_weights_moved(stored, tokenizer, tmp_path / "pure")
    print(f"share of weights moved: float32 weights {mixed:.3f}, bfloat16 weights {pure:.3f}")
    assert mixed > 0.9, mixed
    assert pure < 0.5 * mixed, (pure, mixed)


@pytest.mark.parametrize("use_peft", [False, True])
def test_a_bf16_run_loads_the_policy_it_trains_in_float32(tiny_policy_path, tmp_path, monkeypatch, use_peft):
    monkeypatch.setenv(RUN_DIR_ENV, str(tmp_path / "run"))
    cfg = RunConfig.from_params({"model": str(tiny_policy_path), "bf16": True, "use_peft": use_peft,
                                 "world_entities": 40, "world_passage_words": 20, "top_k": 1, "n_train": 8,
                                 "n_eval": 4, "sft_examples": 0, "rl_steps": 0,
                                 "output_root": str(tmp_path)})
    model = Experiment(cfg, notebook="t").load_model()
    assert {p.dtype for p in model.parameters()} == {torch.float32}
