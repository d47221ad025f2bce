"""`python -m searchrl.slim`: A run folder's evidence without its weights. The command keeps this name; the code is
`searchrl.runs.slim`."""

from searchrl.runs.slim import main

if __name__ == "__main__":
    raise SystemExit(main())
