"""The search rollout engine: turns, batched retrieval, budgets, and the env_mask written where tokens are appended."""

from __future__ import annotations

import re

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


def _forced_run(tokenizer, scripts, explore=True, **cfg):
    retriever = FakeRetriever()
    gen = ScriptedGenerator(tokenizer, scripts, eos_last=False)
    engine = SearchRollout(MiniProtocol(), retriever, tokenizer, gen, RolloutConfig(**cfg), explore=explore)
    prompts = [tokenizer(f"question {i}", add_special_tokens=False)["input_ids"] for i in range(len(scripts))]
    return engine.run(prompts), retriever


def test_forced_searches_send_every_other_early_answer_back_to_search(tokenizer):
    free = ["<search>Entity1</search>", "<think>so</think><answer>a</answer>"]
    forced = ["<search>Entity1</search>", "<think>so</think><answer>a</answer>", " Entity2 </search>",
              "<answer>b</answer>"]
    (kept, sent_back), retriever = _forced_run(tokenizer, [free, forced], forced_searches=2)
    assert kept.num_searches == 1 and kept.forced == 0 and kept.finish == "answer"
    assert sent_back.num_searches == 2 and sent_back.forced == 1 and sent_back.queries == ["Entity1", "Entity2"]
    assert retriever.calls == [["Entity1", "Entity1"], ["Entity2"]]
    text = tokenizer.decode(sent_back.completion_ids)
    # The cut answer is gone; the reasoning before it stays, and the opener follows it.
    assert "<answer>a" not in text and "<think>so</think><search> Entity2 </search>" in text
    assert text.rstrip().endswith("<answer>b</answer>")
    # The opener is environment text: masked like the documents, so the loss never trains the forced choice.
    # (This tokenizer writes "</think><answer>" as ..., "</", "think", "><", "answer", ...: the straddling "><" goes
    # with the answer, and its ">" comes back as environment text.)
    start = len(tokenizer(forced[0], add_special_tokens=False)["input_ids"])
    obs = MiniProtocol().format_observation(retriever.docs[1:2] + retriever.docs[0:1] + retriever.docs[2:3])
    obs_end = start + len(tokenizer(obs, add_special_tokens=False)["input_ids"])
    reasoning = tokenizer("<think>so</think><answer>", add_special_tokens=False)["input_ids"][:6]
    assert tokenizer.decode(reasoning) == "<think>so</think"
    at = obs_end + len(reasoning)
    # The reasoning that led to the cut answer stays as context but is masked: training it with the forced
    # rollout's advantage would teach the thought that ends in answering.
    assert sent_back.completion_ids[obs_end:at] == reasoning and sent_back.env_mask[obs_end:at] == [0] * len(reasoning)
    opener = tokenizer(">" + "<search>", add_special_tokens=False)["input_ids"]
    assert sent_back.completion_ids[at: at + len(opener)] == opener
    assert sent_back.env_mask[at: at + len(opener)] == [0] * len(opener)
    assert sent_back.env_mask[at + len(opener)] == 1  # the query is the model's
    assert sent_back.forced_spans == [(obs_end, at + len(opener))] and kept.forced_spans == []
    assert len(sent_back.env_mask) == len(sent_back.completion_ids)


def test_forced_searches_leave_rollouts_that_searched_enough_and_evaluation_alone(tokenizer):
    enough = ["<search>Entity1</search>", "<search>Entity2</search>", "<answer>a</answer>"]
    early = ["<search>Entity1</search>", "<answer>a</answer>"]
    trajs, _ = _forced_run(tokenizer, [early, enough], forced_searches=2)
    assert [t.forced for t in trajs] == [0, 0] and [t.num_searches for t in trajs] == [1, 2]
    # Without explore (every engine but the trainer's), the setting does nothing.
    trajs, _ = _forced_run(tokenizer, [early, early], explore=False, forced_searches=2)
    assert [t.forced for t in trajs] == [0, 0] and [t.num_searches for t in trajs] == [1, 1]


def test_forced_searches_cannot_exceed_the_search_budget():
    with pytest.raises(ValueError, match="forced_searches"):
        RolloutConfig(max_searches=1, forced_searches=2)


def test_train_forced_opener_trains_the_opener_and_keeps_the_reasoning_masked(tokenizer):
    free = ["<search>Entity1</search>", "<think>so</think><answer>a</answer>"]
    forced = ["<search>Entity1</search>", "<think>so</think><answer>a</answer>", " Entity2 </search>",
              "<answer>b</answer>"]
    (_, masked), _ = _forced_run(tokenizer, [free, forced], forced_searches=2)
    (_, trained), _ = _forced_run(tokenizer, [free, forced], forced_searches=2, train_forced_opener=True)
    assert trained.completion_ids == masked.completion_ids  # the same rollout; only the loss mask differs
    (start, end), = masked.forced_spans
    (t_start, reasoning_end), = trained.forced_spans
    assert t_start == start and start < reasoning_end < end
    assert tokenizer.decode(trained.completion_ids[start:reasoning_end]) == "<think>so</think"
    assert trained.env_mask[start:reasoning_end] == [0] * (reasoning_end - start)  # the thought that led to answering
    assert tokenizer.decode(trained.completion_ids[reasoning_end:end]) == "><search>"
    assert trained.env_mask[reasoning_end:end] == [1] * (end - reasoning_end)  # the choice to search again
    assert masked.env_mask[reasoning_end:end] == [0] * (end - reasoning_end)
    differ = [i for i, (a, b) in enumerate(zip(masked.env_mask, trained.env_mask, strict=True)) if a != b]
    assert differ == list(range(reasoning_end, end))


def test_train_forced_opener_needs_forced_searches():
    with pytest.raises(ValueError, match="train_forced_opener"):
        RolloutConfig(train_forced_opener=True)
    assert RolloutConfig(forced_searches=1, train_forced_opener=True).train_forced_opener


class _ByQuestion:
    """Plays each prompt's own script, found from the prompt's text ("question i"), and records each call's batch."""

    def __init__(self, tokenizer, scripts):
        self.tokenizer, self.scripts, self.turns, self.batches = tokenizer, scripts, {}, []

    def generate_turn(self, sequences, max_new_tokens):
        from searchrl.rollout import TurnOutput

        self.batches.append(len(sequences))
        outs = []
        for seq, budget in zip(sequences, max_new_tokens):
            i = int(re.match(r"\d+", self.tokenizer.decode(seq).split("question ")[1]).group())
            turn = self.turns.get(i, 0)
            self.turns[i] = turn + 1
            ids = self.tokenizer(self.scripts[i][turn], add_special_tokens=False)["input_ids"]
            last = turn + 1 == len(self.scripts[i])
            ids, finish = (ids + [self.tokenizer.eos_token_id], "eos") if last else (ids, "stop")
            outs.append(TurnOutput(ids[:budget], finish if len(ids) <= budget else "length"))
        return outs


def test_rollouts_in_chunks_are_the_rollouts_made_together(tokenizer):
    scripts = [["<search>Entity1</search>", "<answer>a</answer>"], ["<answer>b</answer>"],
               ["<search>Entity3</search>", "<search>Entity4</search>", "<answer>c</answer>"],
               ["<search>Entity2</search>", "<answer>d</answer>"], ["<answer>e</answer>"]]
    prompts = [tokenizer(f"question {i}", add_special_tokens=False)["input_ids"] for i in range(len(scripts))]
    runs = {}
    for chunk in (0, 2):
        gen = _ByQuestion(tokenizer, scripts)
        engine = SearchRollout(MiniProtocol(), FakeRetriever(), tokenizer, gen,
                               RolloutConfig(max_concurrent_rollouts=chunk))
        runs[chunk] = ([(t.completion_ids, t.env_mask, t.num_searches, t.finish) for t in engine.run(prompts)],
                       gen.batches)
    assert runs[2][0] == runs[0][0]  # the same trajectories, row for row
    assert max(runs[0][1]) == 5 and max(runs[2][1]) == 2  # never more than 2 rows generated together
    with pytest.raises(ValueError, match="max_concurrent_rollouts must be >= 0"):
        RolloutConfig(max_concurrent_rollouts=-1)
