"""Baselines that answer in one generation: without retrieval (naive, cot) or after one retrieval with the
question (rag).

Each question gets one prompt and one greedy generation, batched with left padding through the rollout engine
with a protocol that never searches (`AnswerFormat`), so the trajectory and its finish flags are built as for a
search policy. For rag the documents sit in the prompt, not in the completion: model_tokens and total_tokens
both count only what the model wrote, and searches is 1 (the question, sent to the retriever once).
"""

from __future__ import annotations

import time

from searchrl.evaluation.baselines.answers import AnswerFormat
from searchrl.evaluation.baselines.harness import BaselineRun, eval_mode
from searchrl.evaluation.baselines.prompts import (
    COT_INSTRUCTION,
    NAIVE_INSTRUCTION,
    RAG_INSTRUCTION,
    question_block,
    render_prompt,
)
from searchrl.evaluation.evaluate import EvalResult, completion_text, score_trajectory
from searchrl.rollout import SearchRollout

# Generation budgets when the caller gives none: a short answer line, or reasoning then the line.
SHORT_ANSWER_TOKENS = 32
REASONING_TOKENS = 256


def single_pass(run: BaselineRun, *, instruction: str, retrieve: bool, default_tokens: int) -> EvalResult:
    """One prompt per question (`instruction`, then the documents when `retrieve`, then the question) and one
    greedy generation of at most `default_tokens` (or `run.max_new_tokens`); retrieval is one batched call with
    the batch's questions, checked and retried by the rollout engine."""
    if retrieve:
        run.require_retriever()
    tokens = run.tokens(default_tokens)
    rollout = run.rollout.replace(max_searches=0, max_turn_tokens=0, max_completion_tokens=tokens)
    fmt = AnswerFormat(f"baseline:{run.key}")
    engine = SearchRollout(fmt, run.retriever, run.tokenizer, run.turn_generator(fmt.stop_strings, rollout), rollout)
    records: list[dict] = []
    started = time.perf_counter()
    with eval_mode(run.model):
        for batch in run.batches(records):
            questions = [str(row["question"]).strip() for row in batch]
            found = engine.search(questions) if retrieve else [None] * len(batch)
            prompts = [render_prompt(run.tokenizer, [(f"{instruction}\n\n{question_block(q, docs)}", None)],
                                     chat=run.chat)
                       for q, docs in zip(questions, found)]
            trajs = engine.run([run.encode(p) for p in prompts])
            for row, question, docs, traj in zip(batch, questions, found, trajs):
                if docs is not None:
                    traj.queries.append(question)
                    traj.doc_ids.append([d.id for d in docs])
                    traj.empty_results += not docs
                records.append(score_trajectory(row, traj, completion_text(traj, run.tokenizer), fmt))
    return run.result(records, protocol=fmt.name, rollout=rollout, started=started, max_new_tokens=tokens,
                      top_k=run.top_k if retrieve else None, prompt=render_prompt(
                          run.tokenizer, [(f"{instruction}\n\n{{question}}", None)], chat=run.chat))


def naive(run: BaselineRun) -> EvalResult:
    """Direct answer from the model's own knowledge, no retrieval (Search-R1 Table 2 "Direct Inference";
    R1-Searcher Table 2 "Naive Generation"; R1-Searcher++ Table 1 "Directly Gen"; R-Search Table 2 "LLM w/o
    Search")."""
    return single_pass(run, instruction=NAIVE_INSTRUCTION, retrieve=False, default_tokens=SHORT_ANSWER_TOKENS)


def cot(run: BaselineRun) -> EvalResult:
    """Step-by-step reasoning, then an answer line, no retrieval (Search-R1 Table 2 "CoT")."""
    return single_pass(run, instruction=COT_INSTRUCTION, retrieve=False, default_tokens=REASONING_TOKENS)


def rag(run: BaselineRun) -> EvalResult:
    """Retrieve top_k documents with the question once, put them in the prompt, answer (Search-R1 Table 2 "RAG";
    R1-Searcher Table 2 / R1-Searcher++ Table 1 "Standard RAG"; R-Search Table 2 "Vanilla RAG")."""
    return single_pass(run, instruction=RAG_INSTRUCTION, retrieve=True, default_tokens=SHORT_ANSWER_TOKENS)


__all__ = ["REASONING_TOKENS", "SHORT_ANSWER_TOKENS", "cot", "naive", "rag", "single_pass"]
