"""The judge interface shared by every backend: chats in, reply texts out; verdicts are built here once."""

from __future__ import annotations

from collections.abc import Sequence

from searchrl.judge.verdict import Verdict, judge_messages, parse_verdict

Chat = list[dict[str, str]]


class Judge:
    """A backend answers chats (`complete`); `judge` turns questions, golden answers and predictions into verdicts.

    `name` identifies the judging model in cache keys and reports (two judges with the same name are assumed to give
    the same verdicts). `batch_size` is how many questions `score_records` hands over at a time, i.e. how often
    progress and the cache are written.
    """

    name: str = "judge"
    batch_size: int = 8

    def complete(self, chats: Sequence[Chat]) -> list[str]:
        """One reply text per chat, in order."""
        raise NotImplementedError

    def judge(self, questions: Sequence[str], golden_answers: Sequence[Sequence[str] | str],
              predictions: Sequence[str | None]) -> list[Verdict]:
        """One verdict per question. An empty prediction is wrong without asking (a judge may call nothing correct)."""
        if not len(questions) == len(golden_answers) == len(predictions):
            raise ValueError(f"judge: got {len(questions)} questions, {len(golden_answers)} golden-answer lists and "
                             f"{len(predictions)} predictions; they must be the same length")
        asked = [i for i, p in enumerate(predictions) if p is not None and str(p).strip()]
        replies = self.complete([judge_messages(questions[i], golden_answers[i], str(predictions[i])) for i in asked])
        if len(replies) != len(asked):
            raise RuntimeError(f"judge {self.name!r} returned {len(replies)} replies for {len(asked)} chats")
        verdicts = [Verdict(0, "", parsed=True)] * len(questions)
        for i, reply in zip(asked, replies):
            verdicts[i] = parse_verdict(reply)
        return verdicts

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r})"


__all__ = ["Chat", "Judge"]
