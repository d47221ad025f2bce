"""Train without a notebook, in one process or several: ``python -m searchrl.train -f PARAMS.yaml [-p KEY VALUE]``.

The quickstart notebook's cells, headless: data and retriever, the untrained and cold-started policies evaluated,
the RL schedule, the trained policy evaluated (and without search, with `eval_no_search`), the stage and type
tables, the training curves and the learning checks, all in a new run folder (``outputs/train/<run id>/``); for
machines without papermill, and for several processes. Precedence, lowest first: RunConfig defaults, ``-f`` files
in order, ``-p`` values.

Under ``accelerate launch`` (configs in ``launch/``) every process runs this module. The main process creates the
run folder and owns it, and tells the others its path; every process trains its slice of each batch; only the
main process evaluates. Before RL the others wait for its evaluations at a barrier whose timeout is long enough for
them (`EVALUATION_WAIT`); after RL it evaluates once the last collective step is done::

    accelerate launch --config_file launch/zero2.yaml -m searchrl.train -f params/quickstart/gpu.yaml

ZeRO-3 is refused for now (see `launch_problem`).

A run that was killed (one process or several) continues in its own folder with ``--resume RUN_DIR``, launched the
way it was first launched: its saved parameters (plus any ``-p`` values) with ``resume: true``, so the cold start is
loaded rather than redone, each RL stage continues from its last complete checkpoint, and the evaluation keeps the
questions it already scored::

    accelerate launch --config_file launch/cpu_2proc.yaml -m searchrl.train --resume outputs/train/<run id>
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from datetime import timedelta
from pathlib import Path

from searchrl.config import ConfigError, RunConfig, load_params_file
from searchrl.runs.ownership import RunBusyError

_OWNED: list = []  # the main process's ownership of its run folder, kept referenced so its lock and heartbeat live
# How long the other processes wait at a collective call. Before RL they wait there while the main process evaluates
# the untrained and cold-started policies, which on a CPU can take longer than torch's default of 10 minutes.
EVALUATION_WAIT = timedelta(hours=3)


def resolve_config(files: Sequence[str], params: Sequence[tuple[str, str]],
                   resume_dir: str | Path | None = None) -> RunConfig:
    """The run's parameters: RunConfig defaults, then each file, then the ``-p`` pairs (values read as YAML). With
    `resume_dir`, the folder's saved parameters take the files' place and ``resume`` is switched on."""
    from searchrl.experiments.runner_plan import _parse_overrides

    if resume_dir is not None:
        if files:
            raise ConfigError("--resume continues a run with the parameters saved in its folder; drop the -f files "
                              "(a -p value still overrides one setting)")
        saved = Path(resume_dir) / "params.yaml"
        if not saved.is_file():
            raise ConfigError(f"cannot resume {resume_dir}: it is not a run folder (no params.yaml)")
        files = [saved]
    sources = [(str(path), load_params_file(path)[0]) for path in files]
    if params:
        sources.append(("-p", _parse_overrides(params)))
    if resume_dir is not None:
        sources.append(("--resume", {"resume": True}))
    return RunConfig.merge(*sources)


def shared_run_dir(cfg: RunConfig, state, command: list[str], resume_dir: str | Path | None = None) -> Path:
    """The run folder, owned by the main process (a new one, or `resume_dir` taken over again); every process
    returns the same path. A folder still owned by a live run raises RunBusyError on the main process."""
    from accelerate.utils import broadcast_object_list

    path: list = [None]
    if state.is_main_process:
        try:
            path = [str(_own_run_dir(cfg, command, resume_dir))]
        except RunBusyError as err:
            path = [{"busy": str(err)}]  # told to every process, so the others stop too instead of waiting
    if state.num_processes > 1:
        broadcast_object_list(path, from_process=0)
    if isinstance(path[0], dict):
        raise RunBusyError(path[0]["busy"])
    return Path(path[0])


def _own_run_dir(cfg: RunConfig, command: list[str], resume_dir: str | Path | None) -> Path:
    """The main process's part of `shared_run_dir`: create (or take over) the folder, own it, record the launch."""
    from searchrl.runs.folder import create_run_dir
    from searchrl.runs.ownership import RunOwnership
    from searchrl.runs.provenance import record_resume, write_provenance
    from searchrl.runs.status import mark_status

    if resume_dir is None:
        folder = create_run_dir("train", cfg.run_name, cfg.output_root)
        write_provenance(folder, cfg, notebook="train", command=command)
    else:
        folder = Path(resume_dir)
    _OWNED.append(RunOwnership(folder).acquire())  # before anything is rewritten: a live owner keeps its folder
    if resume_dir is not None:
        record_resume(folder, cfg, command)
    mark_status(folder, "running")
    return folder


def launch_problem() -> str | None:
    """Why this launch cannot train, or None. Under DeepSpeed ZeRO-3 each process holds only a shard of the
    policy's weights, but the run saves each stage's policy and evaluates it outside the trainer (Experiment), on
    the unwrapped model: it would save shards and evaluate on one process alone. ZeRO-2 keeps whole weights."""
    if os.environ.get("ACCELERATE_DEEPSPEED_ZERO_STAGE") == "3":
        return ("searchrl.experiments.train does not run under ZeRO-3 yet: the run saves and evaluates each stage's policy "
                "outside the trainer, where ZeRO-3 leaves every process only a shard of the weights. Use "
                "launch/zero2.yaml, with LoRA (use_peft: true) if the full model's optimizer state does not fit")
    return None


def train(cfg: RunConfig, command: list[str], resume_dir: str | Path | None = None) -> Path:
    """The quickstart notebook's cells in order: the main process evaluates each stage (untrained, after the cold
    start, after RL) and finishes the folder; every process trains. With `resume_dir` (and `cfg.resume`), the run
    continues in that folder, keeping the evaluation records it already wrote."""
    from accelerate import PartialState

    from searchrl.experiments.experiment import Experiment
    from searchrl.runs.status import mark_status
    from searchrl.trainer.arguments import hardware_args

    # The process group is the trainers' own (the same device choice), started early to share the folder's path.
    state = PartialState(cpu=hardware_args(cfg)["use_cpu"], timeout=EVALUATION_WAIT)
    run_dir = shared_run_dir(cfg, state, command, resume_dir)
    try:
        exp = Experiment(cfg, notebook="train", run_dir=run_dir)
        model = exp.load_model()
        if state.is_main_process:
            print(exp.evaluate(model, "untrained", n_questions=cfg.n_eval_untrained).summary())
        model = exp.cold_start(model)
        if state.is_main_process:
            print(exp.evaluate(model, "after cold start").summary())
        state.wait_for_everyone()
        model = exp.train_rl(model)
        if state.is_main_process:
            print(exp.evaluate(model, "after RL").summary())
            exp.no_search_baseline(model)
            exp.curves()
            table = exp.stage_table()
            print(table.to_string())
            exp.bars(table)
            paper = exp.paper_layout()
            if paper is not None:
                print(paper.to_markdown())
            types = exp.type_table()
            if types is not None:
                print(types.to_string())
            exp.learning_checks()
            exp.finish()
    except BaseException as err:
        if state.is_main_process:
            mark_status(run_dir, "interrupted" if isinstance(err, KeyboardInterrupt) else "failed", error=err)
        raise
    return run_dir


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m searchrl.train",
                                     description="Cold start and RL without a notebook, in one or several processes.")
    parser.add_argument("-f", "--file", dest="files", action="append", default=[], metavar="PARAMS.yaml",
                        help="parameter file (repeatable; later files win)")
    parser.add_argument("-p", "--param", dest="params", action="append", nargs=2, default=[],
                        metavar=("KEY", "VALUE"), help="one parameter, value parsed as YAML; wins over files")
    parser.add_argument("--resume", metavar="RUN_DIR", default=None,
                        help="continue a killed run in its folder, from its saved parameters and last checkpoints")
    parser.add_argument("--dry-run", action="store_true", help="print the resolved parameters; train nothing")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Command-line entry point; returns the exit code (0 ok, 2 bad parameters or a launch it cannot run)."""
    args = _parser().parse_args(argv)
    try:
        cfg = resolve_config(args.files, args.params, args.resume)
    except ConfigError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    if args.dry_run:
        print(cfg.to_yaml(header="Resolved parameters (dry run)"))
        return 0
    problem = launch_problem()
    if problem:
        print(f"error: {problem}", file=sys.stderr)
        return 2
    try:
        train(cfg, [sys.executable, "-m", "searchrl.train", *(sys.argv[1:] if argv is None else argv)], args.resume)
    except RunBusyError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
