"""The papers' reported numbers as data, and our results laid out beside them in the papers' own tables.

A reproduction is judged against the numbers a paper printed, so those numbers live here as data
(``paper_numbers.csv``, shipped with the package: one row per printed cell, each citing its table and page or
section) rather than being retyped into notebooks. :func:`paper_table` takes our results as a tidy frame and
returns the paper's layout (rows = methods, columns = datasets x metrics) with the paper's rows and ours stacked
under a ``source`` level, and a caption that spells out how the paper's set-up differs from ours (model size,
corpus, retriever, top-k, evaluation subsets), since those differences usually explain most of any gap.

    table = paper_table(results, "search_r1_table2", models=["Qwen2.5-3B"], ours=our_settings(cfg),
                        protocols={"policy / nq": result.protocol})
    table              # renders as HTML in a notebook
    table.frame        # numbers (the paper's units), NaN where a cell is missing
    table.to_markdown()

``protocols`` (our rows' `EvalProtocol`s, by "method / dataset") adds a protocol block under the table: what our
rows share, where they differ from each other, and how they compare with what the paper states of its own protocol
(the paper's rows ran under the paper's own protocol; fields it does not state are named as such).

``results`` columns: method, dataset, metric, value, and optionally n, ci_low, ci_high and model. Our metric
values are fractions; layouts that print percentages scale them. Layouts are a registry picked by string
(``LAYOUTS``): ``search_r1_table2``, ``r1_searcher_table2``, ``r1_searcher_pp_table1``.
"""

from __future__ import annotations

import dataclasses
import functools
import html
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from typing import Any

import pandas as pd

from searchrl.config.names import layout_key
from searchrl.core.registry import Registry
from searchrl.evaluation.protocol import NOT_RECORDED, EvalProtocol, compare_protocols

__all__ = ["LAYOUTS", "MISSING", "PAPER_SETTINGS", "Layout", "PaperTable", "layout_names", "our_settings",
           "paper_numbers", "paper_protocol", "paper_table"]

NUMBERS_FILE = "paper_numbers.csv"
MISSING = "–"
SOURCE_PAPER = "paper"

# The set-up behind each paper's table, as stated in its experimental section (keys shared with
# `our_settings`, so a caption can put the two side by side). Values are short descriptions, not prose quotes.
PAPER_SETTINGS: dict[str, dict[str, str]] = {
    "search_r1": {
        "paper": "Search-R1 (Jin et al. 2025, arXiv:2503.09516v2)",
        "model": "Qwen2.5-7B, Qwen2.5-3B, LLaMA3.2-3B (Base for RL '-base' rows, Instruct for prompting baselines "
                 "and '-instruct' rows)",
        "corpus": "Wikipedia 2018 dump (DPR)",
        "retriever": "E5 (dense)",
        "top_k": "3",
        "eval_sets": "full test or dev sets of the seven datasets",
        "train_data": "NQ + HotpotQA training sets merged",
        "rl": "PPO by default (GRPO: 5 responses per prompt); EM reward",
        "metric": "EM",
    },
    "r1_searcher": {
        "paper": "R1-Searcher (Song et al. 2025, arXiv:2503.05592)",
        "model": "Qwen-2.5-7B-Base and Llama-3.1-8B-Instruct (baselines on GPT-4o-mini and Llama-3.1-8B-Instruct)",
        "corpus": "KILT Wikipedia 2019, 100-word passages with titles (29M)",
        "retriever": "BGE-large-en-v1.5 (dense)",
        "top_k": "not stated",
        "eval_sets": "sizes not stated in the paper (its released sets: 500 HotpotQA, 500 2Wiki, 500 MuSiQue, "
                     "125 Bamboogle)",
        "train_data": "8,148 HotpotQA + 2Wiki questions chosen by difficulty (350 for stage 1)",
        "rl": "two-stage Reinforce++, 16 rollouts per question, at most 8 retrievals",
        "metric": "ACC_R (cover EM), ACC_L (GPT-4o-mini judge)",
    },
    "r1_searcher_pp": {
        "paper": "R1-Searcher++ (Song et al. 2025, arXiv:2505.17005)",
        "model": "Qwen-2.5-7B-Instruct (every row)",
        "corpus": "KILT Wikipedia 2019, 100-word passages with titles (29M)",
        "retriever": "BGE-large-en-v1.5 (dense)",
        "top_k": "not stated",
        "eval_sets": "500 random questions each from the HotpotQA, 2Wiki and MuSiQue dev sets; all 125 Bamboogle",
        "train_data": "SFT 805 questions (720 HotpotQA + 85 2Wiki); RL 8,142 (4,561 HotpotQA + 3,581 2Wiki)",
        "rl": "Reinforce++, 16 rollouts per question, at most 8 retrievals, group reward eta 2, NLL mu 0.1",
        "metric": "F1 and LasJ (GPT-4o-mini judge) in percent; RC = retrievals per question",
    },
}
# Settings keys in the order a caption lists them ("paper" and "metric" are shown elsewhere).
_SETTING_KEYS = ("model", "corpus", "retriever", "top_k", "eval_sets", "train_data", "rl")

# Our dataset names -> the column they fill. The r1s_* files are R1-Searcher's released evaluation subsets of the
# same benchmarks, so they land in the same columns.
DATASET_ALIASES = {"r1s_hotpotqa": "hotpotqa", "r1s_2wiki": "2wiki", "r1s_musique": "musique",
                   "r1s_bamboogle": "bamboogle"}
AVG = "avg"


# ------------------------------------------------------------------------------------------------ the numbers


@functools.lru_cache(maxsize=1)
def _numbers() -> pd.DataFrame:
    source = resources.files("searchrl.evaluation").joinpath(NUMBERS_FILE)
    with source.open("r", encoding="utf-8") as handle:
        frame = pd.read_csv(handle, dtype={"page": "string", "value": float}, keep_default_na=False,
                            na_values={"value": [""]})
    return frame


def paper_numbers(paper: str | None = None, table: str | None = None) -> pd.DataFrame:
    """The transcribed cells, one row each: paper, table, page, section, model, group, method, dataset, metric,
    paper_metric, value, unit ("fraction", "percent" or "count", as printed), note.

    ``dataset`` and ``metric`` use our names (nq, ..., bamboogle, avg; em, cem, judge, f1, searches);
    ``paper_metric`` keeps the paper's label. ``page`` is empty where the extracted text carries no page breaks;
    ``section`` then locates the table.
    """
    frame = _numbers().copy()
    if paper is not None:
        if paper not in set(frame["paper"]):
            raise ValueError(f"no numbers for paper {paper!r}; known: {', '.join(sorted(set(frame['paper'])))}")
        frame = frame[frame["paper"] == paper]
    if table is not None:
        tables = sorted(set(frame["table"]))
        if table not in tables:
            raise ValueError(f"no {table!r} among the transcribed tables{' of ' + paper if paper else ''}: "
                             f"{', '.join(tables)}")
        frame = frame[frame["table"] == table]
    return frame.reset_index(drop=True)


# ------------------------------------------------------------------------------------------------ layouts


@dataclass(frozen=True)
class Layout:
    """One paper table's shape: which datasets and metrics, in what order, labels and units."""

    name: str
    paper: str
    table: str
    datasets: tuple[tuple[str, str], ...]  # (our dataset name, the paper's column label)
    metrics: tuple[tuple[str, str], ...]  # (our metric name, the paper's label)
    units: Mapping[str, str]  # metric -> "fraction" | "percent" | "count", as the paper prints it
    decimals: Mapping[str, int]
    average: str | None = None  # the paper's average column label; None when the table has none
    notes: tuple[str, ...] = ()  # doubts about the transcription, repeated in every caption

    def columns(self) -> pd.MultiIndex:
        labels = [label for _, label in self.datasets] + ([self.average] if self.average else [])
        return pd.MultiIndex.from_product([labels, [label for _, label in self.metrics]],
                                          names=["dataset", "metric"])

    def dataset_label(self, dataset: str) -> str | None:
        if dataset == AVG:
            return self.average
        return dict(self.datasets).get(DATASET_ALIASES.get(dataset, dataset))


LAYOUTS: Registry[Layout] = Registry("paper table layout", normalize=layout_key)
LAYOUTS.register("search_r1_table2", Layout(
    name="search_r1_table2", paper="search_r1", table="Table 2",
    datasets=(("nq", "NQ"), ("triviaqa", "TriviaQA"), ("popqa", "PopQA"), ("hotpotqa", "HotpotQA"),
              ("2wiki", "2wiki"), ("musique", "Musique"), ("bamboogle", "Bamboogle")),
    metrics=(("em", "EM"),), units={"em": "fraction"}, decimals={"em": 3}, average="Avg.",
    notes=("the printed Avg. of IRCoT (Qwen2.5-7B), 0.239, is not the mean of its seven cells (0.226)",)),
    doc="Search-R1 Table 2: EM on seven QA datasets, three model blocks")
LAYOUTS.register("r1_searcher_table2", Layout(
    name="r1_searcher_table2", paper="r1_searcher", table="Table 2",
    datasets=(("hotpotqa", "HotpotQA"), ("2wiki", "2Wiki"), ("bamboogle", "Bamboogle"), ("musique", "Musique")),
    metrics=(("cem", "ACC_R"), ("judge", "ACC_L")), units={"cem": "fraction", "judge": "fraction"},
    decimals={"cem": 3, "judge": 3},
    notes=(("the two R1-Searcher rows share merged model/type cells in the extracted text; they are read in the "
           "order of the merged labels (Llama-3.1-8B-Instruct RL first, Qwen-2.5-7B-Base RL-Zero second), but the "
           "gains the text credits to Llama match the second row"),
           "the Llama block prints 'CR-Planer'; shown as CR-Planner")),
    doc="R1-Searcher Table 2: ACC_R (cover EM) and ACC_L (LLM judge) on four multi-hop datasets")
LAYOUTS.register("r1_searcher_pp_table1", Layout(
    name="r1_searcher_pp_table1", paper="r1_searcher_pp", table="Table 1",
    datasets=(("hotpotqa", "HotpotQA"), ("2wiki", "2Wiki"), ("bamboogle", "Bamboogle"), ("musique", "Musique")),
    metrics=(("f1", "F1"), ("judge", "LasJ"), ("searches", "RC")),
    units={"f1": "percent", "judge": "percent", "searches": "count"}, decimals={"f1": 1, "judge": 1, "searches": 2},
    average="Avg",
    notes=(("the printed F1 Avg is not the mean of the four F1 cells in 11 of 12 rows (e.g. R1-Searcher++ 45.3 "
           "against 53.7), while the LasJ and RC averages are; shown as printed"),)),
    doc="R1-Searcher++ Table 1: F1, LLM judge (percent) and retrieval count on four multi-hop datasets")


def layout_names() -> list[str]:
    """The registered layout names."""
    return LAYOUTS.names()


# ------------------------------------------------------------------------------------------------ rendering


@dataclass
class PaperTable:
    """A paper's table with our rows added: numbers, their text, and a caption naming what differs."""

    layout: Layout
    frame: pd.DataFrame  # index (source, model, method); columns (dataset, metric); the paper's units; NaN = none
    cells: pd.DataFrame  # the same cells as text: MISSING where empty, "value [low, high]" where we have intervals
    caption: str
    protocol: list[str] = dataclasses.field(default_factory=list)  # the protocol block's lines (see paper_table)

    def to_markdown(self) -> str:
        """A pipe table (header "Dataset Metric"), then the caption as a paragraph, then the protocol block."""
        header = list(self.cells.index.names) + [f"{d} {m}" for d, m in self.cells.columns]
        lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
        for key, row in self.cells.iterrows():
            lines.append("| " + " | ".join([*map(str, key), *row.tolist()]) + " |")
        block = "".join(f"{line.strip()}  \n" for line in self.protocol)
        return "\n".join(lines) + "\n\n" + self.caption + "\n" + (f"\n{block}" if block else "")

    def to_html(self) -> str:
        """The table as HTML with the caption and the protocol block below it."""
        body = self.cells.to_html(na_rep=MISSING, escape=True, border=0)
        block = "<br>".join(html.escape(line.strip()) for line in self.protocol)
        return (f'<figure class="searchrl-paper-table">{body}'
                f"<figcaption>{html.escape(self.caption)}"
                + (f'<div class="searchrl-protocol">{block}</div>' if block else "") + "</figcaption></figure>")

    def _repr_html_(self) -> str:
        return self.to_html()

    def __str__(self) -> str:
        return self.to_markdown()


def our_settings(config: Any) -> dict[str, str]:
    """Our side of the settings comparison, read from a RunConfig (or anything with the same attribute names)."""
    out: dict[str, str] = {}
    if getattr(config, "model", None):
        out["model"] = str(config.model)
    dataset = getattr(config, "dataset", "")
    corpus = getattr(config, "corpus", "")
    if dataset == "synthetic":
        out["corpus"] = "synthetic world"
    elif corpus:
        out["corpus"] = str(corpus)
    if getattr(config, "retriever", None):
        out["retriever"] = str(config.retriever)
    if getattr(config, "top_k", None) is not None:
        out["top_k"] = str(config.top_k)
    return out


def paper_table(results: pd.DataFrame | None, layout: str, *, models: Sequence[str] | None = None,
                ours: Mapping[str, Any] | None = None, label: str = "searchrl",
                protocols: Mapping[str, EvalProtocol | None] | None = None) -> PaperTable:
    """The paper's table named by ``layout`` with our ``results`` as extra rows (source level ``label``).

    ``results``: tidy frame with columns method, dataset, metric, value (fractions; searches per question), and
    optionally n, ci_low, ci_high (shown as "value [low, high]") and model. Rows whose dataset or metric the
    layout does not show are left out. ``models`` keeps only those model blocks of the paper (e.g.
    ``["Qwen2.5-3B"]``). ``ours`` is our set-up (keys as in ``PAPER_SETTINGS``, e.g. from :func:`our_settings`):
    the caption names every setting where the paper's differs. ``protocols``: our rows' protocols by "method /
    dataset" (None: not recorded), compared with each other and with the paper's stated protocol
    (:func:`paper_protocol`) in the block under the table.
    """
    spec = LAYOUTS.get(layout)
    if not isinstance(spec, Layout):
        raise TypeError(f"layout {layout!r} must name a Layout, got {type(spec).__name__}")
    ours = dict(ours or {})
    paper = _paper_rows(spec, models)
    mine, interval, sizes = _our_rows(spec, results, label, ours.get("model", ""))
    frame = pd.concat([paper, mine]) if len(mine) else paper
    frame = frame.reindex(columns=spec.columns())
    cells = _cells(spec, frame, interval)
    caption = _caption(spec, ours, sizes, label)
    block = _protocol_block(spec, protocols, label) if protocols is not None else []
    return PaperTable(layout=spec, frame=frame, cells=cells, caption=caption, protocol=block)


# The protocol fields a paper's experimental section states (our `EvalProtocol` names -> its PAPER_SETTINGS key).
_PAPER_PROTOCOL_KEYS = {"corpus": "corpus", "retriever": "retriever", "top_k": "top_k", "questions": "eval_sets",
                        "metrics": "metric"}


def paper_protocol(paper: str) -> dict[str, str]:
    """What a paper states of the protocol behind its printed numbers, in `EvalProtocol.describe()`'s field names
    (from `PAPER_SETTINGS`); fields it does not state are left out."""
    settings = PAPER_SETTINGS[paper]
    return {name: settings[key] for name, key in _PAPER_PROTOCOL_KEYS.items() if settings.get(key)}


def _protocol_block(spec: Layout, protocols: Mapping[str, EvalProtocol | None], label: str) -> list[str]:
    """Our rows' protocols (shared fields, where they differ, markers), then the paper's against ours."""
    ours = compare_protocols(protocols)
    lines = [f"rows '{label}': " + line if i == 0 else line for i, line in enumerate(ours.lines())]
    stated = paper_protocol(spec.paper)
    lines.append(f"rows '{SOURCE_PAPER}': the paper's own protocol, as its experimental section states it: "
                 + "; ".join(f"{k} {v}" for k, v in stated.items()))
    differ = []
    for name, theirs in stated.items():
        mine = ours.shared.get(name)
        if mine is None and name in ours.differ:
            mine = " / ".join(dict.fromkeys(ours.differ[name].values()))
        if mine is not None and mine != NOT_RECORDED and str(mine).strip().lower() != theirs.strip().lower():
            differ.append(f"{name} (paper {theirs}; ours {mine})")
    if differ:
        lines.append(f"rows '{SOURCE_PAPER}' and '{label}' differ in: " + ", ".join(differ))
    unstated = [name for name in (ours.shared | ours.differ) if name not in stated]
    if unstated:
        lines.append(f"not stated by the paper: {', '.join(unstated)}")
    return lines


def _paper_rows(spec: Layout, models: Sequence[str] | None) -> pd.DataFrame:
    numbers = paper_numbers(spec.paper, spec.table)
    if models is not None:
        known = list(dict.fromkeys(numbers["model"]))
        unknown = [m for m in models if m not in known]
        if unknown:
            raise ValueError(f"{spec.name}: no model block {unknown} in the paper's table; known: {', '.join(known)}")
        numbers = numbers[numbers["model"].isin(list(models))]
    labels = dict(spec.metrics)
    numbers = numbers.assign(dlabel=[spec.dataset_label(d) for d in numbers["dataset"]],
                             mlabel=numbers["metric"].map(labels), source=SOURCE_PAPER)
    numbers = numbers.dropna(subset=["dlabel", "mlabel"])
    frame = numbers.pivot_table(index=["source", "model", "method"], columns=["dlabel", "mlabel"], values="value",
                                aggfunc="first", sort=False)
    order = list(dict.fromkeys(zip(numbers["source"], numbers["model"], numbers["method"])))
    frame = frame.reindex(pd.MultiIndex.from_tuples(order, names=["source", "model", "method"]))
    frame.columns.names = ["dataset", "metric"]
    return frame


def _our_rows(spec: Layout, results: pd.DataFrame | None, label: str,
              model: str) -> tuple[pd.DataFrame, dict[tuple, tuple[float, float]], dict[str, int]]:
    empty = pd.DataFrame(columns=spec.columns())
    if results is None or len(results) == 0:
        return empty, {}, {}
    missing = [c for c in ("method", "dataset", "metric", "value") if c not in results.columns]
    if missing:
        raise ValueError(f"results need the columns method, dataset, metric, value; missing: {', '.join(missing)}")
    df = results.copy()
    df["dlabel"] = [spec.dataset_label(str(d)) for d in df["dataset"]]
    df["mlabel"] = df["metric"].map(dict(spec.metrics))
    kept = df.dropna(subset=["dlabel", "mlabel"])
    if kept.empty:
        raise ValueError(
            f"none of the results fit layout {spec.name!r}: it shows datasets "
            f"{[d for d, _ in spec.datasets]} (also {sorted(DATASET_ALIASES)}) and metrics "
            f"{[m for m, _ in spec.metrics]}; got datasets {sorted(set(map(str, df['dataset'])))} and metrics "
            f"{sorted(set(map(str, df['metric'])))}")
    if "model" not in kept.columns:
        kept = kept.assign(model=model)
    kept = kept.assign(source=label)
    keys = ["source", "model", "method", "dlabel", "mlabel"]
    clash = kept[kept.duplicated(keys, keep=False)]
    if len(clash):
        first = clash.iloc[0]
        raise ValueError(f"two results fill the cell {first['method']!r} / {first['dlabel']} / {first['mlabel']} "
                         f"(datasets {sorted(set(clash['dataset']))}); keep one dataset per column (r1s_hotpotqa and "
                         "hotpotqa fill the same column)")
    scale = kept["metric"].map(lambda m: 100.0 if spec.units[m] == "percent" else 1.0)
    kept = kept.assign(value=kept["value"].astype(float) * scale)
    interval: dict[tuple, tuple[float, float]] = {}
    if {"ci_low", "ci_high"} <= set(kept.columns):
        for row, factor in zip(kept.itertuples(index=False), scale):
            low, high = float(row.ci_low), float(row.ci_high)
            if not (math.isnan(low) or math.isnan(high)):
                interval[(row.source, row.model, row.method, row.dlabel, row.mlabel)] = (low * factor, high * factor)
    sizes: dict[str, int] = {}
    if "n" in kept.columns:
        for dataset, n in zip(kept["dataset"], kept["n"]):
            if pd.notna(n) and str(dataset) != AVG:
                sizes[str(dataset)] = max(sizes.get(str(dataset), 0), int(n))
    frame = kept.pivot_table(index=["source", "model", "method"], columns=["dlabel", "mlabel"], values="value",
                             aggfunc="first", sort=False)
    frame.columns.names = ["dataset", "metric"]
    frame = frame.reindex(columns=spec.columns())
    if spec.average:
        _fill_average(spec, frame)
    return frame, interval, sizes


def _fill_average(spec: Layout, frame: pd.DataFrame) -> None:
    """Our average column, as the paper computes it: the plain mean over its datasets, only when all are there."""
    labels = [label for _, label in spec.datasets]
    for _, metric in spec.metrics:
        column = (spec.average, metric)
        values = frame[[(d, metric) for d in labels]]
        mean = values.mean(axis=1).where(values.notna().all(axis=1))
        frame[column] = frame[column].fillna(mean)  # an explicit "avg" row in the results wins


def _cells(spec: Layout, frame: pd.DataFrame, interval: Mapping[tuple, tuple[float, float]]) -> pd.DataFrame:
    cells = pd.DataFrame(MISSING, index=frame.index, columns=frame.columns, dtype=object)
    for key in frame.index:
        for dlabel, mlabel in frame.columns:
            value = frame.at[key, (dlabel, mlabel)]
            if pd.isna(value):
                continue
            metric = next(m for m, lab in spec.metrics if lab == mlabel)
            digits = spec.decimals[metric]
            text = f"{value:.{digits}f}"
            if (*key, dlabel, mlabel) in interval:
                low, high = interval[(*key, dlabel, mlabel)]
                text += f" [{low:.{digits}f}, {high:.{digits}f}]"
            cells.at[key, (dlabel, mlabel)] = text
    return cells


def _caption(spec: Layout, ours: Mapping[str, Any], sizes: Mapping[str, int], label: str) -> str:
    settings = PAPER_SETTINGS[spec.paper]
    numbers = paper_numbers(spec.paper, spec.table)
    page = next((p for p in numbers["page"] if p), "")
    where = f"p. {page}" if page else f"§{numbers['section'].iloc[0]}; page not recorded"
    units = {"fraction": "fractions", "percent": "percent", "count": "per question"}
    metric_text = ", ".join(f"{lab} ({units[spec.units[m]]})" for m, lab in spec.metrics)
    parts = [(f"{settings['paper']}, {spec.table} ({where}): {metric_text}. Rows '{SOURCE_PAPER}' are the "
             f"paper's printed numbers; rows '{label}' are ours, scaled to the paper's units.")]
    if sizes:
        ours = {**ours, "eval_sets": ", ".join(f"{d} n={n}" for d, n in sizes.items())}
    differ = []
    for key in _SETTING_KEYS:
        theirs = settings.get(key)
        if theirs is None:
            continue
        mine = ours.get(key)
        if mine is None:
            differ.append(f"{key}: paper {theirs}")
        elif str(mine).strip().lower() != theirs.strip().lower():
            differ.append(f"{key}: paper {theirs}; ours {mine}")
    if differ:
        parts.append("Settings that differ (or that we could not compare): " + " | ".join(differ) + ".")
    if spec.notes:
        parts.append("Transcription notes: " + "; ".join(spec.notes) + ".")
    return " ".join(parts)
