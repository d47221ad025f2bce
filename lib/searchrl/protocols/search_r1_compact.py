"""Search-R1's tags and grammar under a short instruction, for CPUs where every prompt token costs training time.

On the bundled SmolLM2-135M the paper's Table 1 template plus the chat template's default system line is 157
tokens with a short question. A demo rollout's completion is about 260 tokens (100 written by the model, the rest
retrieved documents), so the prompt is over a third of what each training forward and backward pass processes.
This instruction states the same rules in a third of the words and takes the system turn,
so the chat template adds no default system line of its own: 70 tokens with the same question. Parsing, tags and
the format grammar are Search-R1's, so rewards and metrics are unchanged; only the prompt differs, which makes it a
protocol ablation like any other.
"""

from __future__ import annotations

from searchrl.protocols.search_r1 import SearchR1Protocol

COMPACT_PROMPT = (
    "Reason in <think> </think> after each new piece of information. Search with <search> query </search>; "
    "results arrive in <information> </information>. Answer in <answer> </answer>, briefly."
)


class SearchR1CompactProtocol(SearchR1Protocol):
    """Search-R1 with `COMPACT_PROMPT` as the system turn and the question as the user turn."""

    name = "search_r1_compact"
    system_prompt = COMPACT_PROMPT
