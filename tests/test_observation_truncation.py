"""max_observation_tokens: each block of documents is cut where the engine appends it, and the mask stays exact."""

from __future__ import annotations

import pytest

from fakes import FakeRetriever, MiniProtocol, ScriptedGenerator
from searchrl.config import RunConfig
from searchrl.rollout import RolloutConfig, SearchRollout

SCRIPT = ["<think>need it</think><search>Entity2 founded</search>", "<answer>1902</answer>"]


def _run(tokenizer, scripts, **cfg):
    retriever = FakeRetriever()
    engine = SearchRollout(MiniProtocol(), retriever, tokenizer, ScriptedGenerator(tokenizer, scripts),
                           RolloutConfig(**cfg))
    prompts = [tokenizer(f"question {i}", add_special_tokens=False)["input_ids"] for i in range(len(scripts))]
    return engine.run(prompts), engine, retriever


def _encode(tokenizer, text):
    return tokenizer(text, add_special_tokens=False)["input_ids"]


def _observation_span(tokenizer, traj):
    """[start, end) of the first run of environment tokens (the observation after turn 1)."""
    start = traj.env_mask.index(0)
    end = start
    while end < len(traj.env_mask) and traj.env_mask[end] == 0:
        end += 1
    return start, end


def test_zero_and_a_large_limit_change_nothing(tokenizer):
    (plain,), _, _ = _run(tokenizer, [SCRIPT], top_k=3)
    for limit in (0, 10_000):
        (traj,), engine, _ = _run(tokenizer, [SCRIPT], top_k=3, max_observation_tokens=limit)
        assert traj.completion_ids == plain.completion_ids and traj.env_mask == plain.env_mask
        assert traj.truncated_observations == 0 and engine.truncated_observations == 0


@pytest.mark.parametrize("limit", [20, 30])
def test_a_long_block_is_cut_to_the_limit_inside_its_tags(tokenizer, limit):
    (plain,), _, retriever = _run(tokenizer, [SCRIPT], top_k=3)
    (traj,), engine, _ = _run(tokenizer, [SCRIPT], top_k=3, max_observation_tokens=limit)
    whole = _encode(tokenizer, MiniProtocol().format_observation(retriever.docs[2:3] + retriever.docs[0:2]))
    assert len(whole) > limit  # the block would not fit: it is cut
    first = _encode(tokenizer, SCRIPT[0])
    start, end = _observation_span(tokenizer, traj)
    # the mask's zeros cover exactly the appended block, which holds exactly `limit` tokens
    assert (start, end - start) == (len(first), limit)
    assert traj.env_mask[:start] == [1] * start and all(m == 1 for m in traj.env_mask[end:])
    assert len(traj.env_mask) == len(traj.completion_ids) == len(traj.logprobs)
    block = tokenizer.decode(traj.completion_ids[start:end])
    assert block.startswith("\n\n<information>") and block.endswith("</information>\n\n")
    assert "Doc 1(Title: Entity2)" in block and "Entity1 was founded" not in block  # the end was cut, not the start
    # the answer turn follows the cut block unchanged
    answer = _encode(tokenizer, SCRIPT[1])
    assert traj.completion_ids[end:end + len(answer)] == answer
    assert traj.truncated_observations == 1 and engine.truncated_observations == 1
    assert traj.doc_ids == plain.doc_ids  # what was retrieved is recorded whole


def test_a_limit_below_the_tags_cuts_the_block_itself(tokenizer):
    (traj,), _, _ = _run(tokenizer, [SCRIPT], top_k=3, max_observation_tokens=3)
    start, end = _observation_span(tokenizer, traj)
    assert end - start == 3 and traj.truncated_observations == 1


def test_notices_are_never_cut(tokenizer):
    scripts = [["<search>Entity1</search>", "<search>Entity2</search>", "<answer>x</answer>"]]
    (traj,), _, _ = _run(tokenizer, scripts, top_k=1, max_searches=1, max_observation_tokens=8)
    notice = MiniProtocol().invalid_query_observation(RolloutConfig().budget_notice)
    assert len(_encode(tokenizer, notice)) > 8
    assert RolloutConfig().budget_notice in tokenizer.decode(traj.completion_ids)
    assert traj.hit_search_budget and traj.truncated_observations == 1  # only the block of documents


def test_every_row_of_a_batch_is_cut_alike(tokenizer):
    scripts = [SCRIPT, ["<answer>b</answer>"], ["<search>Entity3</search>", "<search>Entity4</search>",
                                                "<answer>c</answer>"]]
    trajs, _, _ = _run(tokenizer, scripts, top_k=3, max_observation_tokens=15)
    assert [t.truncated_observations for t in trajs] == [1, 0, 2]
    for traj in trajs:
        assert len(traj.env_mask) == len(traj.completion_ids)
        zeros, run = [], 0
        for m in traj.env_mask + [1]:
            if m == 0:
                run += 1
            elif run:
                zeros.append(run)
                run = 0
        assert all(length == 15 for length in zeros)


def test_the_setting_is_a_rollout_setting():
    cfg = RunConfig(max_observation_tokens=500)
    assert cfg.rollout_config().max_observation_tokens == 500
    assert RolloutConfig().max_observation_tokens == 0
    with pytest.raises(Exception, match="max_observation_tokens"):
        RolloutConfig(max_observation_tokens=-1)


@pytest.mark.parametrize("limit", [0, 20, 30])
def test_a_written_demonstration_is_cut_as_the_rollout_is(tokenizer, limit):
    """The cold start's templated observations are cut by the same rule, so SFT shows the blocks RL will show."""
    from searchrl.data.tokenize import IGNORE_INDEX, tokenize_sft

    (traj,), _, retriever = _run(tokenizer, [SCRIPT], top_k=3, max_observation_tokens=limit)
    protocol = MiniProtocol()
    observation = protocol.format_observation(retriever.docs[2:3] + retriever.docs[0:2])
    item = {"prompt": "question 0", "segments": [(SCRIPT[0], True), (observation, False), (SCRIPT[1], True)]}
    row = tokenize_sft([item], tokenizer, max_observation_tokens=limit,
                       observation_frame=protocol.observation_frame())[0]
    prompt = len(_encode(tokenizer, "question 0"))
    completion = row["input_ids"][prompt:prompt + len(traj.completion_ids)]
    assert completion == traj.completion_ids  # token for token what the engine appended, cut or not
    masked = [label == IGNORE_INDEX for label in row["labels"][prompt:prompt + len(traj.completion_ids)]]
    assert masked == [m == 0 for m in traj.env_mask]
