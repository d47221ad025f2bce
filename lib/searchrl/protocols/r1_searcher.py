"""R1-Searcher (Song et al. 2025): <|begin_of_query|> / <|begin_of_documents|> inside <think>, then <answer>."""

from __future__ import annotations

import re

from searchrl.protocols.base import OBS_MARK, Parsed, SearchProtocol, closed_spans, looks_garbled, nonempty

# Section 2.1, "System Prompt for Data Selection" (given to an instruct model to rate question difficulty by the
# number of rollouts it needs). The extracted text carries a stray `"""` from the authors' code; it is left out.
DATA_SELECTION_PROMPT = (
    "You are a helpful assistant. Given a question, you should answer it by first thinking about the reasoning "
    "process in the mind and then providing the final answer. The output format of reasoning process and final "
    'answer are enclosed within <think> </think> and <answer> </answer> tags, respectively, i.e., "<think> '
    'reasoning process here </think><answer> final answer here </answer>". You should perform thinking with '
    "decomposing, reflecting, brainstorming, verifying, refining, and revising. Besides, you can perform searching "
    'for uncertain knowledge if necessary with the format of "<|begin_of_query|> search query (only keywords) '
    'here <|end_of_query|>". Then, the search system will provide you with the retrieval information with the '
    'format of "<|begin_of_documents|> ...search results... <|end_of_documents|>".'
)

# Section 2.2.2, "System Prompt for Base Model". The bold type of the paper (emphasis, not prompt text) is dropped.
BASE_MODEL_PROMPT = (
    "The User asks a question, and the Assistant solves it. The Assistant first thinks about the reasoning process "
    "in the mind and then provides the User with the final answer. The output format of reasoning process and "
    'final answer are enclosed within <think> </think> and <answer> </answer> tags, respectively, i.e., "<think> '
    'reasoning process here </think><answer> final answer here </answer>". During the thinking process, the '
    'Assistant can perform searching for uncertain knowledge if necessary with the format of "<|begin_of_query|> '
    'search query (only list keywords, such as "keyword_1 keyword_2 ...")<|end_of_query|>". A query must '
    "involve only a single triple. Then, the search system will provide the Assistant with the retrieval "
    'information with the format of "<|begin_of_documents|> ...search results... <|end_of_documents|>".'
)

_SYMBOLS = {
    "<think>": "T",
    "</think>": "t",
    "<|begin_of_query|>": "Q",
    "<|end_of_query|>": "q",
    "<answer>": "A",
    "</answer>": "a",
}
# Rules 1 and 3 of section 2.2.1 as one grammar over the model text (the prompt pre-fills "<think>"):
# - rule 1: one <think>...</think> holding the reasoning, then one <answer>...</answer> holding the answer, with
#   nothing but blank space between or after them (the prompt's example: "<think> ... </think><answer> ...");
# - rule 3: every query sits in <|begin_of_query|>...<|end_of_query|>, is not empty, and is the only thing a
#   documents block may follow: the model cannot produce documents without invoking retrieval. Queries, like the
#   released trajectories show, are made while thinking, so they sit inside <think>.
_GRAMMAR = re.compile(r"T(?:x|QxqO)*tAxa")


class R1SearcherProtocol(SearchProtocol):
    """R1-Searcher's protocol: the base-model prompt as a system turn, the question as the user turn."""

    name = "r1_searcher"
    query_open, query_close = "<|begin_of_query|>", "<|end_of_query|>"
    obs_open, obs_close = "<|begin_of_documents|>", "<|end_of_documents|>"
    answer_open, answer_close = "<answer>", "</answer>"
    think_open, think_close = "<think>", "</think>"
    system_prompt = BASE_MODEL_PROMPT
    data_selection_prompt = DATA_SELECTION_PROMPT
    instruction_role = "system"
    # The base-model layout R1-Searcher trains with; the assistant turn starts inside <think> (its released
    # trajectories never write the opening tag themselves).
    plain_template = "{system}\nUser: {question}\nAssistant: "
    response_prefix = "<think>"
    # Documents one per line between the tags, as in the released trajectories: "\n\n<|begin_of_documents|>\n(1)...".
    obs_inner_lead = "\n"
    obs_inner_trail = "\n"
    # Rule 1 permits "only the final short answer" in <answer>; the paper sets no number. 20 words admits every
    # answer in the released trajectories but a sentence-long one (see tests/test_protocols.py for the measured rate).
    max_answer_words = 20

    def render_thought(self, text: str, first: bool) -> str:
        """One <think> (pre-filled by the prompt) holds all reasoning and queries; the first thought follows it."""
        return f"{' ' if first else ''}{text} "

    def render_finish(self, reasoning: str, answer: str, evidence: list[str]) -> str:
        return f"{reasoning.replace('{answer}', answer)} {self.think_close}\n{self.answer_open} {answer} {self.answer_close}"

    def parse(self, text: str) -> Parsed:
        """Queries, the answer, and R1-Searcher's three format rules (section 2.2.1). With several answer spans
        the last one is the answer scored."""
        view = self.model_view(text)
        answers = closed_spans(view, self.answer_open, self.answer_close)
        answer = answers[-1].strip() if answers else None
        format_ok = (
            _GRAMMAR.fullmatch(self.symbolize(view, _SYMBOLS)) is not None  # rules 1 and 3
            and answer is not None
            and len(answer.split()) <= self.max_answer_words  # rule 1: only the short final answer
            and not looks_garbled(view.replace(OBS_MARK, " "))  # rule 2: no garbled or unreadable output
        )
        return Parsed(
            queries=nonempty(closed_spans(view, self.query_open, self.query_close)),
            answer=answer,
            format_ok=format_ok,
        )
