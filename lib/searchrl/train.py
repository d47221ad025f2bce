"""Train without a notebook, in one process or several: ``python -m searchrl.train -f PARAMS.yaml [-p KEY VALUE]``.

The quickstart notebook's training path, headless: data and retriever, the cold start, the RL schedule, then an
evaluation of the trained policy, the stage table and the training curves, all in a new run folder
(``outputs/train/<run id>/``). Precedence, lowest first: RunConfig defaults, ``-f`` files in order, ``-p`` values.

Under ``accelerate launch`` (configs in ``launch/``) every process runs this module. The main process creates the
run folder and owns it, and tells the others its path; every process trains its slice of each batch; only the
main process evaluates, after the last collective step, so the others never wait on it::

    accelerate launch --config_file launch/zero2.yaml -m searchrl.train -f params/quickstart/gpu.yaml

ZeRO-3 is refused for now (see `launch_problem`).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from searchrl.config import ConfigError, RunConfig, load_params_file

_OWNED: list = []  # the main process's ownership of its run folder, kept referenced so its lock and heartbeat live


def resolve_config(files: Sequence[str], params: Sequence[tuple[str, str]]) -> RunConfig:
    """The run's parameters: RunConfig defaults, then each file, then the ``-p`` pairs (values read as YAML)."""
    from searchrl.runner import _parse_overrides  # the runner's reading of -p values, shared

    sources = [(str(path), load_params_file(path)[0]) for path in files]
    if params:
        sources.append(("-p", _parse_overrides(params)))
    return RunConfig.merge(*sources)


def shared_run_dir(cfg: RunConfig, state, command: list[str]) -> Path:
    """A new run folder created and owned by the main process; every process returns the same path."""
    from accelerate.utils import broadcast_object_list

    from searchrl.ownership import RunOwnership
    from searchrl.rundir import create_run_dir, mark_status, write_provenance

    path = [None]
    if state.is_main_process:
        folder = create_run_dir("train", cfg.run_name, cfg.output_root)
        write_provenance(folder, cfg, notebook="train", command=command)
        mark_status(folder, "running")
        _OWNED.append(RunOwnership(folder).acquire())
        path = [str(folder)]
    if state.num_processes > 1:
        broadcast_object_list(path, from_process=0)
    return Path(path[0])


def launch_problem() -> str | None:
    """Why this launch cannot train, or None. Under DeepSpeed ZeRO-3 each process holds only a shard of the
    policy's weights, but the run saves each stage's policy and evaluates it outside the trainer (Experiment), on
    the unwrapped model: it would save shards and evaluate on one process alone. ZeRO-2 keeps whole weights."""
    if os.environ.get("ACCELERATE_DEEPSPEED_ZERO_STAGE") == "3":
        return ("searchrl.train does not run under ZeRO-3 yet: the run saves and evaluates each stage's policy "
                "outside the trainer, where ZeRO-3 leaves every process only a shard of the weights. Use "
                "launch/zero2.yaml, with LoRA (use_peft: true) if the full model's optimizer state does not fit")
    return None


def train(cfg: RunConfig, command: list[str]) -> Path:
    """Cold start and RL as the run's parameters say; the main process then evaluates and finishes the folder."""
    from accelerate import PartialState

    from searchrl.experiment import Experiment
    from searchrl.rundir import mark_status
    from searchrl.trainer.arguments import hardware_args

    # The process group is the trainers' own (the same device choice), started early to share the folder's path.
    state = PartialState(cpu=hardware_args(cfg)["use_cpu"])
    run_dir = shared_run_dir(cfg, state, command)
    try:
        exp = Experiment(cfg, notebook="train", run_dir=run_dir)
        model = exp.train_rl(exp.cold_start(exp.load_model()))
        if state.is_main_process:
            print(exp.evaluate(model, "after RL").summary())
            print(exp.stage_table())
            exp.curves()
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
    parser.add_argument("--dry-run", action="store_true", help="print the resolved parameters; train nothing")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Command-line entry point; returns the exit code (0 ok, 2 bad parameters or a launch it cannot run)."""
    args = _parser().parse_args(argv)
    try:
        cfg = resolve_config(args.files, args.params)
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
    train(cfg, [sys.executable, "-m", "searchrl.train", *(sys.argv[1:] if argv is None else argv)])
    return 0


if __name__ == "__main__":
    sys.exit(main())
