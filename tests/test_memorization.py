"""R1-Searcher++'s memorization loss: the rewrite check, the NLL (value and where its gradient goes), the trainer's
loss with the term off (unchanged) and on (RL loss + mu * NLL), and short trainer runs that log its metrics."""

from __future__ import annotations

import dataclasses
import json
import math

import pytest
import torch
import torch.nn.functional as F
from trl import GRPOTrainer

from fakes import FakeRetriever, ScriptedGenerator
from searchrl.config import RunConfig
from searchrl.config.memorization import MemorizationConfig, memorization_problems
from searchrl.protocols import get_protocol
from searchrl.protocols.r1_searcher_pp import R1SearcherPPProtocol
from searchrl.retrieval.base import Doc
from searchrl.rollout import RolloutConfig, SearchRollout
from searchrl.rollout.engine import EMPTY_QUERY_NOTICE, engine_notices
from searchrl.trainer import SearchGRPOConfig, SearchGRPOTrainer, prompt_dataset
from searchrl.trainer.arguments import grpo_args
from searchrl.trainer.levers.memorization import (
    MemorizationExample,
    masked_nll,
    memorization_batch,
    memorization_nll,
    split_round_robin,
    tokenize_rewrite,
)
from searchrl.trainer.levers.rewrites import (
    Candidate,
    answer_checker,
    best_sentence,
    check_rewrite,
    extractive_rewrite,
    observation_texts,
    retrieved_documents,
    rewrite_candidate,
    rewrite_prompt,
)
from test_trainer_masks import varied_reward

PP = get_protocol("r1_searcher_pp")


class ShortPromptPP(R1SearcherPPProtocol):
    """R1-Searcher++'s tags and parser with a one-line prompt: trainer tests run on short sequences."""

    system_prompt = "Search or recall, then answer in \\boxed{}. Question: {question}"


SHORT = ShortPromptPP()
IS_CORRECT = answer_checker(PP)
GOOD = ("First, when was Entity1 founded? <|begin_internal_answer|>I remember that Entity1 was founded in 1901."
        "<|end_internal_answer|> So the answer is \\boxed{1901}.")


# ---- settings ------------------------------------------------------------------------------------------------------


def test_settings_are_off_by_default_and_bad_values_are_named():
    assert not MemorizationConfig().memorization_on and MemorizationConfig(memorization_coef=0.1).memorization_on
    bad = {**MemorizationConfig().memorization_dict(), "memorization_coef": -0.1, "rewrite_batch_size": 0,
           "max_rewrites_per_step": -1, "rewrite_model": 3}
    assert sorted(k for k, _ in memorization_problems(bad)) == [
        "max_rewrites_per_step", "memorization_coef", "rewrite_batch_size", "rewrite_model"]
    with pytest.raises(ValueError, match="memorization_coef"):
        MemorizationConfig(memorization_coef=-1.0)


def test_grpo_args_pass_the_settings_object_through(tmp_path):
    assert grpo_args(RunConfig(), tmp_path).memorization == MemorizationConfig()  # RunConfig without the section

    @dataclasses.dataclass(frozen=True)
    class WithMemorization(RunConfig, MemorizationConfig):  # what RunConfig becomes once it inherits the section
        pass

    args = grpo_args(WithMemorization(memorization_coef=0.1, rewrite_max_new_tokens=64), tmp_path)
    assert args.memorization == MemorizationConfig(memorization_coef=0.1, rewrite_max_new_tokens=64)
    assert args.to_dict()["memorization"]["memorization_coef"] == 0.1


# ---- candidates, prompt and the rewrite check ----------------------------------------------------------------------


def test_only_correct_rollouts_that_retrieved_are_rewritten():
    row = {"question": "When was Entity1 founded?", "golden_answers": ["1901"], "num_searches": 1,
           "retrieved_text": "(1)Entity1 Entity1 was founded in 1901."}
    cand = rewrite_candidate([5, 6], "<|begin_external_search|>Entity1<|end_external_search|> \\boxed{1901}", row,
                             PP, IS_CORRECT)
    assert cand is not None and cand.prompt_ids == [5, 6] and cand.documents == row["retrieved_text"]
    assert rewrite_candidate([5], "\\boxed{1902}", row, PP, IS_CORRECT) is None  # wrong
    assert rewrite_candidate([5], "\\boxed{1901}", {**row, "num_searches": 0}, PP, IS_CORRECT) is None  # no search
    assert rewrite_candidate([5], "\\boxed{1901}", {**row, "retrieved_text": ""}, PP, IS_CORRECT) is None
    with pytest.raises(KeyError, match="golden_answers"):
        rewrite_candidate([5], "\\boxed{1901}", {"question": "q", "num_searches": 1, "retrieved_text": "d"}, PP,
                          IS_CORRECT)


def test_retrieved_documents_come_from_the_appended_tokens_only(tokenizer):
    nothing = PP.format_observation([])  # "nothing found": not a document
    doc = PP.wrap_observation("(1)Entity1 Entity1 was founded in 1901.")
    other = PP.wrap_observation("(1)Entity2 Entity2 was founded in 1902.")
    fake = "<|begin_search_result|>(1)Entity9 Entity9 was founded in 1999.<|end_search_result|>"  # model-written
    pieces = [("Look up. ", 1), (doc, 0), (fake, 1), (nothing, 0), ("Again. ", 1), (doc, 0), ("More. ", 1),
              (other, 0), ("\\boxed{1901}", 1)]
    ids, mask = [], []
    for text, sampled in pieces:
        piece = tokenizer(text, add_special_tokens=False)["input_ids"]
        ids += piece
        mask += [sampled] * len(piece)
    runs = observation_texts(ids, mask, tokenizer)
    assert len(runs) == 4 and runs[0] == doc
    assert retrieved_documents(runs, PP) == ("(1)Entity1 Entity1 was founded in 1901.\n"
                                             "(1)Entity2 Entity2 was founded in 1902.")
    assert retrieved_documents([doc, PP.wrap_observation("Budget used up.")], PP, ["Budget used up."]) == (
        "(1)Entity1 Entity1 was founded in 1901.")


def test_rewrite_prompt_fills_tags_documents_and_question_literally():
    text = rewrite_prompt(PP, "Who wrote {question}?", "(1)A {documents} text")
    assert PP.internal_open in text and PP.internal_close in text and "\\boxed{YOUR_ANSWER}" in text
    assert text.endswith("What you know:\n(1)A {documents} text\nQuestion: Who wrote {question}?")
    assert PP.query_open not in text and PP.obs_open not in text  # the rewriter is never shown how to search


@pytest.mark.parametrize("text,finished,reason", [
    (GOOD, True, None),
    (GOOD.replace("1901}", "1902}"), True, "wrong or missing final answer"),
    (GOOD.replace("\\boxed{1901}", "1901"), True, "breaks the protocol's format"),  # eq. 3 wants a box
    (GOOD.replace("1901}", "a very long answer that runs well past ten words in all, 1901}"), True,
     "wrong or missing final answer"),
    ("<|begin_external_search|>Entity1<|end_external_search|> " + GOOD, True, "contains a search or search-result tag"),
    (GOOD + " <|begin_search_result|>(1)Entity1<|end_search_result|>", True, "contains a search or search-result tag"),
    (GOOD.replace("I remember", "The search results say"), True, "mentions an outside source"),
    ("Entity1 was founded in 1901, so \\boxed{1901}.", True, "no internal-answer span"),
    (GOOD, False, "cut off by rewrite_max_new_tokens"),
], ids=["kept", "wrong", "no-box", "too-long", "search-tag", "result-tag", "source", "no-internal", "cut-off"])
def test_check_rewrite(text, finished, reason):
    assert check_rewrite(text, finished, ["1901"], PP, IS_CORRECT) == reason


# ---- the NLL ---------------------------------------------------------------------------------------------------------


def test_nll_equals_the_hand_computed_cross_entropy_mean():
    # Vocabulary of 3; logits log([1, 1, 2]) give p = [1/4, 1/4, 1/2]. Row 0 is prompt token 0, then completion
    # tokens 2 and 0: -log p = log 2 and log 4. Row 1: prompt 1, 1, completion 2: log 2. Its last logit (position 2)
    # and row 0's predict nothing. Mean over the 3 completion tokens: (log 2 + log 4 + log 2) / 3 = 4/3 log 2.
    logits = torch.log(torch.tensor([1.0, 1.0, 2.0])).expand(2, 3, 3).clone()
    logits[1, 0] = torch.tensor([9.0, -9.0, 0.0])  # predicts row 1's second prompt token: not a target
    ids = torch.tensor([[0, 2, 0], [1, 1, 2]])
    mask = torch.tensor([[0, 1, 1], [0, 0, 1]])
    total, count = masked_nll(logits, ids, mask)
    assert count.item() == 3
    assert total.item() == pytest.approx(4 * math.log(2), rel=1e-6)
    assert (total / count).item() == pytest.approx(4 / 3 * math.log(2), rel=1e-6)
    # Logits covering only the last two positions line up with the end: row 0 loses its first target (log 2).
    total_tail, count_tail = masked_nll(logits[:, 1:], ids, mask)
    assert count_tail.item() == 2 and total_tail.item() == pytest.approx(3 * math.log(2), rel=1e-6)  # log 4 + log 2


def test_batch_masks_prompts_and_padding():
    batch = memorization_batch([MemorizationExample([7, 8, 9], [4, 5]), MemorizationExample([3], [6, 2, 1])], 0)
    assert batch["input_ids"].tolist() == [[7, 8, 9, 4, 5, 0], [0, 0, 3, 6, 2, 1]]
    assert batch["attention_mask"].tolist() == [[1, 1, 1, 1, 1, 0], [0, 0, 1, 1, 1, 1]]
    assert batch["loss_mask"].tolist() == [[0, 0, 0, 1, 1, 0], [0, 0, 0, 1, 1, 1]]
    assert split_round_robin([1, 2, 3], 2) == [[1, 3], [2]]


def test_nll_gradient_reaches_only_the_rewritten_completion_tokens(tiny_policy, tokenizer):
    model = tiny_policy[0]
    prompt_a = tokenizer("Question: when was Entity1 founded?", add_special_tokens=False)["input_ids"]
    prompt_b = tokenizer("Question: who?", add_special_tokens=False)["input_ids"]
    examples = [tokenize_rewrite(prompt_a, GOOD, tokenizer), tokenize_rewrite(prompt_b, "\\boxed{x}", tokenizer)]
    assert examples[0].completion_ids[-1] == tokenizer.eos_token_id
    batch = memorization_batch(examples, tokenizer.pad_token_id)
    # A third row that is not a rewrite (a rollout, say) in the same forward pass: mask 0 everywhere.
    other = memorization_batch([MemorizationExample(prompt_b, examples[1].completion_ids)], tokenizer.pad_token_id)
    width = batch["input_ids"].size(1)
    ids = torch.cat([batch["input_ids"], F.pad(other["input_ids"], (width - other["input_ids"].size(1), 0),
                                               value=tokenizer.pad_token_id)])
    attention = torch.cat([batch["attention_mask"], F.pad(other["attention_mask"],
                                                          (width - other["attention_mask"].size(1), 0))])
    loss_mask = torch.cat([batch["loss_mask"], torch.zeros_like(batch["loss_mask"][:1])])

    logits = model(input_ids=ids, attention_mask=attention).logits
    logits.retain_grad()
    total, count = masked_nll(logits, ids, loss_mask)
    (total / count).backward()

    # By hand: d(mean NLL)/d logits[b, t] = (softmax(logits[b, t]) - onehot(ids[b, t + 1])) / count where
    # ids[b, t + 1] is a rewritten completion token, and exactly 0 everywhere else.
    target_mask = torch.zeros_like(loss_mask, dtype=torch.bool)
    target_mask[:, :-1] = loss_mask[:, 1:].bool()
    expected = torch.zeros_like(logits)
    probs = logits.detach().softmax(-1)
    for b, t in target_mask.nonzero().tolist():
        expected[b, t] = probs[b, t]
        expected[b, t, ids[b, t + 1]] -= 1
    expected /= count
    assert torch.allclose(logits.grad, expected, atol=1e-7)
    assert torch.all(logits.grad[~target_mask] == 0)  # prompts, padding, the last token, the other sequence
    assert torch.all(logits.grad[2] == 0)
    assert torch.all(logits.grad[target_mask].abs().sum(-1) > 0)
    # The loss the trainer uses (logits only from the last prompt position on) gives the same value.
    model.zero_grad()
    with torch.no_grad():
        fast_total, fast_count = memorization_nll(model, batch)
        full_total, full_count = masked_nll(model(input_ids=batch["input_ids"],
                                                  attention_mask=batch["attention_mask"]).logits,
                                            batch["input_ids"], batch["loss_mask"])
    assert fast_count == full_count == sum(len(e.completion_ids) for e in examples)
    assert torch.allclose(fast_total, full_total, rtol=1e-5)


# ---- the extractive rewrite ---------------------------------------------------------------------------------------


def two_search_rollout(first_reading="Vezine Dellir was born in Tebravend. Now its country. "):
    born = [Doc("a", "Vezine Dellir", "Vezine Dellir was born in the year 1871. Vezine Dellir was born in Tebravend."),
            Doc("b", "Rina Dellir", "Bo Dellir was the father of Rina Dellir.")]
    country = [Doc("c", "Tebravend", "Tebravend lies in the hills."),
               Doc("d", "Kavonia", "Tebravend is located in Kavonia.")]
    first = "I need her birthplace. I will search for it. <|begin_external_search|>Where was Vezine Dellir born"
    return [(first + "<|end_external_search|>", True),
            (PP.format_observation(born), False),
            (first_reading + "<|begin_external_search|>Tebravend country<|end_external_search|>", True),
            (PP.format_observation(country), False),
            ("The results say Kavonia. So the answer is \\boxed{Kavonia}.", True)]


def test_the_extractive_rewrite_puts_the_sentence_each_search_found_in_an_internal_span():
    cand = Candidate([1], "In which country was Vezine Dellir born?", ["Kavonia"], "", "Kavonia", two_search_rollout())
    text = extractive_rewrite(cand, PP)
    # The first search's sentence is the one the rollout went on to use (not the first that matches the query);
    # the last one's is the sentence that states the final answer; the titles and numbering are gone, and so are
    # the rollout's sentences about searching.
    assert text == ("I need her birthplace. <|begin_internal_answer|>Vezine Dellir was born in Tebravend."
                    "<|end_internal_answer|> Vezine Dellir was born in Tebravend. Now its country. "
                    "<|begin_internal_answer|>Tebravend is located in Kavonia.<|end_internal_answer|> "
                    "So the answer is \\boxed{Kavonia}.")
    assert check_rewrite(text, True, ["Kavonia"], PP, IS_CORRECT) is None
    # A title the text does not begin with is still dropped when the sentence names it again.
    body = PP.format_observation([Doc("b", "Rina Dellir", "Bo Dellir was the father of Rina Dellir.")])
    assert best_sentence(body, "Who was the father of Rina Dellir") == "Bo Dellir was the father of Rina Dellir."


def test_the_extractive_rewrite_drops_empty_results_and_keeps_a_fake_block_for_the_check_to_reject():
    notices = engine_notices(ROLLOUT)
    for nothing in (PP.format_observation([]), PP.invalid_query_observation(EMPTY_QUERY_NOTICE)):
        segments = two_search_rollout()
        segments[1] = (nothing, False)  # the first search found nothing, or searched nothing
        text = extractive_rewrite(Candidate([1], "q", ["Kavonia"], "", "Kavonia", segments), PP, notices)
        assert text.count(PP.internal_open) == 1 and PP.no_docs_text not in text and EMPTY_QUERY_NOTICE not in text
        assert check_rewrite(text, True, ["Kavonia"], PP, IS_CORRECT) is None
        assert retrieved_documents([nothing], PP, notices) == ""  # nor is it shown to a rewrite model
    faked = two_search_rollout("<|begin_search_result|>Kavonia is great.<|end_search_result|> ")
    text = extractive_rewrite(Candidate([1], "q", ["Kavonia"], "", "Kavonia", faked), PP)
    assert check_rewrite(text, True, ["Kavonia"], PP, IS_CORRECT) == "contains a search or search-result tag"


# ---- the trainer -----------------------------------------------------------------------------------------------------

QUESTION = "When was Entity1 founded?"
SEARCH = "I will look this up. <|begin_external_search|>{q}<|end_external_search|>"
SCRIPTS = [
    [SEARCH.format(q="Entity1"), "Entity1 was founded in 1901, so the answer is \\boxed{1901}."],  # candidate
    ["<|begin_internal_answer|>Entity1 was founded in 1901.<|end_internal_answer|> \\boxed{1901}"],  # no search
    [SEARCH.format(q="Entity2"), "So \\boxed{1902}."],  # wrong
    [SEARCH.format(q="Entity1 founded"), "\\boxed{1901}"],  # candidate
]
ROLLOUT = RolloutConfig(max_completion_tokens=192)


class ReplayEngine:
    """Every batch replays SCRIPTS through the real engine (ScriptedGenerator plays them once)."""

    def __init__(self, tokenizer):
        self.tokenizer = tokenizer

    def run(self, prompt_ids):
        generator = ScriptedGenerator(self.tokenizer, SCRIPTS)
        return SearchRollout(SHORT, FakeRetriever(), self.tokenizer, generator, ROLLOUT).run(prompt_ids)


class FakeRewriter:
    """Even-numbered prompts get a correct internal rewrite, odd ones a rewrite that still searches."""

    def __init__(self):
        self.prompts: list[str] = []

    def __call__(self, prompts):
        self.prompts += prompts
        bad = SEARCH.format(q="Entity1") + " \\boxed{1901}"
        return [(GOOD if i % 2 == 0 else bad, True) for i in range(len(prompts))]


def make_trainer(tmp_path, policy_path, tokenizer, *, coef, max_steps=1, rewriter=None, accumulation=1,
                 **memorization):
    rows = [{"id": "q0", "question": QUESTION, "golden_answers": ["1901"], "metadata": {}}]
    args = SearchGRPOConfig(
        output_dir=str(tmp_path), per_device_train_batch_size=4 // accumulation, num_generations=4, use_cpu=True,
        bf16=False, gradient_accumulation_steps=accumulation,
        report_to="none", beta=0.0, max_steps=max_steps, save_strategy="no", logging_steps=1, seed=0,
        rollout=ROLLOUT,
        memorization=MemorizationConfig(memorization_coef=coef, **memorization),
    )
    trainer = SearchGRPOTrainer(model=str(policy_path), reward_funcs=[varied_reward], args=args,
                                train_dataset=prompt_dataset(rows, SHORT, tokenizer), retriever=FakeRetriever(),
                                protocol=SHORT, processing_class=tokenizer)
    trainer._engine = ReplayEngine(tokenizer)
    if rewriter is not None:
        trainer._rewriter = rewriter
    return trainer, [dict(trainer.train_dataset[0]) for _ in range(4)]


def scored_batch(trainer, inputs):
    trainer.model.train()
    trainer.current_gradient_accumulation_steps = 1  # set by Trainer.train(); we call the loss directly
    return trainer._generate_and_score_completions(inputs)


def test_with_coef_zero_the_loss_is_trls_bit_for_bit(tmp_path, tiny_policy_path, tokenizer):
    trainer, inputs = make_trainer(tmp_path, tiny_policy_path, tokenizer, coef=0.0)
    assert trainer.memorizer is None
    rollout = trainer._search_rollout([inputs[0]["prompt"]] * 4, trainer)
    assert "retrieved_text" not in rollout  # the reward functions see exactly what they saw before
    batch = scored_batch(trainer, inputs)
    torch.manual_seed(0)
    ours = trainer.compute_loss(trainer.model, batch)
    torch.manual_seed(0)
    trls = GRPOTrainer.compute_loss(trainer, trainer.model, batch)
    assert torch.equal(ours, trls)
    assert trainer._memorization_chunks == [] and "memorization/nll" not in trainer._metrics["train"]


def test_with_coef_the_loss_adds_mu_times_the_rewrite_nll(tmp_path, tiny_policy_path, tokenizer):
    rewriter = FakeRewriter()
    trainer, inputs = make_trainer(tmp_path, tiny_policy_path, tokenizer, coef=0.1, rewriter=rewriter)
    batch = scored_batch(trainer, inputs)
    # Rollouts 0 and 3 searched and answered 1901; the rewriter saw their documents, as knowledge, and the question.
    assert len(rewriter.prompts) == 2
    assert all("Entity1 was founded in 1901." in p and p.endswith(f"Question: {QUESTION}") for p in rewriter.prompts)
    assert not any(PP.obs_open in p or PP.query_open in p for p in rewriter.prompts)
    metrics = trainer._metrics["train"]
    assert metrics["memorization/rewrites_tried"] == [2.0] and metrics["memorization/rewrites_kept"] == [1.0]

    # Expected, by hand: the kept rewrite, after the rollout's own prompt, ended by EOS; mean NLL over its tokens.
    prompt = tokenizer(inputs[0]["prompt"], add_special_tokens=False)["input_ids"]
    rewrite = tokenizer(GOOD, add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id]
    ids = torch.tensor([prompt + rewrite])
    with torch.no_grad():
        logits = trainer.model(input_ids=ids).logits[0, len(prompt) - 1 : -1]
    expected_nll = F.cross_entropy(logits, torch.tensor(rewrite)).item()

    # The RL part's gradient on the rollouts' tokens is the same with and without the memorization term.
    captured = []
    original = trainer._get_per_token_logps_and_entropies

    def capture(*args, **kwargs):
        logps, entropies, aux = original(*args, **kwargs)
        logps.retain_grad()
        captured.append(logps)
        return logps, entropies, aux

    trainer._get_per_token_logps_and_entropies = capture
    rl = GRPOTrainer.compute_loss(trainer, trainer.model, batch)
    rl.backward()
    trainer.model.zero_grad()
    total = trainer.compute_loss(trainer.model, batch)
    total.backward()
    assert total.item() == pytest.approx(rl.item() + 0.1 * expected_nll, rel=1e-5)
    assert metrics["memorization/nll"] == [pytest.approx(expected_nll, rel=1e-5)]
    assert torch.equal(captured[0].grad, captured[1].grad)


def test_a_short_run_rewrites_trains_and_logs(tmp_path, tiny_policy_path, tokenizer):
    rewriter = FakeRewriter()
    trainer, _ = make_trainer(tmp_path, tiny_policy_path, tokenizer, coef=0.1, max_steps=2, rewriter=rewriter)
    before = {k: v.detach().clone() for k, v in trainer.model.named_parameters()}
    trainer.train()
    logged = [e for e in trainer.state.log_history if "memorization/rewrites_tried" in e]
    assert len(logged) == 2 and len(rewriter.prompts) == 4
    for entry in logged:
        assert entry["memorization/rewrites_tried"] == 2.0 and entry["memorization/rewrites_kept"] == 1.0
        assert math.isfinite(entry["memorization/nll"]) and entry["memorization/nll"] > 0
    assert any(not torch.equal(before[k], v) for k, v in trainer.model.named_parameters())


def test_with_accumulation_the_rewrites_are_dealt_to_the_micro_batches(tmp_path, tiny_policy_path, tokenizer):
    rewriter = FakeRewriter()
    trainer, _ = make_trainer(tmp_path, tiny_policy_path, tokenizer, coef=0.1, rewriter=rewriter, accumulation=2)
    seen = []
    original = trainer.compute_loss

    def spy(model, inputs, *args, **kwargs):
        seen.append(trainer._memorization_chunks[trainer._step % 2])
        return original(model, inputs, *args, **kwargs)

    trainer.compute_loss = spy
    trainer.train()
    # One rewrite kept: the first micro-batch trains it, the second has none; the weight is mu over its tokens, so
    # the step's memorization term is mu times the mean NLL of eq. 8, as with one micro-batch.
    assert len(seen) == 2 and seen[0] is not None and seen[1] is None
    tokens = int(seen[0]["loss_mask"].sum())
    assert tokens == len(tokenizer(GOOD, add_special_tokens=False)["input_ids"]) + 1
    assert trainer._memorization_scale == pytest.approx(0.1 / tokens)


def test_the_policy_rewrites_by_default_and_stays_in_training_mode(tmp_path, tiny_policy_path, tokenizer):
    trainer, _ = make_trainer(tmp_path, tiny_policy_path, tokenizer, coef=0.1, rewrite_max_new_tokens=6)
    trainer.train()
    assert trainer._rewriter.model is trainer.accelerator.unwrap_model(trainer.model)  # current weights
    assert trainer.model.training
    entry = next(e for e in trainer.state.log_history if "memorization/rewrites_tried" in e)
    # A random tiny model cannot write a finished, correct rewrite in 6 tokens: both tries are rejected.
    assert entry["memorization/rewrites_tried"] == 2.0 and entry["memorization/rewrites_kept"] == 0.0
    assert "memorization/nll" not in entry


def test_memorization_needs_a_protocol_with_internal_answers(tmp_path, tiny_policy_path, tokenizer):
    args = SearchGRPOConfig(output_dir=str(tmp_path), per_device_train_batch_size=4, num_generations=4, use_cpu=True,
                            bf16=False, report_to="none", max_steps=1, save_strategy="no",
                            memorization=MemorizationConfig(memorization_coef=0.1))
    rows = [{"id": "q0", "question": QUESTION, "golden_answers": ["1901"], "metadata": {}}]
    search_r1 = get_protocol("search_r1")
    with pytest.raises(ValueError, match="internal-answer"):
        SearchGRPOTrainer(model=str(tiny_policy_path), reward_funcs=[varied_reward], args=args,
                          train_dataset=prompt_dataset(rows, search_r1, tokenizer), retriever=FakeRetriever(),
                          protocol=search_r1, processing_class=tokenizer)


def test_the_extractive_rewriter_keeps_rewrites_without_a_rewrite_model(tmp_path, tiny_policy_path, tokenizer):
    trainer, _ = make_trainer(tmp_path, tiny_policy_path, tokenizer, coef=0.1, max_steps=1, rewrite_model="extractive")
    trainer.train()
    assert trainer._rewriter is None  # no model was loaded or asked
    entry = next(e for e in trainer.state.log_history if "memorization/rewrites_tried" in e)
    # Rollouts 0 and 3 searched and answered 1901; each result became an internal span that passes the check.
    assert entry["memorization/rewrites_tried"] == 2.0 and entry["memorization/rewrites_kept"] == 2.0
    assert math.isfinite(entry["memorization/nll"]) and entry["memorization/nll"] > 0


def test_the_rollout_log_keeps_every_rewrite_tried_and_why_it_was_rejected(tmp_path, tiny_policy_path, tokenizer):
    trainer, _ = make_trainer(tmp_path, tiny_policy_path, tokenizer, coef=0.1, max_steps=1, rewriter=FakeRewriter())
    trainer.args.rollout_log_dir = str(tmp_path / "rollouts")
    trainer.train()
    rows = [json.loads(line) for line in (tmp_path / "rollouts" / "rewrites-0001.jsonl").read_text().splitlines()]
    assert [(r["step"], r["kept"], r["rejected_because"]) for r in rows] == [
        (1, True, None), (1, False, "contains a search or search-result tag")]
    assert rows[0]["rewrite"] == GOOD and rows[0]["question"] == QUESTION
    assert PP.obs_open in rows[0]["completion"]  # the rollout it rewrote, documents included
    assert sorted(p.name for p in (tmp_path / "rollouts").iterdir()) == ["rewrites-0001.jsonl", "step-0001.jsonl"]
