"""A LoRA policy rolls out with its adapter merged: the same outputs, the weights restored after."""

from __future__ import annotations

import torch
from peft import LoraConfig, get_peft_model
from transformers import AutoModelForCausalLM

from searchrl.trainer.search_grpo import merged_adapter


def test_merged_adapter_gives_the_same_logits_and_restores_the_weights(tiny_policy_path):
    base = AutoModelForCausalLM.from_pretrained(str(tiny_policy_path))
    model = get_peft_model(base, LoraConfig(r=4, lora_alpha=8, target_modules="all-linear", init_lora_weights=False))
    model.eval()
    ids = torch.tensor([[1, 5, 9, 12, 7]])
    before = {k: v.detach().clone() for k, v in model.state_dict().items()}
    with torch.no_grad():
        unmerged = model(ids).logits
        with merged_adapter(model):
            layers = [m for m in model.modules() if hasattr(m, "merged")]
            assert layers and all(m.merged for m in layers)  # the adapter's products are skipped while merged
            merged = model(ids).logits
    assert not any(m.merged for m in layers)
    torch.testing.assert_close(merged, unmerged, rtol=1e-4, atol=1e-5)
    for name, value in model.state_dict().items():
        torch.testing.assert_close(value, before[name], rtol=1e-5, atol=1e-6)


def test_other_models_pass_through(tiny_policy_path):
    model = AutoModelForCausalLM.from_pretrained(str(tiny_policy_path))
    with merged_adapter(model) as inside:
        assert inside is model
    lora = get_peft_model(model, LoraConfig(r=4, target_modules="all-linear", init_lora_weights=False))
    with merged_adapter(lora, enabled=False):  # vLLM generates elsewhere: nothing to merge here
        assert not any(getattr(m, "merged", False) for m in lora.modules())
