"""One experiment as notebooks run it: data, retriever, evaluation, cold start, RL, tables and figures.

Notebooks stay thin by calling these methods; every method writes what it produced into the run folder, so an
interrupted run keeps everything done so far. `Experiment` is built here (and loads and saves the policy); its
methods come by concern from experiment_data.py (questions), experiment_cold_start.py (SFT before RL),
experiment_rl.py (the RL stages), experiment_eval.py (evaluation and tables) and experiment_figures.py (figures).
"""

from __future__ import annotations

from pathlib import Path

import torch

from searchrl.config import RunConfig
from searchrl.config.replay import RECORD_FOLDER
from searchrl.core.files import write_json
from searchrl.core.threads import apply_torch_threads
from searchrl.experiments.experiment_cold_start import ExperimentColdStart
from searchrl.experiments.experiment_data import ExperimentData, seed_everything
from searchrl.experiments.experiment_eval import ExperimentEvaluation
from searchrl.experiments.experiment_figures import ExperimentFigures
from searchrl.experiments.experiment_rl import ExperimentRL
from searchrl.runs.checkpoints import release_resume_state
from searchrl.runs.folder import current_run_dir
from searchrl.runs.history import MetricsHistory
from searchrl.runs.memory import format_memory, read_memory
from searchrl.runs.status import mark_status

__all__ = ["Experiment"]


class Experiment(ExperimentData, ExperimentColdStart, ExperimentRL, ExperimentEvaluation, ExperimentFigures):
    """Everything one run needs, built from a validated `RunConfig`."""

    def __init__(self, cfg: RunConfig, notebook: str = "interactive", run_dir: str | Path | None = None):
        from searchrl.models import load_tokenizer
        from searchrl.protocols import get_protocol
        from searchrl.retrieval import make_retriever
        from searchrl.retrieval.recording import RecordingRetriever
        from searchrl.retrieval.service import service_options

        self.cfg = cfg
        self.notebook = notebook
        # An ablation gives each arm its own folder inside its run; a notebook gets a new run folder.
        self.run_dir = Path(run_dir) if run_dir is not None else current_run_dir(notebook, cfg)
        self.run_dir.mkdir(parents=True, exist_ok=True)
        seed_everything(cfg.seed)
        apply_torch_threads(cfg.torch_threads)
        self.protocol = get_protocol(cfg.protocol)
        self.corpus, self.train_rows, self.eval_rows = self._load_data()
        # Every search is recorded in retrieval/ of the run folder, so that `retriever: replay:<run folder>` can
        # answer the same searches again without index or API.
        self.retriever = RecordingRetriever(make_retriever(cfg.retriever, self.corpus, **service_options(cfg)),
                                            self.run_dir / RECORD_FOLDER, corpus=self.corpus)
        wait_until_up = getattr(self.retriever, "wait_until_up", None)
        if wait_until_up is not None:  # a shared service may still be loading its index: wait before any search
            wait_until_up(cfg.service_wait_s, say=lambda line: print(line, flush=True))
        self.tokenizer = load_tokenizer(cfg.model)
        self.results: dict = {}
        self.history = MetricsHistory(self.run_dir)
        summary = self.data_summary()
        if cfg.dataset == "synthetic" and cfg.rl_steps > 0:
            summary["answer_budget"] = self.check_answer_budget()
        write_json(self.run_dir / "data.json", summary)

    # ---- models -----------------------------------------------------------------------------------------------

    def load_model(self, path: str | None = None):
        from searchrl.models import load_policy

        # The policy that trains is stored in float32 even with bf16 on: bf16 is mixed precision (the trainers
        # autocast the forward pass), and the weights and Adam's moments must stay float32, because an update of
        # lr ~1e-5 is below half a bfloat16 ulp of most weights and rounds away. Measured: docs/vllm-and-precision.md.
        # Inference-only loads (eval_suite, baselines) may use bf16.
        model, _ = load_policy(path or self.cfg.model, dtype=torch.float32, device=self.cfg.device)
        return model

    def save_model(self, model, name: str) -> Path:
        from accelerate import PartialState

        from searchrl.models import save_policy

        # Under several processes (accelerate launch) each holds the same weights: one writes them, and every
        # process waits for the files before going on, since the next RL stage loads its start from this folder (two
        # writers, or a reader early, saw a half-written config.json).
        state = PartialState()
        folder = self.run_dir / "checkpoints" / name
        if state.is_main_process:
            folder = save_policy(model, self.tokenizer, folder)
        state.wait_for_everyone()
        return folder

    def finish(self) -> Path:
        mark_status(self.run_dir, "completed")
        print(format_memory(read_memory(self.run_dir)))
        if not self.cfg.keep_resume_state:
            release_resume_state(self.run_dir)
        print(f"Results in {self.run_dir}")
        return self.run_dir
