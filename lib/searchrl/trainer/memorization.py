"""R1-Searcher++'s external-knowledge memorization (section 4.2.2, eq. 8-9).

During RL, rollouts that searched and answered correctly are rewritten into internal-only reasoning: a rewrite model
gets the question and the documents the rollout retrieved, presented as knowledge it already holds, and writes a
solution that answers every sub-question inside the protocol's internal-answer tags. A rewrite is kept only if it
still reaches a correct answer and shows no trace of searching (`check_rewrite`). The kept rewrites (the set T of
eq. 8) are trained with a negative log-likelihood on their completion tokens, given the rollout's own prompt, and
added to the RL loss with weight mu in the same optimizer step (eq. 9): L = -J_Mask + mu * L_M.

Choices the paper leaves open, made here:
- The rewrite model is any local causal LM; by default the policy itself (current weights, greedy, no gradient).
  The paper fine-tunes a separate rewriter first; a path in `rewrite_model` loads such a model instead.
  `rewrite_model: extractive` writes no text at all: it keeps the rollout's own reasoning and puts, where each search
  and its result stood, the retrieved sentence that best answers that query inside an internal-answer span. A small
  policy (SmolLM2-135M on a CPU) cannot follow the rewrite prompt, so without it the loss never has a rewrite to
  train on; the extractive rewrite is what a faithful rewriter would write for one-fact-per-search questions.
- T is built from the current step's rollouts only (no buffer across steps), so L_M trains on what was just found.
- The retrieved documents are read from the tokens the rollout engine appended (its env mask), not from the decoded
  text, so a model that writes its own fake result block cannot pass that off as knowledge.

`SearchGRPOTrainer` calls this module; the settings are `MemorizationConfig`.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.nn.functional as F

from searchrl.config.memorization import MemorizationConfig
from searchrl.protocols.base import SearchProtocol

__all__ = ["EXTRACTIVE", "REWRITE_TEMPLATE", "Candidate", "MemorizationExample", "Memorizer", "Rewriter", "answer_checker", "best_sentence", "check_rewrite", "extractive_rewrite", "load_rewriter", "masked_nll", "memorization_batch", "memorization_nll", "observation_texts", "retrieved_documents", "rewrite_candidate", "rewrite_prompt", "rollout_segments", "split_round_robin", "tokenize_rewrite"]


# Our wording of the instructions of the paper's Appendix B rewriting prompt: the documents are to be treated as the
# model's own memory, nothing may suggest they were handed over, every sub-question is answered as internal
# reasoning in the internal-answer tags, and the answer ends in \boxed{}. The tags come from the protocol.
REWRITE_TEMPLATE = (
    "You are a careful reasoning assistant with a large store of knowledge. The facts listed under 'What you know' "
    "are part of that store: you learned them long ago, and there is no difference between them and anything else "
    "you know. Never write or hint that any of this was given, provided, supplied, retrieved or looked up for this "
    "question; state it as something you remember.\n"
    "Work out the answer step by step. Split the question into simple sub-questions and take them one at a time. "
    "Answer every sub-question from memory, in this form: {internal_open} your reasoning and the answer to the "
    "sub-question {internal_close}. Every sub-question is answered this way; there is nothing to search.\n"
    "End with the final answer written as {answer_format}.\n"
    "What you know:\n{documents}\n"
    "Question: {question}"
)


def rewrite_prompt(protocol: SearchProtocol, question: str, documents: str) -> str:
    """The rewrite instruction for one question and the documents its rollout retrieved (plain replacement, so
    braces in documents or questions are safe)."""
    fills = {
        "{internal_open}": protocol.internal_open,
        "{internal_close}": protocol.internal_close,
        "{answer_format}": f"{protocol.answer_open}YOUR_ANSWER{protocol.answer_close}",
        "{documents}": str(documents).strip(),
        "{question}": str(question).strip(),
    }
    text = REWRITE_TEMPLATE
    for key in ("{internal_open}", "{internal_close}", "{answer_format}"):
        text = text.replace(key, fills[key])
    # Documents and question last, so that text inside them is never taken for a placeholder.
    head, tail = text.split("{documents}")
    return head + fills["{documents}"] + tail.replace("{question}", fills["{question}"])


def retrieved_documents(observations: Sequence[str], protocol: SearchProtocol, notices: Sequence[str] = ()) -> str:
    """The documents of a rollout's observation blocks as plain text: tags removed, repeated blocks and blocks
    that hold no document (the protocol's "nothing found" text, or one of `notices`) dropped."""
    skip = {protocol.no_docs_text.strip(), *(n.strip() for n in notices)}
    blocks: list[str] = []
    for text in observations:
        body = str(text).replace(protocol.obs_open, "").replace(protocol.obs_close, "").strip()
        if body and body not in skip and body not in blocks:
            blocks.append(body)
    return "\n".join(blocks)


def rollout_segments(completion_ids: Sequence[int], env_mask: Sequence[int], tokenizer) -> list[tuple[str, bool]]:
    """One completion as decoded runs of (text, model-written): env_mask 1 runs the model sampled, 0 runs the rollout
    engine appended (observations)."""
    runs: list[tuple[list[int], bool]] = []
    for token, sampled in zip(completion_ids, env_mask, strict=True):
        if not runs or runs[-1][1] != bool(sampled):
            runs.append(([], bool(sampled)))
        runs[-1][0].append(token)
    return [(tokenizer.decode(ids, skip_special_tokens=True), sampled) for ids, sampled in runs]


def observation_texts(completion_ids: Sequence[int], env_mask: Sequence[int], tokenizer) -> list[str]:
    """The decoded runs of environment-appended tokens (env_mask 0) of one completion, in order."""
    return [text for text, sampled in rollout_segments(completion_ids, env_mask, tokenizer) if not sampled]


EXTRACTIVE = "extractive"


_WORD = re.compile(r"[a-z0-9]+")


_STOP = frozenset(("the", "a", "an", "of", "in", "on", "at", "to", "is", "was", "were", "who", "what", "where", "when",
                   "which", "how", "did", "does", "do", "by", "for", "and", "or", "from", "with", "as", "its", "it",
                   "his", "her", "their", "this", "that", "be"))


def _content_words(text: str) -> set[str]:
    return {w for w in _WORD.findall(text.lower()) if w not in _STOP}


def _without_title(sentence: str) -> str:
    """A document's first sentence without the title the layout "(k)Title text" puts before it, found as the longest
    run of leading words (at most 8) that the sentence names again later: "Ann Lee Ann Lee was born in 1871." and
    "Ann Lee Bo Lee was the father of Ann Lee." lose "Ann Lee". A title the sentence never names again stays."""
    words = sentence.split()
    bare = [w.strip(".,;:!?\"'()").lower() for w in words]  # "Lee." names "Lee" again
    for k in range(min(8, len(words) // 2), 0, -1):
        if any(bare[j:j + k] == bare[:k] for j in range(k, len(words) - k + 1)):
            return " ".join(words[k:])
    return sentence


def _document_sentences(body: str) -> list[str]:
    """The sentences of an observation body, without the "(k)" numbering and the documents' titles."""
    sentences = []
    for doc in re.split(r"(?:^|\n)\s*\(\d+\)", body):
        parts = [s.strip() for s in re.split(r"(?<=[.!?])\s+", " ".join(doc.split())) if s.strip()]
        sentences += [_without_title(parts[0]), *parts[1:]] if parts else []
    return sentences


def best_sentence(body: str, query: str, answer: str = "", reading: str = "") -> str | None:
    """The sentence of an observation that best answers `query`: most content words shared with it, half a point for
    each shared with `reading` (what the rollout wrote after the observation, which names what it took from it), and,
    when `answer` is given, one that states the answer before any that does not (first on ties; None: none)."""
    wanted, used, answer = _content_words(query), _content_words(reading), answer.strip().lower()
    best, best_score = None, -1.0
    for sentence in _document_sentences(body):
        words = _content_words(sentence)
        states_answer = bool(answer) and answer in sentence.lower()
        score = len(wanted & words) + 0.5 * len(used & words) + (100.0 if states_answer else 0.0)
        if score > best_score:
            best, best_score = sentence, score
    return best


# A sentence of the rollout's own text that speaks of searching ("I will search for...", "The results say...") has
# no place in reasoning from memory; the extractive rewrite leaves it out.
_SEARCH_TALK = re.compile(r"\b(search\w*|results?|look(?:ing|ed)? (?:it |this |that )?up|quer(?:y|ies)|retriev\w*|"
                          r"found|documents?|passages?|sources?)\b", re.IGNORECASE)


def _without_search_talk(text: str, protocol: SearchProtocol) -> str:
    """`text` without its sentences that speak of searching, but never one that holds the answer box."""
    sentences = re.split(r"(?<=[.!?])(\s+)", text)
    return "".join(s for s in sentences if protocol.answer_open in s or not _SEARCH_TALK.search(s))


def extractive_rewrite(candidate: Candidate, protocol: SearchProtocol, notices: Sequence[str] = ()) -> str:
    """The rollout rewritten without searching: its model-written text kept, each query it closed removed, and each
    observation the engine appended replaced by an internal-answer span holding the sentence that best answers that
    query and that the rollout went on to use (the last one: the sentence stating the final answer, if one does).
    Sentences that speak of searching ("I will search for...") are left out of the rollout's text, as a rewriter told
    to reason from memory would. Observations that held no document (nothing found, or one of `notices`:
    `rollout.engine.engine_notices`) are dropped. A fake result block the model wrote itself stays in the text, so
    `check_rewrite` rejects the rewrite."""
    skip = {protocol.no_docs_text.strip(), *(n.strip() for n in notices)}
    segments = candidate.segments
    observed = [i for i, (_, sampled) in enumerate(segments) if not sampled]
    out, query = [], ""
    for i, (text, sampled) in enumerate(segments):
        if sampled:
            start = text.rfind(protocol.query_open)
            if start >= 0 and i + 1 < len(segments) and not segments[i + 1][1]:  # the query this observation answers
                query = text[start + len(protocol.query_open):].replace(protocol.query_close, "")
                text = text[:start]
            out.append(_without_search_talk(text, protocol))
            continue
        body = text.replace(protocol.obs_open, "").replace(protocol.obs_close, "").strip()
        if not body or body in skip:
            continue
        reading = segments[i + 1][0].split(protocol.query_open)[0] if i + 1 < len(segments) else ""
        sentence = best_sentence(body, query, candidate.answer if i == observed[-1] else "", reading)
        if sentence:
            out.append(f" {protocol.internal_open}{sentence}{protocol.internal_close} ")
    return re.sub(r"[ \t]+", " ", "".join(out)).strip()


# Phrases that give away that knowledge came from outside (the rewrite prompt forbids them), lower case.
SOURCE_PHRASES = ("what you know", "search result", "retrieved", "information provided", "provided information",
                  "given information", "the documents", "the passage", "according to the document")


AnswerCheck = Callable[[str | None, Sequence[str]], bool]


def answer_checker(protocol: SearchProtocol) -> AnswerCheck:
    """Whether an answer is correct, as R1-Searcher++'s answer reward judges it (eq. 4: cover-EM, at most 10
    words; the `cem_10w` reward)."""
    from searchrl.rewards import make_reward

    reward = make_reward("cem_10w", protocol)
    return lambda answer, golden: reward.score_answer(answer, list(golden)) == 1.0


@dataclass
class Candidate:
    """A correct rollout that searched: what its rewrite needs."""

    prompt_ids: list[int]  # the rollout's prompt: the rewrite is trained as the answer to it
    question: str
    golden_answers: list[str]
    documents: str  # what the rollout retrieved, as plain text
    answer: str = ""  # the rollout's (correct) final answer
    segments: list[tuple[str, bool]] = field(default_factory=list)  # its text as (piece, model-written) runs


def rewrite_candidate(prompt_ids: list[int], completion: str, row: Mapping[str, Any], protocol: SearchProtocol,
                      is_correct: AnswerCheck) -> Candidate | None:
    """A Candidate when the rollout searched, retrieved documents and answered correctly, else None.

    `row` is the dataset row as the reward functions see it: `question`, `golden_answers`, and the rollout's
    `num_searches` and `retrieved_text` (observation texts) from `SearchGRPOTrainer`'s rollout.
    """
    missing = [k for k in ("question", "golden_answers", "num_searches", "retrieved_text") if k not in row]
    if missing:
        raise KeyError(f"memorization needs the columns {missing} beside each rollout: the dataset must have "
                       "`question` and `golden_answers` (searchrl.trainer.prompt_dataset makes them)")
    if not row["num_searches"] or not row["retrieved_text"]:
        return None
    golden = row["golden_answers"]
    golden = [golden] if isinstance(golden, str) else list(golden)
    answer = protocol.parse(completion).answer
    if not is_correct(answer, golden):
        return None
    segments = [(str(text), bool(sampled)) for text, sampled in row.get("rollout_segments") or []]
    return Candidate(list(prompt_ids), str(row["question"]), golden, str(row["retrieved_text"]), str(answer), segments)


def check_rewrite(text: str, finished: bool, golden_answers: Sequence[str], protocol: SearchProtocol,
                  is_correct: AnswerCheck) -> str | None:
    """Why a rewrite is rejected, or None when it is kept.

    Kept: it ended on its own (not cut by the token limit), holds no search or search-result tag, does not mention
    an outside source, answers its sub-questions in at least one closed internal-answer span, is well formed under
    the protocol's format rule, and its final answer is correct.
    """
    if not finished:
        return "cut off by rewrite_max_new_tokens"
    tags = (protocol.query_open, protocol.query_close, protocol.obs_open, protocol.obs_close)
    if any(tag in text for tag in tags):
        return "contains a search or search-result tag"
    lowered = text.lower()
    if any(phrase in lowered for phrase in SOURCE_PHRASES):
        return "mentions an outside source"
    parsed = protocol.parse(text)
    if not parsed.internal:
        return "no internal-answer span"
    if not parsed.format_ok:
        return "breaks the protocol's format"
    if not is_correct(parsed.answer, golden_answers):
        return "wrong or missing final answer"
    return None


class Rewriter:
    """Greedy rewrites from a causal LM: `rewriter(prompts) -> [(text, finished)]`, finished meaning it reached EOS.

    The model runs in eval mode without gradients and is put back in the mode it was in (the policy is usually in
    training mode). The chat template is applied when the tokenizer has one.
    """

    def __init__(self, model, tokenizer, *, max_new_tokens: int, batch_size: int) -> None:
        from searchrl.rollout import HFTurnGenerator

        self.model, self.tokenizer = model, tokenizer
        self.max_new_tokens, self.batch_size = max_new_tokens, batch_size
        self.generator = HFTurnGenerator(model, tokenizer, [], greedy=True, reuse_cache=False)

    def render(self, prompt: str) -> list[int]:
        """Token ids of one prompt, as a user turn when the tokenizer has a chat template."""
        tok = self.tokenizer
        if getattr(tok, "chat_template", None):
            prompt = tok.apply_chat_template([{"role": "user", "content": prompt}], tokenize=False,
                                             add_generation_prompt=True)
        else:
            prompt = prompt + "\n"
        return tok(prompt, add_special_tokens=False)["input_ids"]

    def __call__(self, prompts: list[str]) -> list[tuple[str, bool]]:
        was_training = self.model.training
        self.model.eval()
        out: list[tuple[str, bool]] = []
        try:
            with torch.no_grad():
                for start in range(0, len(prompts), self.batch_size):
                    ids = [self.render(p) for p in prompts[start : start + self.batch_size]]
                    turns = self.generator.generate_turn(ids, [self.max_new_tokens] * len(ids))
                    out += [(self.tokenizer.decode(t.token_ids, skip_special_tokens=True).strip(), t.finish == "eos")
                            for t in turns]
        finally:
            self.model.train(was_training)
        return out


@dataclass
class MemorizationExample:
    """One kept rewrite, tokenised for the policy: its prompt and the rewritten completion (ends in EOS)."""

    prompt_ids: list[int]
    completion_ids: list[int]


def tokenize_rewrite(prompt_ids: list[int], text: str, tokenizer) -> MemorizationExample:
    """The rollout's prompt and the rewrite's tokens in the policy's vocabulary, closed by EOS (the rewrite ended
    there, and the policy should learn to stop)."""
    ids = tokenizer(text, add_special_tokens=False)["input_ids"]
    return MemorizationExample(list(prompt_ids), ids + [tokenizer.eos_token_id])


def memorization_batch(examples: Sequence[MemorizationExample], pad_id: int,
                       device: torch.device | str | None = None) -> dict[str, torch.Tensor]:
    """Examples as one padded batch, laid out as TRL lays out rollouts: prompts left-padded, completions
    right-padded, so every completion starts at the same column. `loss_mask` is 1 exactly on completion tokens."""
    if not examples:
        raise ValueError("memorization_batch needs at least one example")
    width_p = max(len(e.prompt_ids) for e in examples)
    width_c = max(len(e.completion_ids) for e in examples)
    n = len(examples)
    input_ids = torch.full((n, width_p + width_c), pad_id, dtype=torch.long)
    attention = torch.zeros_like(input_ids)
    loss_mask = torch.zeros_like(input_ids)
    for i, e in enumerate(examples):
        p, c = len(e.prompt_ids), len(e.completion_ids)
        input_ids[i, width_p - p : width_p] = torch.tensor(e.prompt_ids, dtype=torch.long)
        input_ids[i, width_p : width_p + c] = torch.tensor(e.completion_ids, dtype=torch.long)
        attention[i, width_p - p : width_p + c] = 1
        loss_mask[i, width_p : width_p + c] = 1
    batch = {"input_ids": input_ids, "attention_mask": attention, "loss_mask": loss_mask}
    return {k: v.to(device) for k, v in batch.items()} if device is not None else batch


def masked_nll(logits: torch.Tensor, input_ids: torch.Tensor, loss_mask: torch.Tensor) -> tuple[torch.Tensor,
                                                                                                  torch.Tensor]:
    """(sum, count) of -log p(token) over the tokens where `loss_mask` is 1.

    `logits[:, t]` predicts `input_ids[:, t + 1]`; `logits` may cover only the last positions of the sequence
    (then it lines up with the last `logits.size(1)` positions). A token at position 0 has no prediction.
    """
    width = logits.size(1)
    targets = input_ids[:, -width:][:, 1:]
    mask = loss_mask[:, -width:][:, 1:].to(logits.dtype)
    nll = F.cross_entropy(logits[:, :-1].float().reshape(-1, logits.size(-1)), targets.reshape(-1),
                          reduction="none").view_as(targets)
    return (nll * mask).sum(), mask.sum()


def memorization_nll(model, batch: Mapping[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
    """(sum, count) of the policy's NLL on the batch's rewritten completion tokens (eq. 8 before normalising).

    Logits are computed only from the position before the first completion token, as TRL does for rollouts: the
    prompt conditions the completion but is never a target. Raw logits: the rewrite is trained as text, not at the
    rollout sampling temperature.
    """
    loss_mask = batch["loss_mask"]
    columns = loss_mask.any(dim=0).nonzero()
    if columns.numel() == 0:
        zero = loss_mask.new_zeros((), dtype=torch.float32)
        return zero, zero
    keep = loss_mask.size(1) - int(columns[0]) + 1
    logits = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"], logits_to_keep=keep).logits
    return masked_nll(logits, batch["input_ids"], loss_mask)


def split_round_robin(items: Sequence[Any], parts: int) -> list[list[Any]]:
    """`items` dealt into `parts` lists (one per micro-batch of a generation batch)."""
    return [list(items[i::parts]) for i in range(parts)]


class Memorizer:
    """Rewrites candidates, checks the rewrites and tokenises the kept ones for the policy.

    `rewriter` is any callable `prompts -> [(text, finished)]` (a `Rewriter` over the policy or another model),
    unused with `rewrite_model: extractive`; `tokenizer` is the policy's.
    """

    def __init__(self, config: MemorizationConfig, protocol: SearchProtocol, tokenizer,
                 rewriter: Callable[[list[str]], list[tuple[str, bool]]], notices: Sequence[str] = ()) -> None:
        for tag in ("internal_open", "internal_close"):
            if not getattr(protocol, tag, None):
                raise ValueError(f"memorization rewrites rollouts into internal-answer spans, which the protocol "
                                 f"{protocol.name!r} does not have; use it with r1_searcher_pp or set "
                                 "memorization_coef=0")
        self.config, self.protocol, self.tokenizer, self.rewriter = config, protocol, tokenizer, rewriter
        self.notices = tuple(notices)  # engine texts that are not documents (the search-budget notice)
        self.last_tried: list[tuple[Candidate, str, str | None]] = []
        self.is_correct = answer_checker(protocol)

    def candidate(self, prompt_ids: list[int], completion: str, row: Mapping[str, Any]) -> Candidate | None:
        """The Candidate of one scored rollout, or None (see `rewrite_candidate`)."""
        return rewrite_candidate(prompt_ids, completion, row, self.protocol, self.is_correct)

    def rewrite(self, candidates: Sequence[Candidate]) -> tuple[list[MemorizationExample], list[str | None]]:
        """The kept rewrites as training examples, and for every candidate tried why it was rejected (None: kept).
        At most `max_rewrites_per_step` candidates are tried (the first ones). `last_tried` then holds each tried
        candidate with its rewrite text and that reason (what the rollout log writes)."""
        cap = self.config.max_rewrites_per_step
        tried = list(candidates[:cap] if cap else candidates)
        self.last_tried: list[tuple[Candidate, str, str | None]] = []
        if not tried:
            return [], []
        if self.config.rewrite_model == EXTRACTIVE:
            outputs = [(extractive_rewrite(c, self.protocol, self.notices), True) for c in tried]
        else:
            outputs = self.rewriter([rewrite_prompt(self.protocol, c.question, c.documents) for c in tried])
        if len(outputs) != len(tried):
            raise RuntimeError(f"the rewriter returned {len(outputs)} rewrites for {len(tried)} prompts")
        examples, reasons = [], []
        for cand, (text, finished) in zip(tried, outputs, strict=True):
            reason = check_rewrite(text, finished, cand.golden_answers, self.protocol, self.is_correct)
            reasons.append(reason)
            self.last_tried.append((cand, text, reason))
            if reason is None:
                examples.append(tokenize_rewrite(cand.prompt_ids, text, self.tokenizer))
        return examples, reasons


def load_rewriter(config: MemorizationConfig, policy, policy_tokenizer, device) -> Rewriter:
    """The rewriter of `config`: the policy itself when `rewrite_model` is "", else that model, loaded frozen."""
    if not config.rewrite_model:
        return Rewriter(policy, policy_tokenizer, max_new_tokens=config.rewrite_max_new_tokens,
                        batch_size=config.rewrite_batch_size)
    from searchrl.models import load_policy

    model, tokenizer = load_policy(config.rewrite_model, device=device)
    model.eval().requires_grad_(False)
    return Rewriter(model, tokenizer, max_new_tokens=config.rewrite_max_new_tokens,
                    batch_size=config.rewrite_batch_size)
