"""LLM-as-judge accuracy (R1-Searcher's ACC_L, R1-Searcher++'s LasJ): a model reads the question, the golden answers
and the prediction and says whether the prediction is correct.

    judge = make_judge("openai:gpt-4o-mini@http://localhost:8000/v1")   # or "local:smollm2-135m-instruct"
    summary = score_records(result.records, judge, cache=run_dir / "judge_cache.jsonl")
    summary.mean, summary.unparsed

Backends are registered in `JUDGE_BACKENDS` and picked by the setting string (see `searchrl.judge.setting`).
"""

from searchrl.judge.base import Chat, Judge
from searchrl.judge.cache import VerdictCache, verdict_key
from searchrl.judge.endpoint import EndpointJudge, JudgeEndpointError, chat_completions_url
from searchrl.judge.local import DEFAULT_LOCAL_JUDGE, LocalJudge
from searchrl.judge.score import JUDGE_FIELD, JudgeSummary, score_records
from searchrl.judge.setting import JUDGE_BACKENDS, judge_setting_problem, make_judge, parse_endpoint_argument
from searchrl.judge.verdict import JUDGE_PROMPT, PROMPT_VERSION, Verdict, judge_messages, judge_prompt, parse_verdict

__all__ = [
    "DEFAULT_LOCAL_JUDGE", "JUDGE_BACKENDS", "JUDGE_FIELD", "JUDGE_PROMPT", "PROMPT_VERSION", "Chat", "EndpointJudge",
    "Judge", "JudgeEndpointError", "JudgeSummary", "LocalJudge", "Verdict", "VerdictCache", "chat_completions_url",
    "judge_messages", "judge_prompt", "judge_setting_problem", "make_judge", "parse_endpoint_argument",
    "parse_verdict", "score_records", "verdict_key",
]
