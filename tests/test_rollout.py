"""The search rollout engine: turns, batched retrieval, budgets, and the env_mask written where tokens are appended."""

from __future__ import annotations

import pytest

from fakes import FakeRetriever, MiniProtocol, ScriptedGenerator
from searchrl.rollout import HFTurnGenerator, RolloutConfig, SearchRollout, cut_turn


def _run(tokenizer, scripts, **cfg):
    retriever = FakeRetriever()
    gen = ScriptedGenerator(tokenizer, scripts)
    engine = SearchRollout(MiniProtocol(), retriever, tokenizer, gen, RolloutConfig(**cfg))
    prompts = [tokenizer(f"question {i}", add_special_tokens=False)["input_ids"] for i in range(len(scripts))]
    return engine.run(prompts), retriever


def test_search_then_answer_masks_exactly_the_observation(tokenizer):
    scripts = [["<think>need it</think><search>Entity2 founded</search>", "<answer>1902</answer>"]]
    (traj,), retriever = _run(tokenizer, scripts, top_k=2)
    assert traj.num_searches == 1 and traj.queries == ["Entity2 founded"]
    assert traj.doc_ids == [["2", "0"]]
    obs = MiniProtocol().format_observation(retriever.docs[2:3] + retriever.docs[0:1])
    obs_ids = tokenizer(obs, add_special_tokens=False)["input_ids"]
    first = tokenizer(scripts[0][0], add_special_tokens=False)["input_ids"]
    # Layout: sampled turn 1 (1s), observation (0s), sampled turn 2 with EOS (1s).
    assert traj.env_mask[: len(first)] == [1] * len(first)
    assert traj.env_mask[len(first): len(first) + len(obs_ids)] == [0] * len(obs_ids)
    assert traj.completion_ids[len(first): len(first) + len(obs_ids)] == obs_ids
    assert all(m == 1 for m in traj.env_mask[len(first) + len(obs_ids):])
    assert len(traj.env_mask) == len(traj.completion_ids)
    assert traj.finish == "eos" and not traj.hit_search_budget and not traj.hit_length_budget


def test_all_pending_queries_of_a_batch_go_in_one_retriever_call(tokenizer):
    scripts = [["<search>Entity1</search>", "<answer>a</answer>"],
               ["<answer>b</answer>"],
               ["<search>Entity3</search>", "<search>Entity4</search>", "<answer>c</answer>"]]
    trajs, retriever = _run(tokenizer, scripts)
    assert retriever.calls == [["Entity1", "Entity3"], ["Entity4"]]
    assert [t.num_searches for t in trajs] == [1, 0, 2]


def test_search_budget_gives_a_notice_not_a_search(tokenizer):
    scripts = [["<search>Entity1</search>", "<search>Entity2</search>", "<answer>x</answer>"]]
    (traj,), retriever = _run(tokenizer, scripts, max_searches=1)
    assert traj.num_searches == 1 and traj.hit_search_budget
    assert retriever.calls == [["Entity1"]]
    text = tokenizer.decode(traj.completion_ids)
    assert "Search budget used up" in text


@pytest.mark.parametrize("query,reason", [("<search>  </search>", "Empty query"), ("<search>" + "x" * 50 + "</search>",
                                                                                    "longer than")])
def test_invalid_queries_are_counted_and_answered(tokenizer, query, reason):
    (traj,), retriever = _run(tokenizer, [[query, "<answer>x</answer>"]], max_query_chars=20)
    assert traj.invalid_queries == 1 and traj.num_searches == 0 and retriever.calls == []
    assert reason in tokenizer.decode(traj.completion_ids)


def test_length_budget_truncates_observation_and_ends(tokenizer):
    scripts = [["<search>Entity1</search>", "<answer>x</answer>"]]
    first = len(tokenizer(scripts[0][0], add_special_tokens=False)["input_ids"])
    (traj,), _ = _run(tokenizer, scripts, max_completion_tokens=first + 5)
    assert traj.hit_length_budget and traj.finish == "length"
    assert len(traj.completion_ids) == first + 5
    assert traj.env_mask == [1] * first + [0] * 5


def test_cut_turn_stops_at_the_token_completing_the_tag(tokenizer):
    ids = tokenizer("<search>abc</search> trailing words", add_special_tokens=False)["input_ids"]
    out = cut_turn(ids, tokenizer, ["</search>"], {tokenizer.eos_token_id}, budget=100)
    assert out.finish == "stop" and tokenizer.decode(out.token_ids).endswith("</search>")
    padded = tokenizer("<answer>z</answer>", add_special_tokens=False)["input_ids"]
    out = cut_turn(padded + [tokenizer.eos_token_id] * 3, tokenizer, ["</search>"], {tokenizer.eos_token_id}, 100)
    assert out.finish == "eos" and out.token_ids == padded + [tokenizer.eos_token_id]
    out = cut_turn(padded, tokenizer, ["</search>"], {tokenizer.eos_token_id}, budget=2)
    assert out.finish == "length" and len(out.token_ids) == 2


def test_hf_generator_runs_a_real_batched_rollout(tiny_policy):
    model, tokenizer = tiny_policy
    protocol = MiniProtocol()
    gen = HFTurnGenerator(model, tokenizer, protocol.stop_strings, temperature=1.0)
    engine = SearchRollout(protocol, FakeRetriever(), tokenizer, gen, RolloutConfig(max_completion_tokens=24))
    prompts = [tokenizer(protocol.build_prompt(f"q{i}", tokenizer), add_special_tokens=False)["input_ids"]
               for i in range(3)]
    trajs = engine.run(prompts)
    assert len(trajs) == 3
    for t in trajs:
        assert t.done and 0 < len(t.completion_ids) <= 24 and len(t.env_mask) == len(t.completion_ids)
