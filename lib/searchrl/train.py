"""`python -m searchrl.train`: Train without a notebook. The command keeps this name; the code is
`searchrl.experiments.train`."""

from searchrl.experiments.train import main

if __name__ == "__main__":
    raise SystemExit(main())
