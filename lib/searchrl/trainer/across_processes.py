"""Statistics of the whole batch when several processes each roll out only their slice of it.

Under `accelerate launch` every process generates, retrieves for and scores its own slice; TRL gathers the
rewards and completion lengths it logs, but a statistic computed from one slice's trajectories describes that slice
only (and the main process, whose log is the one written, would report its own half of the batch).
"""

from __future__ import annotations

from collections.abc import Mapping

import torch


def mean_over_processes(values: Mapping[str, float], weights: Mapping[str, float], accelerator) -> dict[str, float]:
    """Each value's weighted mean over every process's slice: a slice's value counts with its weight (the number of
    samples it averages over, or of tokens for a per-token rate). One process gets `values` back unchanged.

    Collective: every process must call it with the same names, as each rollout of a training step does.
    """
    if accelerator.num_processes == 1:
        return dict(values)
    names = sorted(values)  # the same order on every process, whatever order each one built its dict in
    local = torch.tensor([[float(values[n]) * float(weights[n]), float(weights[n])] for n in names],
                         dtype=torch.float64, device=accelerator.device)
    totals = accelerator.reduce(local, reduction="sum").tolist()
    return {n: (total / weight if weight > 0 else 0.0) for n, (total, weight) in zip(names, totals)}


__all__ = ["mean_over_processes"]
