"""How RL's gain on held-out questions grows with the rollouts it trains on: the lever runs of docs/lab/LOG.md, by
cold start, on one axis.

Reads `docs/lab/evidence/gain_vs_rollouts.csv` (one row per run: its cold start's family, the lever, seed, device,
the RL recipe (runs of one recipe differ only in how many rollouts they train on), trained rollouts, held-out
questions, ΔF1 after RL minus after the cold start with its paired bootstrap 95% interval, and the LOG's lever-table
row it comes from), plots ΔF1 against the trained rollouts on a log axis with issue 10's target (+0.10) drawn in,
fits ΔF1 = a + b log10(rollouts) for each cold start and recipe run at three or more rollout counts, and says where
each fit reaches the target.

    python benchmarks/gain_vs_rollouts.py
    python benchmarks/gain_vs_rollouts.py --csv my_runs.csv --out outputs/my-gain-vs-rollouts.png

Writes the figure (default docs/lab/figures/gain-vs-trained-rollouts.png, the copy the lab notebook cites) and
outputs/benchmarks/gain_vs_rollouts-<time>.json with the fits.
"""

from __future__ import annotations

import argparse
import json
import math
import time
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
TARGET = 0.10
COLUMNS = ("family", "lever", "recipe", "seed", "device", "trained_rollouts", "n_eval", "delta_f1", "low", "high")


def read_runs(path: Path) -> pd.DataFrame:
    runs = pd.read_csv(path)
    missing = [c for c in COLUMNS if c not in runs]
    if missing:
        raise SystemExit(f"{path} lacks the columns {', '.join(missing)}; it needs {', '.join(COLUMNS)}")
    return runs


def fit(runs: pd.DataFrame) -> dict:
    """Least squares of ΔF1 on log10(trained rollouts), and the rollouts where the line meets the target."""
    x, y = np.log10(runs["trained_rollouts"].to_numpy(float)), runs["delta_f1"].to_numpy(float)
    if len(set(x)) < 3:  # a line through two rollout counts fits any two numbers
        return {"runs": len(runs), "slope_per_decade": None, "rollouts_at_target": None}
    slope, intercept = np.polyfit(x, y, 1)
    at_target = 10 ** ((TARGET - intercept) / slope) if slope > 0 else math.inf
    return {"runs": len(runs), "slope_per_decade": float(slope), "intercept": float(intercept),
            "rollouts_at_target": float(at_target)}


def fits_by_recipe(runs: pd.DataFrame) -> tuple[dict, list]:
    """The fit of each (cold start, recipe) run at three or more rollout counts, and the pairs left as points.

    A line is drawn only through runs of one cold start and one recipe: a lever that changes what RL rewards or
    samples is its own recipe and stays a point until it is run at three rollout counts."""
    every = {key: fit(part) for key, part in runs.groupby(["family", "recipe"])}
    fits = {key: info for key, info in every.items() if info["slope_per_decade"] is not None}
    return fits, sorted(every.keys() - fits.keys())


def plot(runs: pd.DataFrame, fits: dict, out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8.5, 4.8))
    colours = dict(zip(sorted(runs["family"].unique()), plt.rcParams["axes.prop_cycle"].by_key()["color"]))
    for (family, device), part in runs.groupby(["family", "device"]):
        jitter = 1 + 0.04 * (part["seed"].to_numpy() - 1)  # seeds of one setting side by side, not on top
        ax.errorbar(part["trained_rollouts"] * jitter, part["delta_f1"],
                    yerr=[part["delta_f1"] - part["low"], part["high"] - part["delta_f1"]],
                    fmt="s" if device == "gpu" else "o", ms=7 if device == "gpu" else 5, capsize=2,
                    color=colours[family], alpha=0.85,
                    label=f"{family} cold start, {device}" + (f" (n={part['n_eval'].iloc[0]})" if family == "demo"
                                                              else ""))
    span = np.logspace(math.log10(runs["trained_rollouts"].min() * 0.8), math.log10(5000), 50)
    for (family, _recipe), info in fits.items():
        ax.plot(span, info["intercept"] + info["slope_per_decade"] * np.log10(span), "--", lw=1,
                color=colours[family])
    ax.axhline(TARGET, color="black", lw=1)
    ax.text(span[0], TARGET + 0.008, "target: ΔF1 >= +0.10 with the interval above 0", fontsize=8)
    ax.axhline(0, color="grey", lw=0.6)
    ax.set_xscale("log")
    ax.set_xlabel("rollouts RL trained on (log scale)")
    ax.set_ylabel("ΔF1 after RL - after cold start (95% interval)")
    ax.set_title("RL's held-out gain against the rollouts it trained on (runs of docs/lab/LOG.md)")
    ax.legend(fontsize=8, loc="lower right")
    ax.grid(alpha=0.3)
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=120)
    plt.close(fig)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--csv", type=Path, default=ROOT / "docs" / "lab" / "evidence" / "gain_vs_rollouts.csv")
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "lab" / "figures" / "gain-vs-trained-rollouts.png")
    args = parser.parse_args()
    runs = read_runs(args.csv)
    fits, unfitted = fits_by_recipe(runs)
    plot(runs, fits, args.out)
    for (family, recipe), info in fits.items():
        print(f"{family} cold start, {recipe}: {info['runs']} runs, ΔF1 {info['slope_per_decade']:+.3f} per tenfold "
              f"rollouts; the line meets +{TARGET:.2f} at about {info['rollouts_at_target']:,.0f} trained rollouts")
    print(f"points only (fewer than three rollout counts): {', '.join(f'{f}/{r}' for f, r in unfitted)}")
    stamp = time.strftime("%Y%m%d-%H%M%S")
    record = ROOT / "outputs" / "benchmarks" / f"gain_vs_rollouts-{stamp}.json"
    record.parent.mkdir(parents=True, exist_ok=True)
    named = {f"{family}/{recipe}": info for (family, recipe), info in fits.items()}  # JSON keys are strings
    record.write_text(json.dumps({"csv": str(args.csv), "figure": str(args.out), "fits": named}, indent=2))
    print(f"figure: {args.out}\nfits: {record}")


if __name__ == "__main__":
    main()
