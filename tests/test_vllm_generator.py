"""The vLLM turn generator, driven by a fake of TRL's vLLM generation object (vLLM itself needs a GPU)."""

from __future__ import annotations

import math

import pytest
import torch

from fakes import FakeRetriever, MiniProtocol
from searchrl.rollout import RolloutConfig, SearchRollout, VLLMTurnGenerator


class FakeVLLMGeneration:
    """Mimics `trainer.vllm_generation.generate(prompts, images, num_generations)`: applies stop strings the way
    vLLM does with include_stop_str_in_output, and returns per-token logprobs."""

    def __init__(self, tokenizer, turns):
        self.tokenizer, self.turns, self.generation_kwargs, self.calls = tokenizer, list(turns), {}, []

    def generate(self, prompts, images, num_generations):
        assert images is None and num_generations == 1
        self.calls.append(len(prompts))
        completions, logprobs = [], []
        for _ in prompts:
            text = self.turns.pop(0)
            stops = [s for s in self.generation_kwargs["stop"] if s in text]
            if stops:
                cut = min(text.index(s) + len(s) for s in stops)
                text = text[:cut]
            ids = self.tokenizer(text, add_special_tokens=False)["input_ids"]
            completions.append(ids)
            logprobs.append([[-0.5] for _ in ids])
        return prompts, completions, logprobs, None


def test_vllm_generator_sets_stop_strings_and_keeps_logprobs(tokenizer):
    protocol = MiniProtocol()
    fake = FakeVLLMGeneration(tokenizer, ["<search>Entity3</search> and more", "<answer>1903</answer>"])
    gen = VLLMTurnGenerator(fake, tokenizer, protocol.stop_strings)
    assert fake.generation_kwargs["stop"] == protocol.stop_strings
    assert fake.generation_kwargs["include_stop_str_in_output"] is True
    engine = SearchRollout(protocol, FakeRetriever(), tokenizer, gen, RolloutConfig(max_completion_tokens=200))
    (traj,) = engine.run([tokenizer("q", add_special_tokens=False)["input_ids"]])
    assert traj.queries == ["Entity3"] and traj.finish == "answer"
    assert fake.calls == [1, 1]
    sampled = [lp for lp, m in zip(traj.logprobs, traj.env_mask) if m == 1]
    appended = [lp for lp, m in zip(traj.logprobs, traj.env_mask) if m == 0]
    assert sampled and all(lp == -0.5 for lp in sampled)
    assert appended and all(math.isnan(lp) for lp in appended)


def test_collective_engine_runs_every_turn_even_when_idle(tokenizer):
    protocol = MiniProtocol()
    fake = FakeVLLMGeneration(tokenizer, ["<answer>x</answer>"])
    engine = SearchRollout(protocol, FakeRetriever(), tokenizer, VLLMTurnGenerator(fake, tokenizer,
                           protocol.stop_strings), RolloutConfig(max_searches=2), collective=True)
    engine.run([tokenizer("q", add_special_tokens=False)["input_ids"]])
    # Multi-process vLLM generation is collective: idle processes still join every turn (with no prompts).
    assert fake.calls == [1, 0, 0, 0]


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device and vLLM")
def test_vllm_search_rollout_on_gpu(tmp_path, tiny_policy_path, tokenizer):
    pytest.importorskip("vllm")
    from trl import GRPOConfig  # noqa: F401

    from searchrl.trainer import SearchGRPOConfig, SearchGRPOTrainer, prompt_dataset

    rows = [{"id": "q", "question": "When was Entity1 founded?", "golden_answers": ["1901"], "metadata": {}}]
    args = SearchGRPOConfig(output_dir=str(tmp_path), per_device_train_batch_size=4, num_generations=4, max_steps=1,
                            max_completion_length=64, use_vllm=True, vllm_mode="colocate", report_to="none",
                            vllm_gpu_memory_utilization=0.2, save_strategy="no")
    trainer = SearchGRPOTrainer(model=str(tiny_policy_path), reward_funcs=["em"], args=args,
                                train_dataset=prompt_dataset(rows, MiniProtocol(), tokenizer),
                                retriever=FakeRetriever(), protocol=MiniProtocol(), processing_class=tokenizer)
    trainer.train()
    assert trainer.state.global_step == 1


def test_vllm_mode_and_server_url_reach_trl_and_bad_values_fail_before_anything_runs(tmp_path):
    from searchrl.config import ConfigError, RunConfig
    from searchrl.trainer.arguments import grpo_args

    colocated = grpo_args(RunConfig(use_vllm=True), tmp_path)
    assert (colocated.vllm_mode, colocated.vllm_server_base_url) == ("colocate", None)
    served = grpo_args(RunConfig(use_vllm=True, vllm_mode="server", vllm_server_url="http://10.0.0.2:8000"), tmp_path)
    assert (served.vllm_mode, served.vllm_server_base_url) == ("server", "http://10.0.0.2:8000")
    with pytest.raises(ConfigError, match="did you mean 'server'"):
        RunConfig(vllm_mode="serve")
    with pytest.raises(ConfigError, match="vllm_server_url must be an http"):
        RunConfig(vllm_server_url="10.0.0.2:8000")
