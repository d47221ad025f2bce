"""The protocol behind a number: what was searched, how, on which questions, scored how, under which budgets.

Every evaluation records one `EvalProtocol` (`EvalResult.protocol`, the "protocol" block of its JSON), and every
table built from evaluations carries the protocols of its rows: one shared block for the fields all rows agree on,
and a note naming each field where they differ, with a marker per row (`compare_protocols`).

    stamp = EvalProtocol.build(retriever=r, rows=rows, rollout=rollout, protocol=p, tokenizer=tok, chat=True)
    stamp.to_dict(); EvalProtocol.from_dict(d)
    compare_protocols({"untrained": a, "after RL": b}).text()     # "protocol (every row): ... | differ in: ..."

Fingerprints are 12 hex digits of a SHA-256: the corpus (the retriever's own `corpus_fingerprint`, a corpus's
`fingerprint`, else the passages' ids, titles and texts), the index (retriever kind, encoder, its conventions,
index kind and dimension, over that corpus), the question set (its sorted ids) and the prompt (the protocol's prompt
rendered for a placeholder question, chat template included). An evaluation saved before protocols were recorded
loads with none: its tables say "protocol: not recorded".
"""

from __future__ import annotations

import dataclasses
import hashlib
import html
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import Any

__all__ = ["EVAL_METRICS", "NOT_RECORDED", "EvalProtocol", "ProtocolComparison", "compare_protocols",
           "markdown_table", "protocol_of", "stage_rows"]

NOT_RECORDED = "not recorded"
# The metrics every evaluation record holds (`score_trajectory`); an eval suite adds its `eval_metrics` to them.
EVAL_METRICS = ("em", "f1", "cem")
# Stands in for the question when a prompt is fingerprinted: the template, not any one question, is hashed.
_PLACEHOLDER_QUESTION = "{question}"


def fingerprint(*parts: Any) -> str:
    """12 hex digits of SHA-256 over `parts` (JSON-encoded, keys sorted)."""
    text = json.dumps(parts, sort_keys=True, default=str, ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:12]


@dataclass(frozen=True)
class EvalProtocol:
    """How one evaluation's numbers were obtained. "" or None in a field: not known to the code that ran it."""

    corpus: str = ""
    """What was searched, by name (a corpus file, a benchmark's corpus, "synthetic world (seed 0)")."""
    corpus_fingerprint: str = ""
    corpus_size: int | None = None
    retriever: str = ""
    """Retriever kind: bm25, dense, http (a service), search_r1 (a Search-R1 API), web, replay, or a class name."""
    encoder: str = ""
    """The dense encoder (with its conventions); "" for retrievers without one (bm25) or that do not say."""
    index: str = ""
    """Index fingerprint: kind, encoder, conventions, index kind and dimension over the corpus."""
    index_kind: str = ""
    top_k: int | None = None
    max_observation_tokens: int | None = None
    questions: str = ""
    """Question-set fingerprint: SHA-256 of the sorted question ids."""
    n_questions: int = 0
    metrics: tuple[str, ...] = EVAL_METRICS
    """Metric names as `searchrl.metrics.scoring.metric` resolves them (paper variants as `cem:r1_searcher`)."""
    protocol: str = ""
    prompt: str = ""
    """Prompt fingerprint: the protocol's prompt for a placeholder question, as the model saw it."""
    chat: bool | None = None
    max_searches: int | None = None
    max_turn_tokens: int | None = None
    max_completion_tokens: int | None = None
    decoding: str = ""
    """"greedy", or "sampled (temperature T, top_p P)"."""
    extra: dict[str, Any] = field(default_factory=dict, compare=False)
    """Anything else the evaluation wants on record (a baseline's own options); shown, never compared."""

    # ---- building ----------------------------------------------------------------------------------------------

    @classmethod
    def build(cls, *, retriever: Any, rows: Sequence[Mapping], rollout: Any, protocol: Any, tokenizer: Any = None,
              chat: bool = True, greedy: bool = True, metrics: Sequence[str] = EVAL_METRICS, corpus: str = "",
              prompt: str | None = None, **extra: Any) -> EvalProtocol:
        """The stamp of one evaluation from what it ran with. `protocol`: a SearchProtocol (its prompt is
        fingerprinted) or a name with `prompt` the prompt text; `corpus`: the corpus's name."""
        corpus_fp, size = _corpus_of(retriever)
        kind, encoder, index_kind, dimension = _retriever_of(retriever)
        if prompt is None:
            prompt = _prompt_text(protocol, tokenizer, chat)
        ids = sorted(str(row.get("id", "")) for row in rows)
        temperature, top_p = getattr(rollout, "temperature", None), getattr(rollout, "top_p", None)
        return cls(
            corpus=str(corpus), corpus_fingerprint=corpus_fp, corpus_size=size, retriever=kind, encoder=encoder,
            index=fingerprint(kind, encoder, index_kind, dimension, corpus_fp) if kind else "",
            index_kind=index_kind + (f" d={dimension}" if dimension else ""),
            top_k=getattr(rollout, "top_k", None), max_observation_tokens=getattr(rollout, "max_observation_tokens", None),
            questions=fingerprint(ids), n_questions=len(ids), metrics=tuple(metrics),
            protocol=str(getattr(protocol, "name", protocol) or ""), prompt=fingerprint(prompt) if prompt else "",
            chat=chat, max_searches=getattr(rollout, "max_searches", None),
            max_turn_tokens=getattr(rollout, "max_turn_tokens", None),
            max_completion_tokens=getattr(rollout, "max_completion_tokens", None),
            decoding="greedy" if greedy else f"sampled (temperature {temperature}, top_p {top_p})",
            extra=dict(extra))

    def replace(self, **changes: Any) -> EvalProtocol:
        return dataclasses.replace(self, **changes)

    def with_metrics(self, names: Sequence[str]) -> EvalProtocol:
        """The same protocol with `names` added to its metrics (in order, no repeats)."""
        return self.replace(metrics=tuple(dict.fromkeys([*self.metrics, *names])))

    # ---- reading and writing -------------------------------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        out = {f.name: getattr(self, f.name) for f in fields(self)}
        out["metrics"] = list(self.metrics)
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> EvalProtocol:
        """Read `to_dict`'s output; keys this version does not know go to `extra`, so newer files still load."""
        known = {f.name for f in fields(cls)}
        values = {k: v for k, v in data.items() if k in known}
        extra = {**dict(values.pop("extra", None) or {}), **{k: v for k, v in data.items() if k not in known}}
        if "metrics" in values:
            values["metrics"] = tuple(values["metrics"] or ())
        return cls(**values, extra=extra)

    def describe(self) -> dict[str, str]:
        """Field -> the text a table shows (fingerprints with what they fingerprint)."""
        def shown(value: Any) -> str:
            if value is None or value == "":
                return NOT_RECORDED
            return str(value)

        corpus = shown(self.corpus) if self.corpus else "unnamed"
        if self.corpus_fingerprint:
            corpus += f" #{self.corpus_fingerprint}"
        if self.corpus_size is not None:
            corpus += f" ({self.corpus_size} passages)"
        return {
            "corpus": corpus if (self.corpus or self.corpus_fingerprint) else NOT_RECORDED,
            "retriever": shown(self.retriever),
            "encoder": self.encoder or "none",
            "index": (f"{self.index_kind} #{self.index}" if self.index_kind else f"#{self.index}") if self.index
            else NOT_RECORDED,
            "top_k": shown(self.top_k),
            "max_observation_tokens": ("off" if self.max_observation_tokens == 0
                                       else shown(self.max_observation_tokens)),
            "questions": f"{self.n_questions} #{self.questions}" if self.questions else NOT_RECORDED,
            "metrics": ", ".join(self.metrics) or NOT_RECORDED,
            "protocol": shown(self.protocol),
            "prompt": f"#{self.prompt}" + ("" if self.chat is None else (" (chat)" if self.chat else " (plain)"))
            if self.prompt else NOT_RECORDED,
            "max_searches": shown(self.max_searches),
            "max_turn_tokens": shown(self.max_turn_tokens),
            "max_completion_tokens": shown(self.max_completion_tokens),
            "decoding": shown(self.decoding),
        }


def protocol_of(payload: Mapping[str, Any] | None) -> EvalProtocol | None:
    """The protocol block of a saved evaluation JSON (`EvalResult.to_json`); None for a file from before protocols
    were recorded (or no file)."""
    block = (payload or {}).get("protocol")
    return EvalProtocol.from_dict(block) if isinstance(block, Mapping) else None


def stage_rows(payload: Any) -> list[dict[str, Any]]:
    """The rows of a saved stage table (eval/table.json): a bare list of rows (run folders from before protocols
    were recorded) or {"rows": [...], "protocols": {...}}."""
    if isinstance(payload, Mapping):
        return list(payload.get("rows") or [])
    return list(payload or [])


# ------------------------------------------------------------------------------------------------ comparing


@dataclass
class ProtocolComparison:
    """The protocols of a table's rows: what they share, where they differ, and a marker per row."""

    shared: dict[str, str]                 # field -> value every recorded row has
    differ: dict[str, dict[str, str]]      # field -> {row label: value}
    markers: dict[str, str]                # row label -> "P1", "P2", ... (rows with one protocol share a marker)
    unrecorded: list[str]                  # rows whose protocol was not recorded
    described: dict[str, dict[str, str]]   # row label -> its full description

    @property
    def mixed(self) -> bool:
        return bool(self.differ)

    def difference_note(self) -> str:
        """"protocols differ in: top_k (3 vs 5), retriever (bm25 vs dense)", or "" when the rows agree."""
        if not self.differ:
            return ""
        parts = []
        for name, values in self.differ.items():
            distinct = list(dict.fromkeys(values.values()))
            parts.append(f"{name} ({' vs '.join(distinct)})")
        return "protocols differ in: " + ", ".join(parts)

    def lines(self) -> list[str]:
        """The protocol block as lines of text: the shared fields, then the difference note and each marker's row
        values, then the rows without a record."""
        recorded = [label for label in self.described if label not in self.unrecorded]
        if not recorded:
            return [f"protocol: {NOT_RECORDED}"]
        scope = "every row" if not self.unrecorded else "every row that records one"
        out = [f"protocol ({scope}): " + "; ".join(f"{k} {v}" for k, v in self.shared.items())]
        if self.differ:
            out.append(self.difference_note())
            for marker in dict.fromkeys(self.markers.values()):
                rows = [label for label, m in self.markers.items() if m == marker]
                first = rows[0]
                values = "; ".join(f"{name} {self.differ[name][first]}" for name in self.differ)
                out.append(f"  [{marker}] {', '.join(rows)}: {values}")
        if self.unrecorded:
            out.append(f"protocol {NOT_RECORDED} for: {', '.join(self.unrecorded)}")
        return out

    def text(self) -> str:
        return "\n".join(self.lines())

    def markdown(self) -> str:
        """The block for under a markdown table: one paragraph line per entry."""
        return "\n".join(f"{line.strip()}  " for line in self.lines())

    def html(self) -> str:
        return ('<div class="searchrl-protocol" style="font-size:smaller;color:#444;">'
                + "<br>".join(html.escape(line.strip()) for line in self.lines()) + "</div>")

    def to_dict(self) -> dict[str, Any]:
        return {"shared": self.shared, "differ": self.differ, "markers": self.markers,
                "unrecorded": self.unrecorded, "note": self.difference_note()}


def compare_protocols(protocols: Mapping[str, EvalProtocol | Mapping[str, str] | None]) -> ProtocolComparison:
    """Compare the protocols of a table's rows (row label -> its `EvalProtocol`, a description dict such as a
    paper's, or None when not recorded). Fields every recorded row agrees on are shared; the others differ, and
    each row gets a marker ("P1", "P2", ...) that rows of one protocol share."""
    described: dict[str, dict[str, str]] = {}
    unrecorded = []
    for label, stamp in protocols.items():
        if stamp is None:
            unrecorded.append(label)
            described[label] = {}
        else:
            described[label] = stamp.describe() if isinstance(stamp, EvalProtocol) else dict(stamp)
    recorded = [label for label in described if label not in unrecorded]
    names = list(dict.fromkeys(name for label in recorded for name in described[label]))
    shared, differ = {}, {}
    for name in names:
        values = {label: described[label].get(name, NOT_RECORDED) for label in recorded}
        if len(set(values.values())) == 1:
            shared[name] = next(iter(values.values()))
        else:
            differ[name] = values
    markers: dict[str, str] = {}
    seen: dict[tuple, str] = {}
    for label in recorded:
        key = tuple(differ[name][label] for name in differ)
        markers[label] = seen.setdefault(key, f"P{len(seen) + 1}")
    return ProtocolComparison(shared=shared, differ=differ, markers=markers, unrecorded=unrecorded,
                              described=described)


def markdown_table(frame: Any, index: bool = True) -> str:
    """A GitHub markdown table of a DataFrame (numbers to 3 decimals), without pandas' optional tabulate
    dependency."""
    import pandas as pd

    frame = frame.reset_index() if index else frame

    def cell(value) -> str:
        if isinstance(value, float):
            return "" if pd.isna(value) else f"{value:.3f}"
        return str(value).replace("|", "\\|").replace("\n", " ")

    rows = [[str(c) for c in frame.columns]] + [[cell(v) for v in row] for row in frame.itertuples(index=False)]
    lines = ["| " + " | ".join(rows[0]) + " |", "|" + "---|" * len(rows[0])]
    return "\n".join(lines + ["| " + " | ".join(r) + " |" for r in rows[1:]])


# ------------------------------------------------------------------------------------------------ reading a retriever


def _corpus_of(retriever: Any) -> tuple[str, int | None]:
    """(corpus fingerprint, passages) of what `retriever` searches, "" / None where it cannot say (a web search)."""
    if retriever is None:
        return "", None
    own = getattr(retriever, "corpus_fingerprint", None)
    corpus = getattr(retriever, "corpus", None)
    size = None
    if corpus is not None:
        try:
            size = len(corpus)
        except TypeError:
            size = None
    if isinstance(own, str) and own:
        return own, size
    expected = getattr(retriever, "_expected", None)  # a service client checks the service's corpus against this
    if corpus is None and isinstance(expected, tuple) and len(expected) == 2:
        return str(expected[1]), int(expected[0])
    if corpus is None:
        return "", size
    attribute = getattr(corpus, "fingerprint", None)
    if isinstance(attribute, str) and attribute:
        return attribute, size
    if callable(attribute):
        return str(attribute()), size
    try:
        from searchrl.retrieval.service import corpus_fingerprint

        return corpus_fingerprint(corpus), size
    except (AttributeError, TypeError):  # not a list of Doc
        return "", size


def _retriever_of(retriever: Any) -> tuple[str, str, str, int | None]:
    """(kind, encoder with its conventions, index kind, dimension) as far as `retriever` tells."""
    if retriever is None:
        return "", "", "", None
    kind = str(getattr(retriever, "kind", "") or type(retriever).__name__)
    url = getattr(retriever, "url", None)
    if url:
        kind = f"{kind} {url}"
    encoder = getattr(retriever, "model_name_or_path", None)
    if kind.startswith("dense") and encoder is None:
        encoder = "all-MiniLM-L6-v2 (bundled)"
    conventions = getattr(retriever, "conventions", None)
    if encoder and conventions is not None and hasattr(conventions, "to_dict"):
        encoder = f"{encoder} {fingerprint(conventions.to_dict())}"
    index_kind = str(getattr(retriever, "index_kind", "") or "")
    index = getattr(retriever, "_index", None)
    dimension = getattr(index, "d", None)
    return kind, str(encoder or ""), index_kind, int(dimension) if isinstance(dimension, int) else None


def _prompt_text(protocol: Any, tokenizer: Any, chat: bool) -> str:
    """The prompt the model sees, for a placeholder question ("" when the protocol cannot build one)."""
    build = getattr(protocol, "build_prompt", None)
    if build is None:
        return ""
    try:
        return str(build(_PLACEHOLDER_QUESTION, tokenizer, chat=chat))
    except Exception:  # noqa: BLE001  (a fingerprint must never stop an evaluation)
        return str(getattr(protocol, "system_prompt", ""))
