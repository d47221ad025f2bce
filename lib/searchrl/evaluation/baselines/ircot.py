"""IRCoT: retrieval interleaved with chain-of-thought, one reasoning sentence at a time.

For each question: retrieve top_k documents with the question; then repeat: prompt with the documents gathered
so far, the question and the reasoning so far (as the start of the model's reply), keep the first sentence the
model writes, stop if it states the answer ("So the answer is: ..."), otherwise retrieve with that sentence and
add the new documents (up to `max_docs` in all, first found kept). After `max_steps` sentences without an answer,
or when the model writes nothing more, the harness appends "So the answer is:" and lets the model finish the
line, as IRCoT's reader answers from what was gathered; such an answer is recorded with format_ok False and
finish "step_limit" (or "stopped"), and the appended words count as environment tokens, not model tokens.

Record fields: searches counts retriever queries (the question plus one per reasoning sentence that did not
answer), queries and doc_ids list them, model_tokens counts the kept sentences' tokens (text generated past the
first sentence of a step is dropped, as IRCoT drops it), hit_search_budget marks the step limit.

Demonstrations come from IRCoT's prompt files (`*_gold_with_3_distractors.txt`, in the shared data folder's
`ircot-demos/`): each a few "Wikipedia Title:" paragraphs, a question and its answer. They are read at run time
and laid out in this module's own format; their answers are direct (the files hold no reasoning chains), so they
show the document layout and the closing sentence, while the instruction asks for the sentence-by-sentence
reasoning. Without the files the prompt is zero-shot.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from pathlib import Path

from searchrl.data.loaders import default_data_dir
from searchrl.data.schema import Doc
from searchrl.evaluation.baselines.answers import ANSWER_SENTENCE, AnswerFormat, first_sentence, parse_answer
from searchrl.evaluation.baselines.harness import BaselineRun, eval_mode
from searchrl.evaluation.baselines.prompts import IRCOT_INSTRUCTION, question_block, render_prompt
from searchrl.evaluation.evaluate import EvalResult, completion_text, score_trajectory
from searchrl.rollout import SearchRollout, Trajectory

DEMO_FOLDER = "ircot-demos"
DEMO_SUFFIX = "_gold_with_3_distractors.txt"
DEMO_DATASETS = ("hotpotqa", "2wikimultihopqa", "musique")


# ------------------------------------------------------------------------------------------------ demonstrations


@dataclass(frozen=True)
class Demo:
    """One worked example: its paragraphs, question and answer."""

    docs: tuple[Doc, ...]
    question: str
    answer: str


def demo_path(demos: str | Path | None) -> Path | None:
    """The demonstration file `demos` names: a path, or a dataset name ("hotpotqa", "2wikimultihopqa",
    "musique") looked up in the shared data folder. None for no demonstrations, or when the named dataset's
    file is not there (the shared data folder is optional); a path that does not exist raises."""
    if demos is None or demos == "":
        return None
    name = str(demos).strip()
    if name.lower() in DEMO_DATASETS:
        root = default_data_dir()
        path = root / DEMO_FOLDER / f"{name.lower()}{DEMO_SUFFIX}" if root is not None else None
        return path if path is not None and path.is_file() else None
    path = Path(name).expanduser()
    if not path.is_file():
        raise FileNotFoundError(f"no IRCoT demonstration file at {path}; give a file, one of {DEMO_DATASETS} "
                                "(read from the shared data folder), or demos=None for a zero-shot prompt")
    return path


def load_demos(path: str | Path, n: int | None = None, max_words: int = 0) -> list[Demo]:
    """The first `n` (all when None) examples of an IRCoT prompt file, each paragraph cut to `max_words` words
    (0: whole). Blocks start at "# METADATA" lines; paragraphs at "Wikipedia Title:" lines; the question follows
    "Q:" and the answer "A:"."""
    text = Path(path).read_text(encoding="utf-8")
    blocks = [b for b in re.split(r"^# METADATA.*$", text, flags=re.MULTILINE) if b.strip()]
    demos = []
    for number, block in enumerate(blocks):
        demo = _parse_demo(block, f"{Path(path).name}#{number}", max_words)
        if demo is not None:
            demos.append(demo)
        if n is not None and len(demos) >= n:
            break
    return demos


def _parse_demo(block: str, where: str, max_words: int) -> Demo | None:
    q_match = re.search(r"^Q:(.*?)^A:(.*)$", block, flags=re.MULTILINE | re.DOTALL)
    if q_match is None:
        return None
    question_lines = [line.strip() for line in q_match.group(1).strip().splitlines() if line.strip()]
    # The files open every question with a fixed instruction line; the question is what follows it.
    if len(question_lines) > 1 and question_lines[0].lower().startswith("answer the following"):
        question_lines = question_lines[1:]
    answer = q_match.group(2).strip().splitlines()[0].strip() if q_match.group(2).strip() else ""
    if not question_lines or not answer:
        return None
    docs = []
    for i, para in enumerate(re.split(r"^Wikipedia Title:", block[: q_match.start()], flags=re.MULTILINE)[1:]):
        title, _, body = para.partition("\n")
        words = body.split()
        if max_words:
            words = words[:max_words]
        docs.append(Doc(f"{where}.{i}", title.strip(), " ".join(words)))
    return Demo(tuple(docs), " ".join(question_lines), answer)


# ------------------------------------------------------------------------------------------------ the loop


@dataclass
class _Chain:
    """One question's reasoning chain and what it retrieved."""

    row: dict
    docs: list[Doc] = field(default_factory=list)
    sentences: list[str] = field(default_factory=list)
    queries: list[str] = field(default_factory=list)
    doc_ids: list[list[str]] = field(default_factory=list)
    empty_results: int = 0
    finish: str = ""  # "answer", "step_limit" or "stopped" (the model wrote no further sentence)
    cut: bool = False  # a step's sentence hit the step's token budget before it ended
    forced: str | None = None  # the answer completed after the harness appended ANSWER_SENTENCE

    def add(self, query: str, docs: list[Doc], max_docs: int) -> None:
        self.queries.append(query)
        self.doc_ids.append([d.id for d in docs])
        self.empty_results += not docs
        have = {d.id for d in self.docs}
        for doc in docs:
            if len(self.docs) < max_docs and doc.id not in have:
                self.docs.append(doc)
                have.add(doc.id)

    @property
    def reasoning(self) -> str:
        return " ".join(self.sentences)


def ircot(run: BaselineRun, *, max_steps: int = 5, max_step_tokens: int = 40, max_docs: int = 9,
          demos: str | Path | None = "hotpotqa", n_demos: int = 2, demo_max_words: int = 60,
          force_answer: bool = True, answer_tokens: int = 24) -> EvalResult:
    """IRCoT: after each reasoning sentence, retrieve with it and add the new documents (Search-R1 Table 2
    "IRCoT"; R1-Searcher Table 2, R1-Searcher++ Table 1 and R-Search Table 2 "IRCoT").

    `max_steps` reasoning sentences at most, each generated within `max_step_tokens`; `max_docs` documents in
    the prompt at most; `demos` a demonstration file or dataset name (None: zero-shot) of which `n_demos`
    examples are shown, paragraphs cut to `demo_max_words` words; `force_answer` completes "So the answer is:"
    within `answer_tokens` when the chain ends without an answer. `max_new_tokens`, when given, replaces
    `max_step_tokens`.
    """
    run.require_retriever()
    if max_steps < 1 or max_step_tokens < 1 or max_docs < 1 or n_demos < 0 or answer_tokens < 1:
        raise ValueError("ircot needs max_steps, max_step_tokens, max_docs and answer_tokens >= 1 and n_demos >= 0")
    step_tokens = run.tokens(max_step_tokens)
    path = demo_path(demos) if n_demos else None
    shown = load_demos(path, n_demos, demo_max_words) if path is not None else []
    rollout = run.rollout.replace(max_searches=max_steps, max_turn_tokens=step_tokens,
                                  max_completion_tokens=max_steps * step_tokens + answer_tokens)
    fmt = AnswerFormat(f"baseline:{run.key}")
    # Every step is a new prompt (the documents change), so no cache may be kept between steps.
    generator = run.turn_generator([], rollout, reuse_cache=False)
    engine = SearchRollout(fmt, run.retriever, run.tokenizer, generator, rollout)
    records: list[dict] = []
    started = time.perf_counter()
    with eval_mode(run.model):
        for batch in run.batches(records):
            chains = [_Chain(dict(row)) for row in batch]
            _retrieve(engine, chains, [str(c.row["question"]).strip() for c in chains], max_docs)
            for step in range(max_steps):
                active = [c for c in chains if not c.finish]
                if not active:
                    break
                run.show_step(f"step {step + 1} of at most {max_steps}, {len(active)} reasoning")
                texts = _generate(run, generator, shown, active, [c.reasoning for c in active], step_tokens)
                searching = []
                for chain, (text, finish) in zip(active, texts):
                    sentence = first_sentence(text)
                    if not sentence:
                        chain.finish = "stopped"
                        continue
                    chain.cut |= finish == "length" and sentence == text.strip()
                    chain.sentences.append(sentence)
                    if parse_answer(sentence) is not None:
                        chain.finish = "answer"
                    elif step == max_steps - 1:
                        chain.finish = "step_limit"
                    else:
                        searching.append(chain)
                _retrieve(engine, searching, [c.sentences[-1] for c in searching], max_docs)
            unanswered = [c for c in chains if c.finish != "answer"]
            if force_answer and unanswered:
                run.show_step(f"answering for {len(unanswered)} without an answer")
                prefills = [_join(c.reasoning, ANSWER_SENTENCE) for c in unanswered]
                for chain, (text, _) in zip(unanswered, _generate(run, generator, shown, unanswered, prefills,
                                                                   answer_tokens)):
                    chain.forced = first_sentence(text)
            for chain in chains:
                records.append(_record(run, fmt, chain, shown))
    settings = {"max_steps": max_steps, "max_step_tokens": step_tokens, "max_docs": max_docs,
                "demos": str(path) if path is not None else None, "n_demos": len(shown),
                "demo_max_words": demo_max_words, "force_answer": force_answer, "answer_tokens": answer_tokens}
    return run.result(records, protocol=fmt.name, rollout=rollout, started=started, top_k=run.top_k, **settings)


def _retrieve(engine: SearchRollout, chains: list[_Chain], queries: list[str], max_docs: int) -> None:
    if chains:
        for chain, query, docs in zip(chains, queries, engine.search(queries), strict=True):
            chain.add(query, docs, max_docs)


def _prompt(run: BaselineRun, demos: list[Demo], chain: _Chain, prefill: str) -> str:
    exchanges = [(question_block(d.question, list(d.docs)), f"{ANSWER_SENTENCE} {d.answer}.") for d in demos]
    exchanges.append((question_block(chain.row["question"], chain.docs), None))
    first, reply = exchanges[0]
    exchanges[0] = (f"{IRCOT_INSTRUCTION}\n\n{first}", reply)
    return render_prompt(run.tokenizer, exchanges, chat=run.chat, prefill=prefill)


def _generate(run: BaselineRun, generator, demos: list[Demo], chains: list[_Chain], prefills: list[str],
              budget: int) -> list[tuple[str, str]]:
    """(text, finish) of one greedy generation per chain, its reply started with its prefill."""
    reset = getattr(generator, "reset", None)
    if reset:
        reset()
    prompts = [run.encode(_prompt(run, demos, c, p)) for c, p in zip(chains, prefills)]
    outputs = generator.generate_turn(prompts, [budget] * len(prompts))
    if reset:
        reset()
    return [(run.tokenizer.decode(out.token_ids, skip_special_tokens=True), out.finish) for out in outputs]


def _join(*parts: str) -> str:
    return " ".join(p for p in parts if p)


def _record(run: BaselineRun, fmt: AnswerFormat, chain: _Chain, demos: list[Demo]) -> dict:
    """The chain as a trajectory (kept sentences sampled; the appended answer opener not), scored."""
    traj = Trajectory(prompt_ids=run.encode(_prompt(run, demos, chain, "")))
    traj.append(run.encode(chain.reasoning), sampled=True)
    if chain.forced is not None:
        traj.append(run.encode((" " if chain.sentences else "") + ANSWER_SENTENCE), sampled=False)
        traj.append(run.encode(" " + chain.forced if chain.forced else ""), sampled=True)
    traj.budget = len(traj.completion_ids)
    traj.queries, traj.doc_ids, traj.empty_results = chain.queries, chain.doc_ids, chain.empty_results
    traj.finish, traj.done = chain.finish, True
    traj.hit_search_budget = chain.finish == "step_limit"
    traj.hit_length_budget = chain.cut
    record = score_trajectory(chain.row, traj, completion_text(traj, run.tokenizer), fmt)
    if chain.forced is not None:
        record["format_ok"] = False  # the model did not state the answer itself: the harness asked for it
    record["reasoning_steps"] = len(chain.sentences)
    return record


__all__ = ["DEMO_DATASETS", "Demo", "demo_path", "ircot", "load_demos"]
