"""R-Search's evidence reward (eq. 4): a frozen model of another family answers the question from the policy's
evidence alone, and the reward is the F1 of that cross-model answer against the golden answers.

The answering model is an argument: any callable `list[str] prompts -> list[str] answers`, or a model path/name that
is loaded once, on first use, with `searchrl.models.load_policy` (default: the bundled SmolLM2-135M-Instruct).
The prompt is the protocol's `evidence_prompt(question, evidence)` (R-Search's Table 5 template, Appendix B.2); for a
protocol without one, the same template is filled in here.

A completion is judged only when it searched at least once and wrote a non-empty evidence box. Otherwise it gets
`missing` (0.0 by default, as R-Search's released training code does: no judged evidence, no evidence reward). Pass
`missing=None` to mark those samples "not applicable" instead: under TRL's default sum-then-normalise aggregation
the summed reward is unchanged (None counts as 0), but the logged mean of this reward then covers judged samples only.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from searchrl.protocols.base import SearchProtocol

from .base import REWARDS, RewardFunction, RewardSpec
from .inputs import Sample, column
from .metrics import f1_score

DEFAULT_ANSWERER_MODEL = "smollm2-135m-instruct"

try:  # one source of truth: the R-Search protocol's Table 5 template ({evidence} and {query} are filled in)
    from searchrl.protocols.r_search import EVIDENCE_TEMPLATE
except ImportError:  # the protocol module is absent: the same template, kept here
    EVIDENCE_TEMPLATE = (
        "Answer the question based on the given passages. Only give me the answer and do not output any other "
        "words.\nThe following are given passages: {evidence}\nQuestion: {query}\nAnswer:"
    )

Answerer = Callable[[list[str]], list[str]]


def evidence_prompt(protocol: SearchProtocol, question: str, evidence: str) -> str:
    """The cross-model prompt: the protocol's own `evidence_prompt(question, evidence)` when it has one (the R-Search
    protocol does), else R-Search's Table 5 template."""
    builder = getattr(protocol, "evidence_prompt", None)
    if callable(builder):
        return builder(question, evidence)
    return EVIDENCE_TEMPLATE.replace("{evidence}", str(evidence).strip()).replace("{query}", str(question).strip())


class TransformersAnswerer:
    """Greedy short answers from a causal LM (chat template applied when the tokenizer has one)."""

    def __init__(self, model: Any, tokenizer: Any, *, max_new_tokens: int = 64, batch_size: int = 8) -> None:
        self.model = model.eval()
        self.tokenizer = tokenizer
        self.max_new_tokens = max_new_tokens
        self.batch_size = batch_size

    def _render(self, prompt: str) -> str:
        if getattr(self.tokenizer, "chat_template", None):
            messages = [{"role": "user", "content": prompt}]
            return self.tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
        return prompt

    def __call__(self, prompts: list[str]) -> list[str]:
        import torch

        tokenizer = self.tokenizer
        pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
        answers: list[str] = []
        previous_side = tokenizer.padding_side
        tokenizer.padding_side = "left"  # generation continues from the right end of every row
        if tokenizer.pad_token_id is None:
            tokenizer.pad_token = tokenizer.eos_token
        try:
            for start in range(0, len(prompts), self.batch_size):
                texts = [self._render(p) for p in prompts[start : start + self.batch_size]]
                batch = tokenizer(texts, return_tensors="pt", padding=True, add_special_tokens=False)
                batch = {k: v.to(self.model.device) for k, v in batch.items()}
                with torch.no_grad():
                    output = self.model.generate(
                        **batch, max_new_tokens=self.max_new_tokens, do_sample=False, pad_token_id=pad_id
                    )
                new_tokens = output[:, batch["input_ids"].shape[1] :]
                answers.extend(t.strip() for t in tokenizer.batch_decode(new_tokens, skip_special_tokens=True))
        finally:
            tokenizer.padding_side = previous_side
        return answers


def load_answerer(
    model_name_or_path: str = DEFAULT_ANSWERER_MODEL, *, max_new_tokens: int = 64, batch_size: int = 8
) -> TransformersAnswerer:
    """A frozen answering model: through `searchrl.models.load_policy`, or transformers for a local folder."""
    try:
        from searchrl.models import load_policy
    except ImportError:
        load_policy = None
    if load_policy is not None:
        model, tokenizer = load_policy(model_name_or_path)
    elif Path(model_name_or_path).is_dir():
        from transformers import AutoModelForCausalLM, AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(model_name_or_path)
        model = AutoModelForCausalLM.from_pretrained(model_name_or_path)
    else:
        raise RuntimeError(
            f"cannot load the evidence answerer {model_name_or_path!r}: searchrl.models.load_policy is unavailable "
            "and it is not a local model folder; pass answerer=<callable> or answerer_model=<folder>"
        )
    return TransformersAnswerer(model, tokenizer, max_new_tokens=max_new_tokens, batch_size=batch_size)


class EvidenceReward(RewardFunction):
    """F1 of a frozen model's answer from the parsed evidence (R-Search eq. 4)."""

    def __init__(
        self,
        name: str,
        protocol: SearchProtocol,
        *,
        answerer: Answerer | None = None,
        answerer_model: str | None = None,
        question_column: str = "question",
        missing: float | None = 0.0,
        max_new_tokens: int = 64,
        batch_size: int = 8,
    ) -> None:
        super().__init__(name, protocol)
        if answerer is not None and answerer_model is not None:
            raise ValueError(f"reward {name!r}: give either answerer (a callable) or answerer_model (a path), not both")
        if answerer is not None and not callable(answerer):
            raise TypeError(f"reward {name!r}: answerer must be a callable list[str] -> list[str]")
        self._answerer = answerer
        self.answerer_model = answerer_model or DEFAULT_ANSWERER_MODEL
        self.question_column = question_column
        self.missing = missing
        self.max_new_tokens = max_new_tokens
        self.batch_size = batch_size

    @property
    def answerer(self) -> Answerer:
        """The answering model, loaded on first use so that building a preset stays cheap."""
        if self._answerer is None:
            self._answerer = load_answerer(
                self.answerer_model, max_new_tokens=self.max_new_tokens, batch_size=self.batch_size
            )
        return self._answerer

    def score(self, samples: list[Sample], prompts: list[Any] | None, kwargs: dict[str, Any]) -> list[float | None]:
        questions = column(kwargs, self.question_column, len(samples), self.__name__)
        judged = [
            (i, evidence_prompt(self.protocol, str(questions[i]), s.parsed.evidence))
            for i, s in enumerate(samples)
            if s.num_searches >= 1 and s.parsed.evidence is not None and s.parsed.evidence.strip()
        ]
        rewards: list[float | None] = [self.missing] * len(samples)
        if judged:
            answers = list(self.answerer([prompt for _, prompt in judged]))
            if len(answers) != len(judged):
                raise ValueError(
                    f"reward {self.__name__!r}: the answerer returned {len(answers)} answers for {len(judged)} prompts"
                )
            for (i, _), answer in zip(judged, answers):
                rewards[i] = f1_score("" if answer is None else str(answer), samples[i].golden_answers)
        log_metric = kwargs.get("log_metric")
        if callable(log_metric) and samples:
            log_metric(f"{self.__name__}/judged_fraction", len(judged) / len(samples))
        return rewards


REWARDS.register("evidence_r_search", RewardSpec(EvidenceReward, {}), doc="F1 of a frozen model answering from the evidence (R-Search eq. 4)")

__all__ = [
    "DEFAULT_ANSWERER_MODEL",
        "EVIDENCE_TEMPLATE",
    "EvidenceReward",
    "TransformersAnswerer",
    "evidence_prompt",
    "load_answerer",
]
