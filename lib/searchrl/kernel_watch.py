"""`python -m searchrl.kernel_watch`: the watcher a run folder's kernel starts. The command keeps this name; the code
is `searchrl.runs.kernel_watch`."""

from searchrl.runs.kernel_watch import main

if __name__ == "__main__":
    raise SystemExit(main())
