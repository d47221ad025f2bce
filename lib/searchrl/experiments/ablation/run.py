"""An ablation in one process: per seed one shared cold start, then every arm's RL and evaluation on the same
held-out questions, each arm and seed in its own folder; an interrupted ablation resumes at the first unfinished
arm. A notebook is a parameters cell and::

    cfg = RunConfig.from_globals(globals())
    ablation = Ablation(cfg, notebook="ablate_reward")   # arms, seeds and claims from cfg; all checked here
    ablation.run()
    ablation.curves()
    ablation.table()
    ablation.verdicts()
    ablation.finish()
"""

from __future__ import annotations

import json
import shutil
import warnings
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from searchrl.config import BOOKKEEPING_SETTINGS, COMPUTE_ONLY_SETTINGS, ConfigError, RunConfig, measured_changes
from searchrl.core.files import read_json, save_figure, write_json
from searchrl.evaluation.protocol import markdown_table
from searchrl.experiments.ablation.arms import (
    Arm,
    arm_config,
    cold_start_key,
    cold_start_settings,
    cold_start_sources,
    parse_arms,
    parse_seeds,
    with_cold_start_arm,
)
from searchrl.experiments.ablation.curves import CURVE_METRICS, band_curves, read_histories
from searchrl.experiments.ablation.layout import (
    WEIGHTS,
    arm_folder,
    cold_start_folder,
    is_done,
    mark_done,
    read_done,
    records_path,
    trained_policy,
    weights_sha256,
)
from searchrl.experiments.ablation.tables import arm_protocols, arm_table, mark_protocols, read_records, split_table
from searchrl.experiments.ablation.verdict import Claim, parse_claims, verdict_table
from searchrl.experiments.ablation.work import ArmWork, ExperimentWork
from searchrl.runs.checkpoints import drop_resume_state, last_complete_checkpoint
from searchrl.runs.folder import current_run_dir
from searchrl.runs.history import MetricsHistory
from searchrl.runs.slim import copy_evidence
from searchrl.runs.status import mark_status

# Settings that may differ between an arm's first start and its resumption (another machine, another folder name,
# less memory)
_BOOKKEEPING = (*BOOKKEEPING_SETTINGS, *COMPUTE_ONLY_SETTINGS)


class Ablation:
    """Arms × seeds of one RunConfig, run in sequence into one run folder.

    `arms` ({name: overrides} or a list of :class:`Arm`), `seeds` and `claims` default to the config's `arms`,
    `seeds` (empty: the single `seed`) and `claims`; all are checked before any folder is made. `work` does the
    training and evaluation (default: :class:`ExperimentWork`); `run_dir` defaults to the notebook's run folder
    (`current_run_dir`). Trainer checkpoints of a finished arm (only needed to resume it) are deleted unless the
    config's `keep_resume_state`; its final policy stays.
    """

    def __init__(self, cfg: RunConfig, arms: Mapping[str, Mapping[str, Any]] | Iterable[Arm] | None = None,
                 seeds: Sequence[int] | None = None, claims: Mapping[str, Any] | Iterable[Claim] | None = None, *,
                 notebook: str = "ablation", work: ArmWork | None = None, run_dir: str | Path | None = None):
        self.cfg = cfg
        self.arms = parse_arms(cfg, cfg.arms if arms is None else arms)
        if cfg.cold_start_arm:  # the added arms' fixed overrides are checked with every arm's config below
            self.arms = with_cold_start_arm(self.arms, cfg.to_dict())
        self.seeds = parse_seeds((cfg.seeds or [cfg.seed]) if seeds is None else seeds)
        self.claims = parse_claims(cfg.claims if claims is None else claims, [a.name for a in self.arms])
        self.configs = {(arm.name, seed): arm_config(cfg, arm, seed) for seed in self.seeds for arm in self.arms}
        # {arm: the arm whose cold start it starts from} (`cold_start_from`; itself unless set)
        self.cold_start_of = cold_start_sources({"arms": {a.name: a.overrides for a in self.arms},
                                                 "cold_start_arm": False, "cold_start_from": cfg.cold_start_from})
        self.work = work if work is not None else ExperimentWork(notebook)
        self.run_dir = Path(run_dir) if run_dir is not None else current_run_dir(notebook, cfg)
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self._check_recorded_settings()
        write_json(self.run_dir / "ablation.json", self.describe())

    # ---- the plan ---------------------------------------------------------------------------------------------

    def describe(self) -> dict[str, Any]:
        """Arms (overrides and cold-start key per seed), seeds and claims, as written to ablation.json."""
        return {
            "arms": {a.name: {"overrides": a.overrides,
                              "cold_start": {seed: cold_start_key(self._cold_start_config(a.name, seed))
                                             for seed in self.seeds}}
                     for a in self.arms},
            "seeds": self.seeds,
            "claims": [c.to_dict() for c in self.claims],
        }

    def plan(self) -> pd.DataFrame:
        """One row per arm and seed, in run order: its cold-start key, state (done / partial / to do), and for a
        finished one its held-out F1 and searches per question (a seed that stopped searching shows at a glance),
        the training-health alarms its metrics history raises (a seed that lost the format shows too), then its
        folder."""
        held_out = _held_out_means(read_records(self.run_dir, [a.name for a in self.arms]))
        rows = []
        for seed in self.seeds:
            for arm in self.arms:
                folder = arm_folder(self.run_dir, arm.name, seed)
                state = "done" if is_done(folder) else ("partial" if folder.exists() else "to do")
                means = held_out.get((arm.name, seed), {})
                cfg = self.configs[arm.name, seed]
                start_key = cold_start_key(self._cold_start_config(arm.name, seed))
                rows.append({"arm": arm.name, "seed": seed, "cold start": start_key,
                             "state": state, "F1": means.get("f1", float("nan")),
                             "searches/question": means.get("searches", float("nan")),
                             "health": _health_summary(folder, cfg) if state == "done" else "", "folder": str(folder)})
        return pd.DataFrame(rows)

    # ---- running ----------------------------------------------------------------------------------------------

    def run(self) -> pd.DataFrame:
        """Run every unfinished arm and seed (seed by seed, arms in order); returns the plan afterwards."""
        from searchrl.core.progress import progress_bar

        todo = [(seed, arm) for seed in self.seeds for arm in self.arms
                if not is_done(arm_folder(self.run_dir, arm.name, seed))]
        skipped = len(self.seeds) * len(self.arms) - len(todo)
        if skipped:
            print(f"ablation: {skipped} arm x seed runs already finished in {self.run_dir.name}; resuming at "
                  + (f"{todo[0][1].name} seed {todo[0][0]}" if todo else "nothing (all finished)"))
        bar = progress_bar(total=len(todo), desc="ablation", unit="arm")
        try:
            for seed, arm in todo:
                bar.set_postfix_str(f"{arm.name} seed {seed}")
                self._run_arm(arm, seed)
                bar.update(1)
        finally:
            bar.close()
        return self.plan()

    def _check_recorded_settings(self) -> None:
        """Fail before any work when a finished or partial arm folder was made with other settings than its arm's
        current ones (a changed parameter would mix two experiments in one table)."""
        for (name, seed), cfg in self.configs.items():
            folder = arm_folder(self.run_dir, name, seed)
            recorded = _recorded_params(folder)
            if recorded is None:
                continue
            # the same comparison as a resumed run's (an older record may hold settings counted as bookkeeping since)
            changes = measured_changes(recorded, cfg)
            if changes:
                detail = ", ".join(f"{k}: {changes[k][0]!r} -> {changes[k][1]!r}" for k in sorted(changes)[:6])
                raise ConfigError(f"arm {name!r} seed {seed} in {folder} was started with other settings ({detail}); "
                                  "start a new run folder, or restore those parameters to resume it")

    def _run_arm(self, arm: Arm, seed: int) -> None:
        cfg = self.configs[arm.name, seed]
        folder = arm_folder(self.run_dir, arm.name, seed)
        if folder.exists() and not _has_resume_state(cfg, folder):
            # Interrupted before its first checkpoint: its logged steps would be appended to, so start afresh.
            shutil.rmtree(folder)
        folder.mkdir(parents=True, exist_ok=True)
        write_json(folder / "arm.json", {"arm": arm.name, "seed": seed, "overrides": arm.overrides,
                                          "params": _comparable(cfg.to_dict())})
        cfg.to_yaml(folder / "params.yaml", header=f"Arm {arm.name}, seed {seed}, of ablation {self.run_dir.name}")
        start, start_digest = self._cold_start(self._cold_start_config(arm.name, seed), seed)
        self.work.train_and_evaluate(cfg, folder, start)
        if not records_path(folder).is_file():
            raise RuntimeError(f"arm {arm.name!r} seed {seed} finished without evaluation records at "
                               f"{records_path(folder)}; the work must evaluate on the held-out questions")
        mark_done(folder, {"arm": arm.name, "seed": seed,
                                  "cold_start": str(start) if start is not None else None,
                                  "cold_start_sha256": start_digest})
        if not cfg.keep_resume_state:
            drop_resume_state(folder)
        copy_evidence(self.run_dir, cfg.evidence_copy_dir)

    def _cold_start_config(self, arm: str, seed: int) -> RunConfig:
        """The config whose cold start arm `arm` starts from: its own, or that of the arm its `cold_start_from`
        names."""
        return self.configs[self.cold_start_of[arm], seed]

    def _cold_start(self, cfg: RunConfig, seed: int) -> tuple[Path | None, str | None]:
        """The shared cold start of `cfg` and `seed`, made once by the first arm that needs it: its model and the
        SHA-256 of its weights (None for one made before digests were recorded)."""
        folder = cold_start_folder(self.run_dir, seed, cold_start_key(cfg))
        done = read_done(folder)
        if done is None:
            # Its key hashes every cold-start setting, so a setting added to the schema since changes it; a finished
            # cold start whose recorded settings, with that setting at its default, equal these ones is the same.
            folder = _same_finished_cold_start(folder, cold_start_settings(cfg)) or folder
            done = read_done(folder)
        if done is not None:
            return (Path(done["model"]) if done.get("model") else None), done.get("sha256")
        folder.mkdir(parents=True, exist_ok=True)
        write_json(folder / "settings.json", cold_start_settings(cfg))
        model = self.work.cold_start(cfg, folder)
        digest = _record_weights(folder, model, seed)
        mark_done(folder, {"seed": seed, "model": str(model) if model is not None else None, "sha256": digest})
        return model, digest

    # ---- reporting --------------------------------------------------------------------------------------------

    def curves(self, metrics: Sequence[str] = CURVE_METRICS, band: str = "minmax", smooth: float = 0.0):
        """Reward, response length and searches per sample per training step: the mean over seeds with a band
        (`band`: minmax or sd), one line per arm; saved to figures/curves.png."""
        histories = read_histories(self.run_dir, [a.name for a in self.arms])
        fig = band_curves(histories, metrics=metrics, band=band, smooth=smooth,
                          title=f"{len(self.seeds)} seed(s); band: {'min-max' if band == 'minmax' else '±1 sd'}")
        save_figure(fig, self.run_dir / "figures" / "curves.png")
        return fig

    def table(self) -> pd.DataFrame:
        """Per arm: EM, F1, searches/question and response tokens, mean over seeds with bootstrap intervals over
        the questions of every seed; saved as eval_table.csv and .json, and with the arms' evaluation protocols compared
        (a "protocol" column marks each arm when they differ, as a top_k arm does) as eval_table.md and
        eval_protocols.json."""
        names = [a.name for a in self.arms]
        protocols = arm_protocols(self.run_dir, names)
        table = mark_protocols(arm_table(read_records(self.run_dir, names), arms=names), protocols)
        table.to_csv(self.run_dir / "eval_table.csv")
        write_json(self.run_dir / "eval_table.json", table.reset_index().to_dict("records"))
        write_json(self.run_dir / "eval_protocols.json", protocols.to_dict())
        (self.run_dir / "eval_table.md").write_text(markdown_table(table) + "\n\n" + protocols.markdown() + "\n",
                                                    encoding="utf-8")
        print(protocols.text())
        return table

    def table_by(self, column: str = "knowledge") -> pd.DataFrame:
        """Per arm and per value of a per-question column (default `knowledge`, the synthetic world's internal /
        external / mixed split): questions, EM, F1, searches per question, share answered without searching; saved
        as eval_table_by_<column>.csv. Empty when no record carries the column."""
        table = split_table(read_records(self.run_dir, [a.name for a in self.arms]), column,
                            arms=[a.name for a in self.arms])
        table.to_csv(self.run_dir / f"eval_table_by_{column}.csv", index=False)
        return table

    def verdicts(self) -> pd.DataFrame:
        """One row per claim: our difference better - worse with its paired bootstrap interval over questions and
        seeds, and the verdict (reproduced / opposite / inconclusive); saved as verdicts.csv and .json."""
        table = verdict_table(read_records(self.run_dir, [a.name for a in self.arms]), self.claims)
        table.to_csv(self.run_dir / "verdicts.csv", index=False)
        write_json(self.run_dir / "verdicts.json", table.to_dict("records"))
        return table

    def finish(self) -> Path:
        mark_status(self.run_dir, "completed")
        print(f"Results in {self.run_dir}")
        return self.run_dir


def _held_out_means(records: pd.DataFrame) -> dict[tuple[str, int], dict[str, float]]:
    """{(arm, seed): mean f1 and searches per question} over the finished arms' held-out records."""
    columns = [c for c in ("f1", "searches") if c in records.columns]
    if records.empty or not columns:
        return {}
    return records.groupby(["arm", "seed"])[columns].mean().to_dict("index")


def _comparable(params: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in params.items() if k not in _BOOKKEEPING}


def _with_defaults(recorded: Mapping[str, Any], keys: Iterable[str]) -> dict[str, Any]:
    """`recorded`'s value of each of `keys`, the schema's default where the record predates the setting."""
    defaults = RunConfig.defaults()
    return {k: recorded.get(k, defaults.get(k)) for k in keys}


def _same_finished_cold_start(folder: Path, settings: Mapping[str, Any]) -> Path | None:
    """A finished sibling of cold-start `folder` made with `settings` (absent ones read as their defaults)."""
    wanted = json.dumps(settings, sort_keys=True, default=str)
    known = RunConfig.defaults()
    for sibling in sorted(folder.parent.glob("cold_start-*")):
        recorded = read_json(sibling / "settings.json")
        if not recorded or read_done(sibling) is None:
            continue
        # older cold starts recorded settings the cold start does not read (compute-only ones, the memorization
        # loss's), which never tell two cold starts apart: only a setting the schema no longer has stays and differs
        recorded = {k: v for k, v in recorded.items() if k in settings or k not in known}
        filled = _with_defaults(recorded, settings)
        if set(recorded) <= set(settings) and json.dumps(filled, sort_keys=True, default=str) == wanted:
            return sibling
    return None


def _health_summary(folder: Path, cfg: RunConfig) -> str:
    """The arm's training-health alarms, replayed from its metrics history ("format lost at step 5; ..."); empty when
    none, or when the arm has no history (no RL)."""
    from searchrl.trainer.monitors.health import alarms_in_history

    if cfg.health_action == "off":
        return ""
    history = MetricsHistory(folder).to_frame()
    return "; ".join(f"{a.rule} at step {a.step}" for a in alarms_in_history(history.to_dict("records"), cfg))


def _record_weights(folder: Path, model: Path | None, seed: int) -> str | None:
    """Write the cold start's weight digest to its weights.json, and say so loudly when a cold start made again (its
    weights were dropped, by a slim copy or by hand) differs from the one made first: arms already finished started
    from that one."""
    digest = weights_sha256(model)
    record = read_json(folder / WEIGHTS) or {}
    first = record.get("sha256")
    made = [*record.get("made", []), digest]
    if first and digest and digest != first:
        message = (f"the cold start of seed {seed} ({folder.name}) was made again and its weights differ from the "
                   f"first one's (sha256 {digest[:12]} vs {first[:12]}): arms finished before started from the first, "
                   "arms run from now on start from this one. Compare them with that in mind, or start a new run "
                   "folder so that every arm shares one cold start.")
        warnings.warn(message, stacklevel=2)
        print(f"ablation: WARNING: {message}")
    write_json(folder / WEIGHTS, {"sha256": first or digest, "made": made,
                                         "same_as_first": all(d == (first or digest) for d in made)})
    return digest


def _recorded_params(folder: Path) -> dict[str, Any] | None:
    info = read_json(folder / "arm.json")
    return info.get("params") if info else None


def _has_resume_state(cfg: RunConfig, folder: Path) -> bool:
    """Whether an unfinished arm folder holds a complete trainer checkpoint or its final policy to continue from, or
    is an arm without RL (nothing to log twice): its evaluation records are continued, not thrown away."""
    from searchrl.trainer.schedules import rl_schedule

    if not rl_schedule(cfg):
        return True
    stages = [p for p in (folder / "checkpoints").glob("*") if p.is_dir()]
    return (trained_policy(cfg, folder) is not None
            or any(last_complete_checkpoint(stage)[0] is not None for stage in stages))


__all__ = ["Ablation"]
