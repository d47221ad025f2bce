"""The KV cache kept across the turns of a rollout: same tokens as re-prefilling every turn, fewer tokens fed."""

from __future__ import annotations

import copy
from types import SimpleNamespace

import pytest
import torch

from fakes import FakeRetriever, MiniProtocol
from searchrl.rollout import HFTurnGenerator, RolloutConfig, SearchRollout
from searchrl.rollout.kv_turns import kv_reuse_supported

STOPS = ["</search>", "</answer>"]


@pytest.fixture(scope="module")
def peaky(tiny_policy):
    """The tiny policy with large random weights: its greedy tokens depend on the whole context, with wide margins
    (the plain tiny model greedily repeats one token, which a broken cache would not change)."""
    model, tokenizer = tiny_policy
    model = copy.deepcopy(model)
    generator = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for p in model.parameters():
            if p.dim() > 1:
                p.copy_(torch.randn(p.shape, generator=generator) * 0.5)
    return model, tokenizer


def _prompts(tokenizer, n=4):
    # Different lengths, so the first chunk is left-padded.
    return [tokenizer(f"Question {i}:" + " word" * (3 * i), add_special_tokens=False)["input_ids"] for i in range(n)]


def _three_turns(gen, tokenizer, prompts, budgets=(5, 9, 3, 7)):
    """Turns of different lengths per row, observations of different lengths, and a row dropped after turn 1:
    every way a hole gets into the cache. Returns the turns, and how many tokens the turns after the first must
    feed: per continuing row, its unfed last sampled token and its documents."""
    seqs = [list(p) for p in prompts]
    alive, outputs, appended = list(range(len(prompts))), [], 0
    for turn in range(3):
        res = gen.generate_turn([seqs[i] for i in alive], [budgets[i] + turn for i in alive])
        outputs.append([(r.token_ids, r.finish) for r in res])
        obs = {}
        for i, r in zip(alive, res):
            obs[i] = tokenizer(" <information>doc" + " x" * (2 * i + turn) + "</information>",
                               add_special_tokens=False)["input_ids"]
            seqs[i] += r.token_ids + obs[i]
        if turn == 0:
            alive = [0, 2, 3]
        if turn < 2:
            appended += sum(1 + len(obs[i]) for i in alive)
    return outputs, appended


def test_cached_turns_equal_whole_sequence_generation(peaky):
    model, tokenizer = peaky
    prompts = _prompts(tokenizer)
    cached = HFTurnGenerator(model, tokenizer, STOPS, greedy=True, reuse_cache=True)
    whole = HFTurnGenerator(model, tokenizer, STOPS, greedy=True, reuse_cache=False)
    assert cached.kv is not None and whole.kv is None
    got, appended = _three_turns(cached, tokenizer, prompts)
    want, _ = _three_turns(whole, tokenizer, prompts)
    assert got == want
    assert cached.kv.parks >= 2  # rows that finished early were set aside in turns 1 and 2, and came back
    # Each prompt was fed once; later turns fed only the last sampled token and the documents of each live row.
    assert cached.kv.prefilled_tokens == sum(map(len, prompts)) + appended


def test_the_sampler_draws_from_the_filtered_distribution(tiny_policy):
    model, tokenizer = tiny_policy
    # A small vocabulary (the sampler does not care) with four likely tokens and four of near-zero probability.
    logits = torch.full((1, 8), -1e4)
    logits[0, :4] = torch.tensor([2.0, 1.0, 0.0, -1.0])
    probs = logits[0, :4].softmax(0)
    n = 20000
    torch.manual_seed(0)
    cases = [({}, probs), ({"top_k": 2}, probs[:2] / probs[:2].sum()),
             ({"top_p": float(probs[0]) + 1e-3}, probs[:2] / probs[:2].sum())]
    for kwargs, want in cases:
        gen = HFTurnGenerator(model, tokenizer, STOPS, temperature=1.0, **kwargs)
        draws = gen.sample(logits.expand(n, -1))
        assert int(draws.max()) < 4  # never a token of (near) zero probability
        freq = torch.bincount(draws, minlength=4)[: len(want)].double() / n
        assert torch.allclose(freq, want.double(), atol=0.015), (kwargs, freq, want)
        assert freq.sum() > 0.999  # nothing outside the top-k / top-p set


def test_a_stop_string_ends_the_turn_on_the_token_that_completes_it(peaky):
    model, tokenizer = peaky
    prompts = _prompts(tokenizer, 2)
    free = HFTurnGenerator(model, tokenizer, [], greedy=True).generate_turn(prompts, [12, 12])
    # A stop string made of what row 0 writes at tokens 4-5: the turn ends on the first token whose prefix holds it.
    stop = tokenizer.decode(free[0].token_ids[4:6])
    end = next(n for n in range(1, 13) if stop in tokenizer.decode(free[0].token_ids[:n]))
    out = HFTurnGenerator(model, tokenizer, [stop], greedy=True).generate_turn(prompts, [12, 12])
    assert (out[0].token_ids, out[0].finish) == (free[0].token_ids[:end], "stop")
    row1_end = next((n for n in range(1, 13) if stop in tokenizer.decode(free[1].token_ids[:n])), None)
    assert out[1].token_ids == free[1].token_ids[:row1_end or 12]


def test_top_k_1_and_tiny_top_p_sample_the_greedy_token(tiny_policy):
    model, tokenizer = tiny_policy
    logits = torch.randn(5, tokenizer.vocab_size)
    for kwargs in ({"top_k": 1}, {"top_p": 1e-9}):
        gen = HFTurnGenerator(model, tokenizer, STOPS, temperature=0.7, reuse_cache=True, **kwargs)
        assert torch.equal(gen.sample(logits), logits.argmax(dim=-1))


def test_engine_drops_the_cache_after_each_rollout(tiny_policy):
    # Weights change between rollouts in training: a cache must never outlive the rollout that built it.
    model, tokenizer = tiny_policy
    protocol = MiniProtocol()
    gen = HFTurnGenerator(model, tokenizer, protocol.stop_strings, greedy=True)
    engine = SearchRollout(protocol, FakeRetriever(), tokenizer, gen, RolloutConfig(max_completion_tokens=16))
    prompts = _prompts(tokenizer, 2)
    first = engine.run(prompts)
    assert gen.kv.batch is None
    second = engine.run(prompts)
    assert [t.completion_ids for t in first] == [t.completion_ids for t in second]


def test_unrelated_sequences_start_a_new_cache(peaky):
    model, tokenizer = peaky
    gen = HFTurnGenerator(model, tokenizer, STOPS, greedy=True)
    gen.generate_turn(_prompts(tokenizer, 2), [3, 3])
    other = [tokenizer("Something else entirely", add_special_tokens=False)["input_ids"]]
    want = HFTurnGenerator(model, tokenizer, STOPS, greedy=True, reuse_cache=False).generate_turn(other, [4])
    assert gen.kv._match(other) is None
    assert gen.generate_turn(other, [4])[0].token_ids == want[0].token_ids


def test_sliding_window_models_fall_back_to_whole_sequence_generation():
    from transformers import LlamaConfig, MistralConfig

    llama = LlamaConfig(hidden_size=16, intermediate_size=32, num_hidden_layers=2, num_attention_heads=2)
    mistral = MistralConfig(hidden_size=16, intermediate_size=32, num_hidden_layers=2, num_attention_heads=2,
                            sliding_window=8)
    assert kv_reuse_supported(SimpleNamespace(config=llama))
    assert not kv_reuse_supported(SimpleNamespace(config=mistral))


def test_a_peft_wrapped_policy_reuses_the_cache_too(peaky):
    from peft import LoraConfig, get_peft_model

    model, tokenizer = peaky
    peft_model = get_peft_model(copy.deepcopy(model), LoraConfig(r=4, target_modules=["q_proj", "v_proj"]))
    cached = HFTurnGenerator(peft_model, tokenizer, STOPS, greedy=True)
    assert cached.kv is not None and cached.kv.keep_last_logits
    want = HFTurnGenerator(peft_model, tokenizer, STOPS, greedy=True, reuse_cache=False)
    prompts = _prompts(tokenizer)
    assert _three_turns(cached, tokenizer, prompts)[0] == _three_turns(want, tokenizer, prompts)[0]


@pytest.mark.parametrize("wrap", [False, True], ids=["plain", "peft"])
def test_cached_turns_pass_the_cache_by_its_current_name(peaky, wrap):
    # transformers 5.x renamed `past_key_values` to `cache` and warns on every call made with the old name: one
    # warning per decoded token floods a rollout's log.
    import warnings

    from peft import LoraConfig, get_peft_model

    model, tokenizer = peaky
    if wrap:
        model = get_peft_model(copy.deepcopy(model), LoraConfig(r=4, target_modules=["q_proj", "v_proj"]))
    gen = HFTurnGenerator(model, tokenizer, STOPS, greedy=True)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        gen.generate_turn(_prompts(tokenizer, 2), [4, 4])
    assert not [w for w in caught if "past_key_values" in str(w.message)]



def test_repeated_prompts_are_prefilled_once(peaky):
    # GRPO sends each prompt num_generations times: one prefill each, the cache rows copied.
    model, tokenizer = peaky
    distinct = _prompts(tokenizer, 2)
    prompts = [distinct[0], distinct[1], distinct[0], distinct[0]]
    cached = HFTurnGenerator(model, tokenizer, STOPS, greedy=True)
    whole = HFTurnGenerator(model, tokenizer, STOPS, greedy=True, reuse_cache=False)
    got, appended = _three_turns(cached, tokenizer, prompts)
    assert got == _three_turns(whole, tokenizer, prompts)[0]
    assert cached.kv.prefilled_tokens == sum(map(len, distinct)) + appended


def test_prompts_with_a_common_opening_prefill_it_once(peaky):
    # Every prompt opens with the protocol's instructions: they are fed once and their cache rows copied.
    from searchrl.rollout.kv_turns import MIN_SHARED_PREFIX, common_prefix_length

    model, tokenizer = peaky
    opening = tokenizer(" Instructions:" + " read" * 30, add_special_tokens=False)["input_ids"]
    assert len(opening) >= MIN_SHARED_PREFIX
    distinct = [opening + p for p in _prompts(tokenizer, 3)]
    prompts = [distinct[0], distinct[1], distinct[2], distinct[0]]
    shared = common_prefix_length(distinct)
    assert shared >= len(opening)
    cached = HFTurnGenerator(model, tokenizer, STOPS, greedy=True)
    unshared = HFTurnGenerator(model, tokenizer, STOPS, greedy=True)
    unshared.kv.share_prefix = False
    whole = HFTurnGenerator(model, tokenizer, STOPS, greedy=True, reuse_cache=False)
    got, appended = _three_turns(cached, tokenizer, prompts)
    assert got == _three_turns(whole, tokenizer, prompts)[0] == _three_turns(unshared, tokenizer, prompts)[0]
    assert cached.kv.prefilled_tokens == shared + sum(len(p) - shared for p in distinct) + appended
    assert unshared.kv.prefilled_tokens == sum(map(len, distinct)) + appended


def test_common_prefix_length():
    from searchrl.rollout.kv_turns import common_prefix_length

    assert common_prefix_length([[1, 2, 3], [1, 2, 4], [1, 2]]) == 2
    assert common_prefix_length([[5, 1], [1, 5]]) == 0
    assert common_prefix_length([[7, 8, 9]]) == 3
    assert common_prefix_length([]) == 0


def test_the_sampler_takes_one_temperature_per_row(tiny_policy):
    model, tokenizer = tiny_policy
    logits = torch.zeros(2, 8)
    logits[:, :4] = torch.tensor([3.0, 2.0, 1.0, 0.0])
    gen = HFTurnGenerator(model, tokenizer, STOPS, temperature=1.0)
    torch.manual_seed(0)
    draws = torch.stack([gen.sample(logits, [1e-4, 100.0]) for _ in range(4000)])
    assert (draws[:, 0] == 0).all()  # nearly greedy
    spread = torch.bincount(draws[:, 1], minlength=8).double() / 4000
    assert torch.allclose(spread, torch.full((8,), 1 / 8, dtype=torch.double), atol=0.03)  # nearly uniform


class _Scripted:
    """A sampler that writes a fixed text on every row and records the temperatures it was asked to use."""

    temperature = 0.5

    def __init__(self, ids):
        self.ids, self.step, self.asked = ids, 0, []

    def __call__(self, logits, temperatures=None):
        self.asked.append(temperatures)
        token = self.ids[min(self.step, len(self.ids) - 1)]
        self.step += 1
        return torch.full((logits.size(0),), token, dtype=torch.long)


@pytest.mark.parametrize("forced", [False, True], ids=["own-opener", "forced-opener"])
def test_the_query_span_is_sampled_at_query_temperature(tiny_policy, forced):
    model, tokenizer = tiny_policy
    gen = HFTurnGenerator(model, tokenizer, STOPS, temperature=0.5, query_span=("<search>", "</search>"),
                          query_temperature=1.5)
    assert gen.kv is not None and gen.kv.query_span == ("<search>", "</search>")
    prompt = tokenizer("Question: where? <search>" if forced else "Question: where?", add_special_tokens=False)
    text = " capital of France </search> more" if forced else " I need a fact. <search> capital of France </search>"
    ids = tokenizer(text, add_special_tokens=False)["input_ids"]
    gen.kv.sample = scripted = _Scripted(ids)
    out = gen.generate_turn([prompt["input_ids"]] * 2, [len(ids) + 5] * 2)
    assert out[0].finish == "stop" and tokenizer.decode(out[0].token_ids).endswith("</search>")
    # Token k is drawn hot exactly when the text before it holds an unclosed opener.
    before = prompt["input_ids"][-gen.kv.tail_tokens:] if forced else []
    want = [[1.5, 1.5] if "<search>" in tokenizer.decode(before + ids[:k]) else [0.5, 0.5]
            for k in range(len(out[0].token_ids))]
    assert scripted.asked == want
    assert any(t == [0.5, 0.5] for t in want) != forced and any(t == [1.5, 1.5] for t in want)


def test_query_temperature_applies_only_where_it_can(tiny_policy):
    model, tokenizer = tiny_policy
    span = ("<search>", "</search>")
    rollout = RolloutConfig(temperature=0.7, query_temperature=1.3)
    # Evaluation names no span, and greedy decoding has no temperature: both sample as before.
    assert HFTurnGenerator.from_rollout(model, tokenizer, STOPS, rollout).kv.query_span is None
    assert HFTurnGenerator.from_rollout(model, tokenizer, STOPS, rollout, greedy=True, query_span=span).kv.query_span is None
    assert HFTurnGenerator.from_rollout(model, tokenizer, STOPS, rollout, query_span=span).kv.query_span == span
    with pytest.raises(ValueError, match="cached generator"):
        HFTurnGenerator.from_rollout(model, tokenizer, STOPS, rollout, reuse_cache=False, query_span=span)
    with pytest.raises(ValueError, match="query_temperature"):
        RolloutConfig(query_temperature=-1.0)
