"""`train_top_layers`: RL trains the top decoder blocks only; the gradients of the trained weights are those of full
fine-tuning, and the frozen weights do not move."""

from __future__ import annotations

import pytest
import torch
from transformers import GPT2Config, GPT2LMHeadModel, LlamaConfig, LlamaForCausalLM

from fakes import scripted_trainer
from searchrl.config import ConfigError, RunConfig
from searchrl.trainer.arguments import grpo_args
from searchrl.trainer.levers.freeze import decoder_blocks, train_top_blocks


def llama(layers=4, tied=True):
    torch.manual_seed(0)
    return LlamaForCausalLM(LlamaConfig(vocab_size=50, hidden_size=16, intermediate_size=32, num_hidden_layers=layers,
                                        num_attention_heads=2, num_key_value_heads=1, tie_word_embeddings=tied))


def trained_names(model):
    return {name for name, p in model.named_parameters() if p.requires_grad}


def test_top_blocks_and_final_norm_train_the_rest_is_frozen():
    model = llama(layers=4)
    trained, total = train_top_blocks(model, 1)
    names = trained_names(model)
    assert names and all(n.startswith("model.layers.3.") or n == "model.norm.weight" for n in names)
    assert "model.norm.weight" in names and not any(n.startswith("model.layers.2.") for n in names)
    assert not model.get_input_embeddings().weight.requires_grad  # tied: the output layer too
    assert trained == sum(p.numel() for n, p in model.named_parameters() if n in names)
    assert total == sum(p.numel() for p in model.parameters())


def test_untied_output_layer_stays_frozen():
    model = llama(layers=3, tied=False)
    train_top_blocks(model, 2)
    assert not model.lm_head.weight.requires_grad and not model.model.embed_tokens.weight.requires_grad
    assert any(n.startswith("model.layers.1.") for n in trained_names(model))


def test_gpt2_position_embeddings_stay_frozen():
    torch.manual_seed(0)
    model = GPT2LMHeadModel(GPT2Config(vocab_size=50, n_embd=16, n_layer=3, n_head=2))
    assert decoder_blocks(model)[0] == "transformer.h"
    train_top_blocks(model, 1)
    assert trained_names(model) == {n for n, _ in model.named_parameters()
                                    if n.startswith(("transformer.h.2.", "transformer.ln_f."))}


def test_trained_weights_get_the_full_fine_tuning_gradient():
    ids = torch.randint(0, 50, (2, 7), generator=torch.Generator().manual_seed(1))
    full = llama(layers=4)
    full(input_ids=ids, labels=ids).loss.backward()
    part = llama(layers=4)
    train_top_blocks(part, 2)
    part(input_ids=ids, labels=ids).loss.backward()
    grads = dict(full.named_parameters())
    for name, param in part.named_parameters():
        if param.requires_grad:
            torch.testing.assert_close(param.grad, grads[name].grad)
        else:
            assert param.grad is None


def test_zero_changes_nothing_and_out_of_range_fails():
    model = llama(layers=2)
    model.model.layers[0].mlp.up_proj.weight.requires_grad_(False)
    before = trained_names(model)
    assert train_top_blocks(model, 0)[0] < sum(p.numel() for p in model.parameters())
    assert trained_names(model) == before
    with pytest.raises(ValueError, match=r"must be in \[0, 2\]"):
        train_top_blocks(model, 3)


def test_run_config_checks():
    with pytest.raises(ConfigError, match="train_top_layers must be >= 0"):
        RunConfig(train_top_layers=-1)
    with pytest.raises(ConfigError, match="choose one"):
        RunConfig(train_top_layers=2, use_peft=True)


def varied_reward(prompts, completions, **kwargs):
    return [float(len(c) % 7) for c in completions]


def test_rl_steps_move_only_the_top_block(tmp_path, tiny_policy_path, tokenizer):
    cfg = RunConfig(prompts_per_step=1, num_generations=4, micro_batch_size=2, rl_steps=1, train_top_layers=1,
                    learning_rate=1e-2, save_steps=100, device="cpu", max_completion_tokens=96, health_action="off")
    args = grpo_args(cfg, tmp_path / "out")
    assert args.train_top_layers == 1
    args.save_strategy = "no"
    rows = [{"id": f"q{i}", "question": f"When was Entity{i} founded?", "golden_answers": ["1901"], "metadata": {}}
            for i in range(4)]
    trainer = scripted_trainer(tiny_policy_path, tokenizer, args, rows, [varied_reward])
    before = {k: v.detach().clone() for k, v in trainer.model.named_parameters()}
    trainer.train()
    moved = {k for k, v in trainer.model.named_parameters() if not torch.equal(before[k], v)}
    top = {k for k in before if k.startswith("model.layers.1.")}  # the tiny policy has 2 blocks
    assert moved and moved <= top | {"model.norm.weight"}
    assert len(trainer.optimizer.param_groups[0]["params"]) + len(trainer.optimizer.param_groups[1]["params"]) \
        == len(top) + 1
