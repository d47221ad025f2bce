"""The `searchrl` command: one entry point whose subcommands are the project's tools.

    searchrl run NOTEBOOK -f PARAMS.yaml [-p KEY VALUE ...]   run a notebook into a new run folder
    searchrl train -f PARAMS.yaml                             train without a notebook (one or several processes)
    searchrl serve ...                                        the shared retrieval service
    searchrl index --corpus FILE --out INDEX ...              encode a big corpus into a faiss index, resumably
    searchrl score FILE.jsonl ...                             score a file of predictions with metrics by name
    searchrl seeds ...                                        one notebook over several seeds, and its spread
    searchrl slim RUN ... --to DIR                            a run folder's evidence without its weights
    searchrl headroom ...                                     the F1 a policy could still gain, per question type
    searchrl data list | fetch NAME | prepare NAME            the papers' datasets and corpora by name
    searchrl params                                           every parameter: type, default and meaning

Each subcommand hands the rest of the command line to the same function as `python -m searchrl.<name>`
(`python -m searchrl.config` for `params`); a subcommand's module is imported only when it runs.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Sequence

__all__ = ["COMMANDS", "main"]

# subcommand -> (module whose main(argv) it runs, what it does)
COMMANDS: dict[str, tuple[str, str]] = {
    "run": ("searchrl.experiments.runner", "run a notebook with parameter files into a new run folder"),
    "train": ("searchrl.experiments.train", "train without a notebook, in one process or several"),
    "serve": ("searchrl.retrieval.serve", "serve one retrieval index over HTTP to many trainers"),
    "index": ("searchrl.retrieval.index_build", "encode a large corpus into a faiss index, in resumable chunks"),
    "score": ("searchrl.metrics.score_file", "score a JSONL file of predictions with metrics picked by name"),
    "seeds": ("searchrl.analysis.seeds", "run one notebook over several seeds and report the spread"),
    "slim": ("searchrl.runs.slim", "copy a run folder's evidence without its weights"),
    "headroom": ("searchrl.analysis.headroom", "how much F1 a policy could still gain, per question type"),
    "data": ("searchrl.data.command", "list, fetch and prepare the papers' datasets and corpora by name"),
    "params": ("", "list every parameter with its type, default and meaning"),
}


def _usage() -> str:
    width = max(map(len, COMMANDS))
    rows = "\n".join(f"  {name.ljust(width)}  {what}" for name, (_, what) in COMMANDS.items())
    return f"usage: searchrl COMMAND [ARGS ...]\n\ncommands:\n{rows}\n\n`searchrl COMMAND --help` tells more."


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("-h", "--help", "help"):
        print(_usage())
        return 0
    name, rest = args[0], args[1:]
    if name not in COMMANDS:
        import difflib

        close = difflib.get_close_matches(name, COMMANDS, n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        print(f"searchrl: unknown command {name!r}{hint}\n\n{_usage()}", file=sys.stderr)
        return 2
    if name == "params":
        import searchrl.protocols
        import searchrl.retrieval
        import searchrl.rewards
        import searchrl.trainer.advantages  # noqa: F401  (the registries describe() lists, with their descriptions)
        from searchrl.config import RunConfig

        print(RunConfig.describe())
        return 0
    module = importlib.import_module(COMMANDS[name][0])
    code = module.main(rest)
    return int(code or 0)


if __name__ == "__main__":
    raise SystemExit(main())
