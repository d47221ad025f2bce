"""The evaluation table of an ablation: per arm, the held-out metrics pooled over seeds, with intervals.

Each arm and seed evaluated the same held-out questions; its per-question records are read back from the arm's
folder. A cell is the mean over questions of each question's mean over seeds; its interval resamples questions
(question sampling: seeds answer the same questions, so resampling (seed, question) records as if independent
would narrow it falsely), and `sd over seeds` is the spread of the per-seed means (training noise).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from searchrl.core.files import read_json
from searchrl.core.stats import bootstrap_mean
from searchrl.evaluation.protocol import ProtocolComparison, compare_protocols, protocol_of
from searchrl.experiments.ablation.layout import EVAL_SLUG, finished_arm_folders, records_path

# Per-question record column -> table column. Response length counts generated tokens (retrieved ones excluded).
TABLE_METRICS = {"em": "EM", "f1": "F1", "cem": "CEM", "searches": "searches/question",
                 "model_tokens": "response tokens", "format_ok": "format-valid rate"}
_INTERVAL_METRICS = ("em", "f1")


def read_records(run_dir: str | Path, arms: Sequence[str] | None = None) -> pd.DataFrame:
    """Every finished arm and seed's per-question evaluation records, with `arm` and `seed` columns first."""
    frames = []
    for (arm, seed), folder in finished_arm_folders(Path(run_dir)).items():
        if arms is not None and arm not in arms:
            continue
        path = records_path(folder)
        frame = pd.read_json(path, lines=True, dtype={"id": str}) if path.stat().st_size else pd.DataFrame()
        frames.append(frame.assign(arm=arm, seed=seed))
    if not frames:
        return pd.DataFrame(columns=["arm", "seed", "id"])
    records = pd.concat(frames, ignore_index=True)
    records["id"] = records["id"].astype(str)
    return records[["arm", "seed"] + [c for c in records.columns if c not in ("arm", "seed")]]


def arm_table(records: pd.DataFrame, arms: Sequence[str] | None = None, *, confidence: float = 0.95,
              n_resamples: int = 10_000, seed: int = 0) -> pd.DataFrame:
    """One row per arm (index `arm`, in `arms` order): `seeds`, `questions` (per seed), then for each metric of
    TABLE_METRICS present its mean, and for EM and F1 its bootstrap interval and the sd of the per-seed means."""
    if records.empty:
        raise ValueError("no finished arm has evaluation records yet; run the ablation first")
    names = list(arms) if arms is not None else list(dict.fromkeys(records["arm"]))
    pct = round(confidence * 100)
    rows = []
    for arm in names:
        part = records[records["arm"] == arm]
        if part.empty:
            continue
        row: dict = {"arm": arm, "seeds": int(part["seed"].nunique()),
                     "questions": int(part.groupby("seed")["id"].nunique().max())}
        for column, label in TABLE_METRICS.items():
            if column not in part:
                continue
            values = part[column].astype(float).groupby(part["id"], sort=False).mean()  # per question, over seeds
            row[label] = float(values.mean())
            if column in _INTERVAL_METRICS:
                _, low, high = bootstrap_mean(values.dropna().to_numpy(), n_resamples=n_resamples,
                                              confidence=confidence, seed=seed)
                per_seed = part.groupby("seed")[column].mean()
                row[f"{label} {pct}% low"], row[f"{label} {pct}% high"] = low, high
                row[f"{label} sd over seeds"] = float(per_seed.std(ddof=1)) if len(per_seed) > 1 else np.nan
        rows.append(row)
    return pd.DataFrame(rows).set_index("arm")


__all__ = ["TABLE_METRICS", "arm_protocols", "arm_table", "mark_protocols", "read_records", "split_table"]


def arm_protocols(run_dir: str | Path, arms: Sequence[str] | None = None) -> ProtocolComparison:
    """The evaluation protocol of every finished arm and seed (its eval/after_RL.json), compared: rows "arm seedN",
    in `arms` order (default: every finished arm); an arm evaluated before protocols were recorded counts as not
    recorded."""
    found = finished_arm_folders(Path(run_dir))
    order = list(arms) if arms is not None else list(dict.fromkeys(arm for arm, _ in found))
    stamps = {}
    for arm in order:
        for (name, seed), folder in sorted(found.items()):
            if name == arm:
                stamps[f"{arm} seed{seed}"] = protocol_of(read_json(folder / "eval" / f"{EVAL_SLUG}.json"))
    return compare_protocols(stamps)


def mark_protocols(table: pd.DataFrame, protocols: ProtocolComparison) -> pd.DataFrame:
    """`table` (one row per arm) with a last column "protocol" naming each arm's protocol markers (over its seeds)
    when the arms' protocols differ; unchanged when they agree."""
    if not protocols.mixed:
        return table
    marks = {}
    for label, marker in protocols.markers.items():
        arm = label.rsplit(" seed", 1)[0]
        marks.setdefault(arm, []).append(marker)
    return table.assign(protocol=["/".join(dict.fromkeys(marks.get(arm, ["not recorded"]))) for arm in table.index])


def split_table(records: pd.DataFrame, column: str, arms: Sequence[str] | None = None) -> pd.DataFrame:
    """Per arm and per value of a record column (e.g. `knowledge`: internal / external / mixed): questions, EM, F1,
    searches per question and the share answered without any search, pooled over seeds. R1-Searcher++'s claim reads
    here: fewer searches on internal facts at equal accuracy."""
    if column not in records.columns or records[column].isna().all():
        return pd.DataFrame(columns=["arm", column, "questions", "EM", "F1", "searches/question", "no search"])
    rows = records.dropna(subset=[column])
    grouped = rows.groupby(["arm", column], sort=False)
    table = pd.DataFrame({
        "questions": grouped.size(),
        "EM": grouped["em"].mean(),
        "F1": grouped["f1"].mean(),
        "searches/question": grouped["searches"].mean(),
        "no search": grouped["searches"].apply(lambda s: float((s == 0).mean())),
    }).reset_index()
    if arms is not None:
        table["arm"] = pd.Categorical(table["arm"], categories=list(arms), ordered=True)
        table = table.sort_values(["arm", column]).reset_index(drop=True)
        table["arm"] = table["arm"].astype(str)
    return table
