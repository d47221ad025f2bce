"""Prompt text of the baselines without a tag protocol, and how it becomes a model prompt.

A prompt is a list of exchanges (user text, reply or None) plus an optional prefill: the start of the model's own
reply (IRCoT's reasoning so far). With a chat template the exchanges are chat turns; without one they are laid
out as plain text, each reply after "Response:". The instructions are short, so that a small model spends its
context on the question and the documents.
"""

from __future__ import annotations

from collections.abc import Sequence

NAIVE_INSTRUCTION = (
    "Answer the question from what you know. Reply with a single line: 'Answer:' followed by the answer in a few "
    "words."
)
COT_INSTRUCTION = (
    "Answer the question from what you know. Think it through step by step, then end with a line 'Answer:' "
    "followed by the answer in a few words."
)
RAG_INSTRUCTION = (
    "Answer the question using the documents below. Reply with a single line: 'Answer:' followed by the answer in "
    "a few words."
)
IRCOT_INSTRUCTION = (
    "Answer the question using the documents. Reason one short sentence at a time; after each sentence, documents "
    "matching it are added. Once you know the answer, end with the sentence 'So the answer is: <answer>.'"
)


def format_docs(docs: Sequence) -> str:
    """Documents as numbered lines "[i] Title: text", whitespace collapsed; a note when there are none."""
    if not docs:
        return "(no documents found)"
    lines = []
    for i, doc in enumerate(docs, start=1):
        title = " ".join(str(getattr(doc, "title", "")).split())
        text = " ".join(str(doc.text).split())
        lines.append(f"[{i}] {title}: {text}" if title else f"[{i}] {text}")
    return "\n".join(lines)


def question_block(question: str, docs: Sequence | None = None) -> str:
    """The user text for one question: its documents (when the baseline retrieves) and the question."""
    question = " ".join(str(question).split())
    if docs is None:
        return f"Question: {question}"
    return f"Documents:\n{format_docs(docs)}\n\nQuestion: {question}"


def render_prompt(tokenizer, exchanges: Sequence[tuple[str, str | None]], *, chat: bool = True,
                  prefill: str = "") -> str:
    """The prompt text for `exchanges` [(user text, reply), ..., (user text, None)], the model's reply started with
    `prefill`. A chat template is used when `chat` and the tokenizer has one."""
    if not exchanges or exchanges[-1][1] is not None:
        raise ValueError("a prompt ends with a user turn that has no reply yet: [..., (user_text, None)]")
    if chat and tokenizer is not None and getattr(tokenizer, "chat_template", None):
        messages = []
        for user, reply in exchanges:
            messages.append({"role": "user", "content": user})
            if reply is not None:
                messages.append({"role": "assistant", "content": reply})
        text = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
        return text + prefill
    parts = [f"{user}\nResponse: {reply}\n\n" for user, reply in exchanges[:-1]]
    parts.append(f"{exchanges[-1][0]}\nResponse:" + (f" {prefill}" if prefill else ""))
    return "".join(parts)


__all__ = ["COT_INSTRUCTION", "IRCOT_INSTRUCTION", "NAIVE_INSTRUCTION", "RAG_INSTRUCTION", "format_docs",
           "question_block", "render_prompt"]
