"""The schema's fields: every section dataclass joined into `RunFields` in schema order, and what is read off them
(each field's type, documentation and section).

Field order is `dataclasses.fields` order: with several bases, the fields of the bases in reverse MRO order, so the
class listed last comes first. The mechanism settings (probe ... rollout) come first, then the run's own sections
from general to the report's, which is the order of `RunConfig.to_dict()`, params.yaml files and `describe()`.
"""

from __future__ import annotations

import ast
import dataclasses
import inspect
import re
import textwrap
from dataclasses import dataclass
from typing import Any

from searchrl.config.difficulty import DifficultyConfig
from searchrl.config.evaluation import (
    AblationSettings,
    BenchmarkSettings,
    EvalSetSettings,
    EvalSettings,
    ReportSettings,
)
from searchrl.config.evidence import EvidenceConfig
from searchrl.config.health import HealthConfig
from searchrl.config.knowledge import KnowledgeConfig
from searchrl.config.memorization import MemorizationConfig
from searchrl.config.probe import ProbeConfig
from searchrl.config.rl import RLSettings
from searchrl.config.rollout import RolloutConfig
from searchrl.config.sections import (
    ColdStartSettings,
    DataSettings,
    GeneralSettings,
    ModelSettings,
    ProtocolSettings,
    RetrievalSettings,
)
from searchrl.config.service import ServiceConfig
from searchrl.config.web_search import WebSearchConfig

__all__ = ["FIELD_DOCS", "FIELD_SECTIONS", "FIELD_TYPES", "SECTION_ORDER", "RunFields"]


@dataclass(frozen=True)
class RunFields(ReportSettings, AblationSettings, BenchmarkSettings, EvalSetSettings, EvalSettings, RLSettings,
                ColdStartSettings,
                ProtocolSettings, RetrievalSettings, DataSettings, ModelSettings, GeneralSettings,
                RolloutConfig, ServiceConfig, WebSearchConfig, KnowledgeConfig, MemorizationConfig, EvidenceConfig,
                DifficultyConfig, HealthConfig, ProbeConfig):
    """Every field of a run, no behaviour: `RunConfig` adds the building, checking and reading. Bases are listed
    from the last section to the first, since the last base's fields come first."""


# --------------------------------------------------------------------------------------------------------------
# Field documentation, read from the source so the docstrings under the fields are the single source.
# --------------------------------------------------------------------------------------------------------------


def _field_docs_from_source(cls: type) -> tuple[dict[str, str], dict[str, str]]:
    """(docs, sections) for the fields of ``cls`` and its dataclass bases: the string literal under each field and
    the section comment above it."""
    docs: dict[str, str] = {}
    sections: dict[str, str] = {}
    for klass in reversed(cls.__mro__):
        if dataclasses.is_dataclass(klass):
            more_docs, more_sections = _class_field_docs(klass)
            docs.update(more_docs)
            sections.update(more_sections)
    return docs, sections


def _class_field_docs(cls: type) -> tuple[dict[str, str], dict[str, str]]:
    try:
        source = textwrap.dedent(inspect.getsource(cls))
    except (OSError, TypeError):  # no source (frozen/zipped install): describe() shows empty docs
        return {}, {}
    lines = source.splitlines()
    body = ast.parse(source).body[0].body
    docs: dict[str, str] = {}
    sections: dict[str, str] = {}
    section = "general"
    last_line = 0
    for i, node in enumerate(body):
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            # A "# == name ==" comment between the previous statement and this field opens a section.
            for line in lines[last_line : node.lineno - 1]:
                m = re.match(r"\s*# == (.+?) ==", line)
                if m:
                    section = m.group(1)
            name = node.target.id
            sections[name] = section
            nxt = body[i + 1] if i + 1 < len(body) else None
            if isinstance(nxt, ast.Expr) and isinstance(nxt.value, ast.Constant) and isinstance(nxt.value.value, str):
                docs[name] = " ".join(nxt.value.value.split())
        last_line = getattr(node, "end_lineno", node.lineno)
    return docs, sections


def _field_types(cls: type) -> dict[str, Any]:
    # The schema's modules use postponed annotations, so field types are strings; evaluate them once here.
    namespace = {"list": list, "int": int, "float": float, "bool": bool, "str": str, "dict": dict}
    return {f.name: eval(f.type, namespace) for f in dataclasses.fields(cls)}  # our own annotations


# describe() lists sections in this order (the rollout section is declared in RolloutConfig, hence first in MRO).
SECTION_ORDER = ("general", "model", "data", "retrieval", "protocol", "rollout", "cold start", "RL", "eval",
                 "benchmarks", "ablation", "retrieval service", "web search", "knowledge", "memorization", "evidence", "data difficulty", "training health")
FIELD_TYPES: dict[str, Any] = _field_types(RunFields)
FIELD_DOCS, FIELD_SECTIONS = _field_docs_from_source(RunFields)
