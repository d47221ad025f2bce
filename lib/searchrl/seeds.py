"""`python -m searchrl.seeds`: One notebook over several seeds. The command keeps this name; the code is
`searchrl.analysis.seeds`."""

from searchrl.analysis.seeds import main

if __name__ == "__main__":
    raise SystemExit(main())
