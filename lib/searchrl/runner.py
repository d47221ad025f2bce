"""`python -m searchrl.runner`: Run a notebook with a parameter file into a new run folder. The command keeps this
name; the code is `searchrl.experiments.runner`."""

from searchrl.experiments.runner import main

if __name__ == "__main__":
    raise SystemExit(main())
