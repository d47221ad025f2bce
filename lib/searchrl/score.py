"""`python -m searchrl.score`: Score a JSONL file of predictions. The command keeps this name; the code is
`searchrl.metrics.score_file`."""

from searchrl.metrics.score_file import main

if __name__ == "__main__":
    raise SystemExit(main())
