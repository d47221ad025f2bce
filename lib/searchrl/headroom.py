"""`python -m searchrl.headroom`: How much F1 a policy could still gain. The command keeps this name; the code is
`searchrl.analysis.headroom`."""

from searchrl.analysis.headroom import main

if __name__ == "__main__":
    raise SystemExit(main())
