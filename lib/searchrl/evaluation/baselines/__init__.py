"""The papers' inference baselines, evaluated by the same harness and scored into the same records as the search
policies, so one table shows both.

registry.py     BASELINES (name -> baseline), evaluate_baseline / evaluate_baselines
harness.py      BaselineRun (a baseline's inputs), batching with a progress bar, the EvalResult
answers.py      the "Answer: ..." / "So the answer is: ..." format and its parser (AnswerFormat scores it)
prompts.py      the instructions and how they become chat or plain prompts
single_pass.py  naive, cot, rag: one generation per question
ircot.py        IRCoT: retrieval after every reasoning sentence, with demonstrations read at run time
prompted.py     prompted_search:<protocol>: a protocol's prompt on the untrained model (evaluate itself)
trained.py      sft, rl_no_search: evaluate a checkpoint trained for that row
rstool.py       evidence_tool:<checkpoint>[@<answerer>]: R-Search-as-a-Tool (searchrl.evaluation.rstool)
"""

from searchrl.evaluation.baselines.answers import AnswerFormat, first_sentence, parse_answer
from searchrl.evaluation.baselines.harness import BaselineRun, MissingRetrieverError
from searchrl.evaluation.baselines.ircot import load_demos
from searchrl.evaluation.baselines.registry import (
    BASELINES,
    baseline_options,
    baseline_problem,
    evaluate_baseline,
    evaluate_baselines,
    split_name,
)

__all__ = [
    "BASELINES",
    "AnswerFormat",
    "BaselineRun",
    "MissingRetrieverError",
    "baseline_options",
    "baseline_problem",
    "evaluate_baseline",
    "evaluate_baselines",
    "first_sentence",
    "load_demos",
    "parse_answer",
    "split_name",
]
