"""The supervised cold start: trajectories in a protocol's format, trained with the retrieved tokens masked out.

R1-Searcher++ (eq. 2) fine-tunes on search trajectories before RL with the loss restricted to the tokens the model
writes: the documents the search engine appended are context, not targets. Two sources of trajectories:

- `templated_trajectories`: written from the synthetic world's answer chains. Each hop gets a short thought, a
  natural query, the REAL retriever's documents for that query, and a one-line reading of them; then the answer.
  A row is kept only when every hop's answer is in what the retriever returned, so the cold start never teaches
  the model to answer something the documents do not say.
- `rejection_sampled_trajectories`: the policy's own rollouts (same engine as RL), kept when correct and valid.

Both become items that `tokenize_sft` turns into input_ids / labels, with labels = -100 on the prompt and on every
retrieved token, and `sft_train` trains on them with TRL's SFTTrainer.

    items = templated_trajectories(world.questions("train", "single_hop", limit=64), protocol, retriever,
                                   tokenizer=tokenizer)
    history = sft_train(model, tokenizer, items, output_dir="outputs/cold_start")
"""

from __future__ import annotations

import logging
import random
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from datasets import Dataset
from tqdm.auto import tqdm

from searchrl.data.synthetic.questions import ASK, DESCRIBE, INFERENCE
from searchrl.evaluate import check_rows, completion_text, score_trajectory
from searchrl.protocols import get_protocol
from searchrl.protocols.base import SearchProtocol
from searchrl.rollout import HFTurnGenerator, RolloutConfig, SearchRollout

logger = logging.getLogger(__name__)

IGNORE_INDEX = -100  # label value the loss skips (transformers and TRL convention)

# ------------------------------------------------------------------------------------------- hop plans


@dataclass(frozen=True)
class Hop:
    """One fact to look up: the `key` fact of the entity named `subject`, whose value is `answer`."""

    subject: str
    key: str
    answer: str


# How each fact is named in thoughts ("the director of X") and searched for. The query phrasings keep the verb of
# the corpus's fact sentences ("born", "directed", "founded"), which is what a sensible searcher would type and
# what lets BM25 prefer the passage that states the fact.
RELATION_NOUNS: dict[str, str] = {
    "birth_year": "birth year", "birthplace": "birthplace", "occupation": "occupation", "father": "father",
    "mother": "mother", "spouse": "spouse", "director": "director", "release_year": "release year",
    "filmed_in": "filming location", "author": "author", "publication_year": "publication year",
    "set_in": "setting", "founder": "founder", "founded_year": "founding year", "headquarters": "headquarters",
    "country": "country", "capital": "capital",
}
QUERY_FORMS: dict[str, tuple[str, ...]] = {
    "birth_year": ("{s} birth year born", "when was {s} born"),
    "birthplace": ("{s} birthplace born", "where was {s} born"),
    "occupation": ("{s} occupation worked as", "what did {s} work as"),
    "father": ("{s} father", "father of {s}"),
    "mother": ("{s} mother", "mother of {s}"),
    "spouse": ("{s} spouse married", "who was {s} married to"),
    "director": ("{s} director directed", "who directed {s}"),
    "release_year": ("{s} release year released", "when was {s} released"),
    "filmed_in": ("{s} filmed in", "where was {s} filmed"),
    "author": ("{s} author written by", "who wrote {s}"),
    "publication_year": ("{s} publication year published", "when was {s} published"),
    "set_in": ("{s} setting set in", "where is {s} set"),
    "founder": ("{s} founder founded by", "who founded {s}"),
    "founded_year": ("{s} founding year founded", "when was {s} founded"),
    "headquarters": ("{s} headquarters", "where is {s} headquartered"),
    "country": ("{s} country located in", "which country is {s} in"),
    "capital": ("{s} capital", "capital of {s}"),
}
FIRST_THOUGHTS = (
    "I need to find the {noun} of {s}.",
    "The question asks for the {noun} of {s}. I will search for it.",
    "To answer this, I should look up the {noun} of {s}.",
)
NEXT_THOUGHTS = (
    "Now I need the {noun} of {s}.",
    "Next, I will search for the {noun} of {s}.",
)
READINGS = (
    "The results say that the {noun} of {s} is {a}.",
    "According to the documents, the {noun} of {s} is {a}.",
    "From the retrieved passages, the {noun} of {s} is {a}.",
)


def _template_regex(template: str) -> re.Pattern:
    """A question template with one `{np}` slot as a regex capturing the slot (the question's first letter may be
    capitalised, hence IGNORECASE)."""
    before, after = template.split("{np}")
    return re.compile(re.escape(before) + "(?P<np>.+)" + re.escape(after), re.IGNORECASE)


def _strip_kind_phrase(np: str, kind: str) -> str:
    """Questions name works as "the film X" / "the book X"; the entity's own name is X."""
    prefix = f"the {kind} "
    return np[len(prefix):] if kind in ("film", "book") and np.lower().startswith(prefix) else np


def hop_plan(row: Mapping) -> list[Hop] | None:
    """The facts a synthetic-world question needs, in reading order, or None for rows without a known structure.

    The first entity's name is read back out of the question through the world's own question templates; every
    later subject is the previous hop's answer (or, for comparisons, the second choice).
    """
    meta = row.get("metadata") or {}
    qtype, answers = meta.get("type"), list(meta.get("hop_answers") or [])
    template = str(meta.get("template", ""))
    question = str(row.get("question", "")).strip()
    try:
        if qtype in ("single_hop", "bridge"):
            chain = [tuple(part.split(".")) for part in template.split(">")]
            if len(chain) != len(answers):
                return None
            kind, key = chain[-1]
            match = _template_regex(ASK[kind][key]).fullmatch(question)
            for inner_kind, inner_key in reversed(chain[:-1]):  # peel "the director of ..." layers off
                match = match and _template_regex(DESCRIBE[inner_kind][inner_key]).fullmatch(match["np"])
            if not match:
                return None
            subjects = [_strip_kind_phrase(match["np"], chain[0][0]), *answers[:-1]]
            return [Hop(s, k, a) for s, (_, k), a in zip(subjects, chain, answers)]
        if qtype == "inference":
            relation = meta.get("relation", "")
            prefix = f"Who is the {relation} of "
            if relation not in INFERENCE or not question.startswith(prefix) or len(answers) != 2:
                return None
            person = question[len(prefix):].rstrip("?").strip()
            first, second = INFERENCE[relation]
            return [Hop(person, first, answers[0]), Hop(answers[0], second, answers[1])]
        if qtype == "comparison":
            a, b = meta["choices"]
            key = template.split(".")[1]
            return [Hop(a, key, answers[0]), Hop(b, key, answers[1])]
        if qtype == "bridge_comparison":
            a, b = meta["choices"]
            maker, year_key = template.split(".")[1:3]
            return [Hop(a, maker, answers[0]), Hop(answers[0], year_key, answers[1]),
                    Hop(b, maker, answers[2]), Hop(answers[2], year_key, answers[3])]
    except (KeyError, ValueError, IndexError, TypeError):
        return None
    return None


def _conclusion(row: Mapping, hops: list[Hop], gold: str) -> str:
    """The last reasoning sentence before the answer: comparisons spell out the years they compare."""
    qtype = (row.get("metadata") or {}).get("type")
    if qtype == "comparison":
        noun = RELATION_NOUNS[hops[0].key]
        return (f"The {noun} of {hops[0].subject} is {hops[0].answer} and that of {hops[1].subject} is "
                f"{hops[1].answer}, so the answer is {{answer}}.")
    if qtype == "bridge_comparison":
        return (f"{hops[1].subject} was born in {hops[1].answer} and {hops[3].subject} in {hops[3].answer}, "
                f"so the answer is {{answer}}.")
    return "So the answer is {answer}."


# ---------------------------------------------------------------------------------------- protocol layouts


class _Layout:
    """How one protocol's model text is laid out: where thoughts go, how the answer is written.

    Four shapes cover the papers: Search-R1 wraps every thought in <think>; R1-Searcher thinks (and searches)
    inside one <think> that its prompt pre-fills; R1-Searcher++ writes free text ending in \\boxed{}; R-Search
    writes free text, then an <original_evidence> box, then <answer>. Any other protocol gets free text and its
    answer tags.
    """

    def __init__(self, protocol: SearchProtocol):
        self.p = protocol
        think_open = getattr(protocol, "think_open", None)
        self.think_inside = bool(think_open) and protocol.response_prefix.strip() == think_open
        self.think_wrap = bool(think_open) and not protocol.response_prefix
        self.boxed = protocol.answer_open.endswith("{")
        self.evidence = getattr(protocol, "evidence_open", None)

    def thought(self, text: str, first: bool) -> str:
        if self.think_wrap:
            return f"{self.p.think_open} {text} {self.p.think_close}\n"
        return f"{' ' if first and self.think_inside else ''}{text} "

    def search(self, query: str) -> str:
        return f"{self.p.query_open} {query} {self.p.query_close}"

    def finish(self, reasoning: str, gold: str, evidence: list[str]) -> str:
        if self.boxed:
            return reasoning.replace("{answer}", f"{self.p.answer_open}{gold}{self.p.answer_close}")
        reasoning = reasoning.replace("{answer}", gold)
        if self.think_wrap:
            text = f"{self.p.think_open} {reasoning} {self.p.think_close}\n"
        elif self.think_inside:
            text = f"{reasoning} {self.p.think_close}\n"
        else:
            text = f"{reasoning}\n"
        if self.evidence and evidence:
            text += f"{self.evidence} {' '.join(evidence)} {self.p.evidence_close}\n"
        return text + f"{self.p.answer_open} {gold} {self.p.answer_close}"


def _mentions(text: str, phrase: str) -> bool:
    """Whether `phrase` occurs in `text` as whole words, ignoring case."""
    return re.search(rf"(?<!\w){re.escape(phrase.lower())}(?!\w)", text.lower()) is not None


def _evidence_sentence(docs, hop: Hop) -> str | None:
    """The retrieved sentence that states a hop's fact (mentions both its subject and its answer)."""
    for doc in docs:
        for sentence in re.split(r"(?<=[.!?])\s+", doc.text):
            if _mentions(sentence, hop.answer) and _mentions(sentence, hop.subject):
                return sentence.strip()
    return None


# --------------------------------------------------------------------------------------------- templated


def templated_trajectories(
    rows: Sequence[Mapping],
    protocol: SearchProtocol | str,
    retriever,
    *,
    tokenizer=None,
    chat: bool = True,
    top_k: int = 3,
    seed: int = 0,
    max_searches: int | None = None,
) -> list[dict[str, Any]]:
    """Cold-start trajectories in `protocol`'s format, one per usable synthetic-world row.

    Each item: {"prompt": text, "segments": [(text, trainable), ...], "id", "question", "golden_answers", "qtype",
    "hops", "queries", "doc_ids"}. Observation segments (exactly the text the rollout engine appends) are not
    trainable. `tokenizer` and `chat` build the prompt the way evaluation and RL do (pass the policy's tokenizer:
    without it the prompt is the plain, template-free one). Rows are skipped when their structure is unknown, when
    they need more than `max_searches` searches, or when any hop's answer is missing from the retrieved documents.
    """
    rows = check_rows(rows, "templated_trajectories")
    protocol = get_protocol(protocol)
    layout = _Layout(protocol)
    skipped: Counter = Counter()
    plans: list[tuple[Mapping, list[Hop], random.Random]] = []
    for row in rows:
        hops = hop_plan(row)
        if hops is None or any(h.key not in QUERY_FORMS for h in hops):
            skipped["no hop plan (not a synthetic-world row?)"] += 1
        elif max_searches is not None and len(hops) > max_searches:
            skipped[f"needs more than {max_searches} searches"] += 1
        else:
            # One generator per row, seeded by the row's id: wording does not depend on which other rows are given.
            plans.append((row, hops, random.Random(f"{seed}:{row.get('id', row['question'])}")))
    queries = [rng.choice(QUERY_FORMS[h.key]).format(s=h.subject) for _, hops, rng in plans for h in hops]
    results = iter(retriever.search(queries, top_k) if queries else [])
    query_iter = iter(queries)

    items = []
    for row, hops, rng in plans:
        hop_docs = [(next(query_iter), next(results)) for _ in hops]
        if not all(any(_mentions(d.as_text(), h.answer) for d in docs) for h, (_, docs) in zip(hops, hop_docs)):
            skipped["a hop's answer is not in the retrieved documents"] += 1
            continue
        gold = str(row["golden_answers"][0])
        segments: list[tuple[str, bool]] = []
        previous: Hop | None = None
        for i, (hop, (query, docs)) in enumerate(zip(hops, hop_docs)):
            noun = RELATION_NOUNS[hop.key]
            thought = rng.choice(FIRST_THOUGHTS if i == 0 else NEXT_THOUGHTS).format(noun=noun, s=hop.subject)
            if previous is not None:
                thought = _reading(rng, previous) + " " + thought
            segments.append((layout.thought(thought, first=i == 0) + layout.search(query), True))
            segments.append((protocol.format_observation(docs), False))
            previous = hop
        reasoning = _reading(rng, previous) + " " + _conclusion(row, hops, gold)
        evidence = [s for s in (_evidence_sentence(docs, h) for h, (_, docs) in zip(hops, hop_docs)) if s]
        segments.append((layout.finish(reasoning, gold, list(dict.fromkeys(evidence))), True))
        parsed = protocol.parse("".join(text for text, _ in segments))
        if not parsed.format_ok or parsed.answer is None:
            raise ValueError(f"templated_trajectories cannot write a valid trajectory for protocol "
                             f"{protocol.name!r} (row {row.get('id')}); its format is not one of the known layouts")
        items.append({
            "id": row.get("id", ""),
            "question": row["question"],
            "golden_answers": list(row["golden_answers"]),
            "qtype": str((row.get("metadata") or {}).get("type", "unknown")),
            "hops": len(hops),
            "prompt": protocol.build_prompt(row["question"], tokenizer, chat=chat),
            "segments": segments,
            "queries": [q for q, _ in hop_docs],
            "doc_ids": [[d.id for d in docs] for _, docs in hop_docs],
        })
    if skipped:
        logger.info("templated_trajectories: kept %d of %d rows; skipped %s", len(items), len(rows), dict(skipped))
    if not items:
        raise ValueError(f"templated_trajectories kept none of the {len(rows)} rows: {dict(skipped)}. Use rows of "
                         "the synthetic world (searchrl.data.synthetic) and a retriever over its corpus, or a larger "
                         "top_k.")
    return items


def _reading(rng: random.Random, hop: Hop) -> str:
    return rng.choice(READINGS).format(noun=RELATION_NOUNS[hop.key], s=hop.subject, a=hop.answer)


# ----------------------------------------------------------------------------------------- rejection sampling


def rejection_sampled_trajectories(
    model,
    tokenizer,
    protocol: SearchProtocol | str,
    retriever,
    rows: Sequence[Mapping],
    *,
    samples_per_question: int = 4,
    temperature: float = 1.0,
    top_p: float = 1.0,
    min_f1: float = 0.8,
    require_search: bool = False,
    max_per_question: int | None = None,
    batch_size: int = 16,
    max_searches: int = 2,
    top_k: int = 3,
    max_completion_tokens: int = 512,
    chat: bool = True,
    seed: int = 0,
    progress: bool = True,
    generator=None,
) -> list[dict[str, Any]]:
    """The policy's own sampled trajectories that are correct and well formed, ready for `tokenize_sft`.

    Each question is rolled out `samples_per_question` times with the search engine (sampling at `temperature`).
    A trajectory is kept when the protocol accepts its format and its answer covers a golden answer (cover EM) or
    reaches `min_f1`; with `require_search`, only trajectories that searched. Identical completions are kept once,
    and at most `max_per_question` per question (None: all). `batch_size` counts sequences per generation batch
    (questions x samples). Items hold token ids and the engine's `env_mask`
    directly (mask 0 = retrieved, not trained), plus the prompt and completion text for inspection.
    """
    rows = check_rows(rows, "rejection_sampled_trajectories")
    protocol = get_protocol(protocol)
    if samples_per_question < 1:
        raise ValueError(f"samples_per_question must be >= 1, got {samples_per_question}")
    if generator is None:
        if model is None:
            raise ValueError("rejection_sampled_trajectories needs a model (or a `generator`)")
        generator = HFTurnGenerator(model, tokenizer, protocol.stop_strings, temperature=temperature, top_p=top_p,
                                    greedy=temperature <= 0)
    config = RolloutConfig(max_searches=max_searches, top_k=top_k, max_completion_tokens=max_completion_tokens)
    engine = SearchRollout(protocol, retriever, tokenizer, generator, config)
    torch.manual_seed(seed)
    was_training = getattr(model, "training", None)
    if model is not None:
        model.eval()
    items: list[dict[str, Any]] = []
    per_batch = max(1, batch_size // samples_per_question)  # questions per batch, each repeated
    bar = tqdm(range(0, len(rows), per_batch), desc="rejection sampling", unit="batch", disable=not progress)
    try:
        for lo in bar:
            batch = rows[lo: lo + per_batch]
            prompts = [protocol.build_prompt(r["question"], tokenizer, chat=chat) for r in batch]
            prompt_ids = [tokenizer(p, add_special_tokens=False)["input_ids"] for p in prompts]
            trajs = engine.run([ids for ids in prompt_ids for _ in range(samples_per_question)])
            for q, (row, prompt) in enumerate(zip(batch, prompts)):
                seen: set[tuple[int, ...]] = set()
                kept = 0
                for traj in trajs[q * samples_per_question: (q + 1) * samples_per_question]:
                    text = completion_text(traj, tokenizer)
                    record = score_trajectory(row, traj, text, protocol)
                    correct = record["cem"] >= 1.0 or record["f1"] >= min_f1
                    key = tuple(traj.completion_ids)
                    if not (record["format_ok"] and correct) or key in seen:
                        continue
                    if require_search and record["searches"] == 0:
                        continue
                    if max_per_question is not None and kept >= max_per_question:
                        break
                    seen.add(key)
                    kept += 1
                    items.append({
                        "id": record["id"], "question": row["question"], "golden_answers": record["golden_answers"],
                        "qtype": record["qtype"], "hops": record["hops"], "prompt": prompt,
                        "prompt_ids": list(traj.prompt_ids), "completion_ids": list(traj.completion_ids),
                        "env_mask": list(traj.env_mask), "completion": text, "f1": record["f1"],
                        "cem": record["cem"], "searches": record["searches"],
                    })
            bar.set_postfix(kept=len(items))
    finally:
        bar.close()
        if model is not None and was_training is not None:
            model.train(was_training)
    return items


# ------------------------------------------------------------------------------------------------ tokenize


def _ids(tokenizer, text: str) -> list[int]:
    # Pieces are tokenized one by one, as the rollout engine does (observations are tokenized on their own and
    # appended), so SFT sees the same token boundaries around retrieved text as RL does.
    return tokenizer(text, add_special_tokens=False)["input_ids"]


def _item_tokens(item: Mapping, tokenizer) -> tuple[list[int], list[int]]:
    """(input_ids, labels) of one item, before the EOS and truncation."""
    if "completion_ids" in item:
        prompt = list(item.get("prompt_ids") or _ids(tokenizer, item["prompt"]))
        completion, mask = list(item["completion_ids"]), list(item["env_mask"])
        if len(completion) != len(mask):
            raise ValueError(f"item {item.get('id', '?')}: completion_ids ({len(completion)}) and env_mask "
                             f"({len(mask)}) differ in length")
        labels = [t if m else IGNORE_INDEX for t, m in zip(completion, mask)]
        return prompt + completion, [IGNORE_INDEX] * len(prompt) + labels
    if "segments" not in item or "prompt" not in item:
        raise ValueError("an SFT item needs 'prompt' and 'segments' [(text, trainable), ...] (templated_trajectories)"
                         " or 'completion_ids' and 'env_mask' (rejection_sampled_trajectories); got keys "
                         f"{sorted(item)}")
    ids = _ids(tokenizer, item["prompt"])
    labels = [IGNORE_INDEX] * len(ids)
    for text, trainable in item["segments"]:
        piece = _ids(tokenizer, text)
        ids += piece
        labels += piece if trainable else [IGNORE_INDEX] * len(piece)
    return ids, labels


def tokenize_sft(items: Sequence[Mapping], tokenizer, max_length: int = 1024) -> Dataset:
    """Items -> a Dataset of input_ids, attention_mask and labels.

    labels = -100 on the prompt and on non-trainable (retrieved) tokens; the EOS closing every item is trained, so
    the model learns to stop after its answer. Items longer than `max_length` tokens are dropped (with a warning)
    rather than cut: a cut trajectory would teach a half answer.
    """
    if isinstance(items, (str, bytes, Mapping)) or not isinstance(items, Sequence) or not items:
        raise ValueError("tokenize_sft needs a non-empty list of items (from templated_trajectories or "
                         "rejection_sampled_trajectories)")
    eos = tokenizer.eos_token_id
    if eos is None:
        raise ValueError("the tokenizer has no eos_token_id; set tokenizer.eos_token before tokenizing SFT data")
    columns: dict[str, list[list[int]]] = {"input_ids": [], "attention_mask": [], "labels": []}
    too_long = 0
    for item in items:
        ids, labels = _item_tokens(item, tokenizer)
        if not ids or ids[-1] != eos:
            ids, labels = ids + [eos], labels + [eos]
        if len(ids) > max_length:
            too_long += 1
            continue
        columns["input_ids"].append(ids)
        columns["attention_mask"].append([1] * len(ids))
        columns["labels"].append(labels)
    if too_long:
        logger.warning("tokenize_sft: dropped %d of %d items longer than max_length=%d tokens", too_long, len(items),
                       max_length)
    if not columns["input_ids"]:
        raise ValueError(f"every item is longer than max_length={max_length} tokens; raise max_length (a "
                         "synthetic-world passage is ~150 tokens, a prompt ~250)")
    return Dataset.from_dict(columns)


# ------------------------------------------------------------------------------------------------ training


def make_sft_trainer(
    model,
    tokenizer,
    items: Sequence[Mapping] | Dataset,
    *,
    output_dir: str | Path,
    epochs: float = 1.0,
    max_steps: int = -1,
    learning_rate: float = 5e-5,
    batch_size: int = 8,
    gradient_accumulation_steps: int = 1,
    max_length: int = 1024,
    seed: int = 0,
    logging_steps: int = 5,
    report_to: str = "none",
    use_cpu: bool | None = None,
    bf16: bool | None = None,
    gradient_checkpointing: bool = False,
    warmup_steps: float = 0,
):
    """An SFTTrainer over pre-tokenized items (see `sft_train` for the arguments).

    TRL's SFTTrainer (1.16) takes a pre-tokenized dataset with a `labels` column as is: it only truncates to
    max_length and drops rows without a trained token, and its collator pads labels with -100. So the masks built
    here reach the loss unchanged, and we keep TRL's loss, metrics (token accuracy, entropy) and progress bar rather
    than re-implementing them on a bare Trainer.
    """
    from trl import SFTConfig, SFTTrainer

    dataset = items if isinstance(items, Dataset) else tokenize_sft(items, tokenizer, max_length)
    cuda = torch.cuda.is_available()
    args = SFTConfig(
        output_dir=str(output_dir),
        num_train_epochs=epochs,
        max_steps=max_steps,
        learning_rate=learning_rate,
        per_device_train_batch_size=batch_size,
        gradient_accumulation_steps=gradient_accumulation_steps,
        warmup_steps=warmup_steps,
        max_length=max_length,
        seed=seed,
        logging_steps=logging_steps,
        report_to=report_to,
        save_strategy="no",
        use_cpu=(not cuda) if use_cpu is None else use_cpu,
        # SFTConfig defaults to bf16 and gradient checkpointing; neither suits a small model on a CPU.
        bf16=(cuda and torch.cuda.is_bf16_supported()) if bf16 is None else bf16,
        activation_checkpointing=gradient_checkpointing,  # the new name of gradient_checkpointing
        disable_tqdm=False,
    )
    return SFTTrainer(model=model, args=args, train_dataset=dataset, processing_class=tokenizer)


def sft_train(
    model,
    tokenizer,
    items: Sequence[Mapping] | Dataset,
    *,
    output_dir: str | Path,
    epochs: float = 1.0,
    learning_rate: float = 5e-5,
    batch_size: int = 8,
    max_length: int = 1024,
    seed: int = 0,
    logging_steps: int = 5,
    report_to: str = "none",
    use_cpu: bool | None = None,
    max_steps: int = -1,
    gradient_accumulation_steps: int = 1,
    bf16: bool | None = None,
    warmup_steps: float = 0,
) -> dict[str, Any]:
    """Supervised cold start on `items` (or a dataset from `tokenize_sft`), retrieved tokens masked from the loss.

    Trains `model` in place with TRL's SFTTrainer (progress bar shown; nothing saved to `output_dir` but what the
    trainer logs) and returns {"history": the trainer's log history (loss per logging step), "train_loss",
    "steps", "examples", "trained_tokens", "seconds"}. The model's train/eval mode is restored afterwards.
    `use_cpu` / `bf16` None: decided by whether a (bf16-capable) GPU is present.
    """
    dataset = items if isinstance(items, Dataset) else tokenize_sft(items, tokenizer, max_length)
    was_training = model.training
    trainer = make_sft_trainer(
        model, tokenizer, dataset, output_dir=output_dir, epochs=epochs, max_steps=max_steps,
        learning_rate=learning_rate, batch_size=batch_size, gradient_accumulation_steps=gradient_accumulation_steps,
        max_length=max_length, seed=seed, logging_steps=logging_steps, report_to=report_to, use_cpu=use_cpu,
        bf16=bf16, warmup_steps=warmup_steps,
    )
    try:
        output = trainer.train()
    finally:
        model.train(was_training)
    return {
        "history": list(trainer.state.log_history),
        "train_loss": float(output.training_loss),
        "steps": int(trainer.state.global_step),
        "examples": len(dataset),
        "trained_tokens": int(sum(sum(label != IGNORE_INDEX for label in row) for row in dataset["labels"])),
        "seconds": float(output.metrics.get("train_runtime", float("nan"))),
    }


__all__ = [
    "IGNORE_INDEX",
    "Hop",
    "hop_plan",
    "make_sft_trainer",
    "rejection_sampled_trajectories",
    "sft_train",
    "templated_trajectories",
    "tokenize_sft",
]
