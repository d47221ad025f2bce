"""Rendering trajectories: `render_trajectory` shows one trajectory as HTML with the retrieved spans boxed, so a
reader can see at a glance which tokens the model wrote and which the search engine appended.

`render_trajectory_text` does the same for terminals; `trajectory_pieces` splits a completion into its kinds of span.
"""

from __future__ import annotations

import html
from collections.abc import Mapping
from typing import Any

import pandas as pd

from searchrl.protocols import get_protocol
from searchrl.protocols.base import SearchProtocol

__all__ = ["render_trajectory", "render_trajectory_text", "trajectory_pieces"]


def trajectory_pieces(text: str, protocol: SearchProtocol) -> list[tuple[str, str]]:
    """Split a completion into (kind, text) pieces: "retrieved", "query", "internal", "evidence", "answer" or
    "text" ("internal": an internal-answer span of a protocol that has them, R1-Searcher++).

    Retrieved blocks run from the observation open tag to its close tag (or to the end when never closed), like
    the parsers read them; queries and answers are found only in the model's own text, tags included.
    """
    pieces: list[tuple[str, str]] = []
    pos = 0
    while pos < len(text):
        start = text.find(protocol.obs_open, pos)
        if start < 0:
            pieces += _model_pieces(text[pos:], protocol)
            break
        pieces += _model_pieces(text[pos:start], protocol)
        end = text.find(protocol.obs_close, start + len(protocol.obs_open))
        end = len(text) if end < 0 else end + len(protocol.obs_close)
        pieces.append(("retrieved", text[start:end]))
        pos = end
    return [(kind, piece) for kind, piece in pieces if piece]


def _model_pieces(text: str, protocol: SearchProtocol) -> list[tuple[str, str]]:
    """Queries, internal-answer spans (protocols with `internal_open`, R1-Searcher++), evidence boxes (protocols
    with `evidence_open`, R-Search) and answers in a stretch of model text; the rest is plain text."""
    spans = {"query": (protocol.query_open, protocol.query_close),
             "internal": (getattr(protocol, "internal_open", ""), getattr(protocol, "internal_close", "")),
             "evidence": (getattr(protocol, "evidence_open", ""), getattr(protocol, "evidence_close", "")),
             "answer": (protocol.answer_open, protocol.answer_close)}
    pieces: list[tuple[str, str]] = []
    pos = 0
    while pos < len(text):
        candidates = [(text.find(tags[0], pos), kind, tags[0]) for kind, tags in spans.items() if tags[0]]
        candidates = [c for c in candidates if c[0] >= 0]
        if not candidates:
            break
        start, kind, tag = min(candidates)
        end = _span_end(text, start, tag, spans[kind][1])
        if end is None:  # an unclosed tag: leave the rest as plain text
            break
        pieces += [("text", text[pos:start]), (kind, text[start:end])]
        pos = end
    pieces.append(("text", text[pos:]))
    return pieces


def _span_end(text: str, start: int, open_tag: str, close_tag: str) -> int | None:
    """End offset of the span opened at `start`; an opening tag ending in "{" (\\boxed{) closes at its balancing "}"."""
    if open_tag.endswith("{") and close_tag == "}":
        depth = 0
        for i in range(start + len(open_tag) - 1, len(text)):
            depth += {"{": 1, "}": -1}.get(text[i], 0)
            if depth == 0:
                return i + 1
        return None
    end = text.find(close_tag, start + len(open_tag))
    return None if end < 0 else end + len(close_tag)


def _unpack(record_or_text, question: str | None) -> tuple[str, dict[str, Any]]:
    if isinstance(record_or_text, str):
        return record_or_text, {"question": question} if question else {}
    if isinstance(record_or_text, pd.Series):
        record_or_text = record_or_text.to_dict()
    if not isinstance(record_or_text, Mapping) or "completion" not in record_or_text:
        raise TypeError("render a completion string or an evaluation record (a row of EvalResult.records with a "
                        f"'completion' column), got {type(record_or_text).__name__}")
    info = dict(record_or_text)
    if question:
        info["question"] = question
    return str(info["completion"]), info


_STYLES = {
    "retrieved": "display:block;background:#ececec;color:#555;border:1px solid #bdbdbd;border-radius:4px;"
                 "padding:4px 6px;margin:4px 0;",
    "query": "background:#cfe3ff;border-radius:3px;padding:0 2px;",
    "answer": "background:#c9f2c9;border-radius:3px;padding:0 2px;font-weight:bold;",
    "evidence": "display:block;background:#fff3cd;border:1px solid #e0b84c;border-radius:4px;padding:4px 6px;"
                "margin:4px 0;",
    "internal": "display:block;background:#efe6fb;border:1px solid #a98bd6;border-radius:4px;padding:4px 6px;"
                "margin:4px 0;",
}


def render_trajectory(record_or_text, protocol: SearchProtocol | str, question: str | None = None) -> str:
    """HTML for one trajectory: retrieved blocks in a grey box labelled "retrieved", queries blue, internal-answer
    spans (R1-Searcher++) in a violet box labelled "internal (from memory)", the evidence box (R-Search) in an amber
    box labelled "evidence", answer green.

    Accepts a completion string or an evaluation record (dict or DataFrame row); a record adds a header with the
    question, golden answers, prediction and scores. All text is HTML-escaped.
    """
    protocol = get_protocol(protocol)
    text, info = _unpack(record_or_text, question)
    parts = [('<div class="searchrl-trajectory" style="font-family:monospace;white-space:pre-wrap;'
              'line-height:1.4;border:1px solid #ddd;padding:8px;">')]
    parts.append(_header_html(info))
    for kind, piece in trajectory_pieces(text, protocol):
        body = html.escape(piece)
        if kind == "retrieved":
            parts.append(f'<span class="retrieved" title="retrieved: appended by the search engine, not trained" '
                         f'style="{_STYLES[kind]}"><small style="color:#888;font-weight:bold;">retrieved</small>\n'
                         f"{body}</span>")
        elif kind == "evidence":
            parts.append(f'<span class="evidence" title="evidence: written by the policy, trained, and judged by '
                         f'the evidence reward" style="{_STYLES[kind]}"><small style="color:#8a6d1a;'
                         f'font-weight:bold;">evidence</small>\n{body}</span>')
        elif kind == "internal":
            parts.append(f'<span class="internal" title="internal: answered from the model\'s own knowledge, no '
                         f'search" style="{_STYLES[kind]}"><small style="color:#6a4c9c;font-weight:bold;">internal '
                         f'(from memory)</small>\n{body}</span>')
        elif kind in _STYLES:
            parts.append(f'<mark class="{kind}" style="{_STYLES[kind]}">{body}</mark>')
        else:
            parts.append(body)
    parts.append("</div>")
    return "".join(parts)


def _header_html(info: Mapping[str, Any]) -> str:
    lines = []
    if info.get("question"):
        lines.append(f"<b>Question:</b> {html.escape(str(info['question']))}")
    if info.get("golden_answers") is not None:
        lines.append(f"<b>Gold:</b> {html.escape(' | '.join(map(str, info['golden_answers'])))}")
    if "prediction" in info:
        scores = ", ".join(f"{k}={float(info[k]):.2f}" for k in ("em", "f1") if k in info)
        lines.append(f"<b>Prediction:</b> {html.escape(str(info['prediction']))}"
                     + (f" ({html.escape(scores)})" if scores else ""))
    if "reward" in info:  # a training rollout (searchrl.trainer.levers.rollout_log): what it earned within its group
        shown = [f"reward={float(info['reward']):.2f}"]
        if info.get("advantage") is not None:
            shown.append(f"advantage={float(info['advantage']):.2f}")
        if info.get("searches") is not None:
            shown.append(f"searches={info['searches']}")
        lines.append(f"<b>Scored:</b> {html.escape(', '.join(shown))}")
    if not lines:
        return ""
    return '<div class="header" style="margin-bottom:6px;">' + "<br>".join(lines) + "</div>"


def render_trajectory_text(record_or_text, protocol: SearchProtocol | str, question: str | None = None) -> str:
    """Plain-text rendering for terminals: each retrieved block between [RETRIEVED] and [/RETRIEVED], its lines
    prefixed with "░ ", and the query, internal-answer, evidence and answer spans wrapped in »...«."""
    protocol = get_protocol(protocol)
    text, info = _unpack(record_or_text, question)
    out = []
    if info.get("question"):
        out.append(f"Question: {info['question']}\n")
    if info.get("golden_answers") is not None:
        out.append(f"Gold: {' | '.join(map(str, info['golden_answers']))}\n")
    if "prediction" in info:
        out.append(f"Prediction: {info['prediction']}\n")
    if out:
        out.append("-" * 40 + "\n")
    for kind, piece in trajectory_pieces(text, protocol):
        if kind == "retrieved":
            body = "\n".join("░ " + line for line in piece.strip("\n").splitlines())
            lead = "" if not out or out[-1].endswith("\n") else "\n"
            out.append(f"{lead}[RETRIEVED]\n{body}\n[/RETRIEVED]")
        elif kind in ("query", "internal", "evidence", "answer"):
            out.append(f"»{piece}«")
        else:
            out.append(piece)
    return "".join(out)
