"""Peak memory of each part of a run (the cold start, each RL stage, each evaluation), so a user can tell what
machine a recipe needs before running it on a smaller one, and which part to shrink (`micro_batch_size`,
`eval_batch_size`) when a run is killed for memory.

    with measured(run_dir, "cold start"):        # writes run_dir/memory.json: {"cold start": {"peak_rss_gb": ...}}
        ...
    trainer callbacks: memory_callback()         # adds memory/peak_rss_gb to every logged row of a stage

On Linux the resident-set peak is reset at the start of each part (`/proc/self/clear_refs`), so each part gets its
own peak; elsewhere the peak is the process's since it started, and `scope` says so. GPU peaks come from torch's
allocator (tensors only; the CUDA context and caching add to what `nvidia-smi` shows).
"""

from __future__ import annotations

import contextlib
import os
import resource
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from searchrl.core.files import read_json, write_json

MEMORY_FILE = "memory.json"
GB = 1e9
_CLEAR_REFS = Path("/proc/self/clear_refs")
_STATUS = Path("/proc/self/status")


def reset_peak() -> bool:
    """Start a new peak: the resident-set high-water mark (Linux) and torch's CUDA peak. False when the RSS peak
    cannot be reset here (then `peak` reports the process's peak since it started)."""
    import torch

    if torch.cuda.is_available():
        torch.cuda.reset_peak_memory_stats()
    try:
        _CLEAR_REFS.write_text("5")  # "5" resets VmHWM, the peak resident set (proc(5), Linux >= 4.0)
        return True
    except OSError:
        return False


def _peak_rss_bytes() -> int:
    try:
        for line in _STATUS.read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024  # reported in kB
    except OSError:
        pass
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak if sys.platform == "darwin" else peak * 1024  # bytes on macOS, kB elsewhere


def peak() -> dict[str, float]:
    """The peak resident set of this process, and torch's peak CUDA allocation when there is a GPU, in GB."""
    import torch

    out = {"peak_rss_gb": round(_peak_rss_bytes() / GB, 2)}
    if torch.cuda.is_available():
        out["peak_gpu_gb"] = round(torch.cuda.max_memory_allocated() / GB, 2)
    return out


@contextlib.contextmanager
def measured(run_dir: str | Path | None, part: str) -> Iterator[None]:
    """Record the peak memory of the block as `part` in `run_dir/memory.json` (also when the block raises: a part
    killed by an exception still says how far it got; a process killed for memory writes nothing)."""
    scope = "part" if reset_peak() else "process"
    try:
        yield
    finally:
        if run_dir is not None and os.environ.get("RANK", "0") == "0":  # launched processes: the first one writes
            record(Path(run_dir), part, {**peak(), "scope": scope})


def record(run_dir: Path, part: str, values: dict[str, Any]) -> None:
    write_json(run_dir / MEMORY_FILE, {**read_memory(run_dir), part: values})


def read_memory(run_dir: str | Path) -> dict[str, dict]:
    """`memory.json` of a run folder ({} when the run wrote none or it cannot be read)."""
    try:
        return read_json(Path(run_dir) / MEMORY_FILE) or {}
    except (OSError, ValueError):
        return {}


def format_memory(parts: dict[str, dict]) -> str:
    """One line: each part's peak, e.g. "peak memory: cold start 5.1 GB, rl 6.3 GB (GPU 2.0 GB)"."""
    if not parts:
        return "peak memory: not recorded"
    shown = []
    for part, values in parts.items():
        text = f"{part} {values.get('peak_rss_gb', float('nan')):.1f} GB"
        if "peak_gpu_gb" in values:
            text += f" (GPU {values['peak_gpu_gb']:.1f} GB)"
        shown.append(text)
    return "peak memory: " + ", ".join(shown)


def machine_memory_gb() -> tuple[float | None, float | None]:
    """This machine's total and available memory in GB (None where the system does not say)."""
    total = available = None
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            key, _, value = line.partition(":")
            if key in ("MemTotal", "MemAvailable"):
                gb = round(int(value.split()[0]) * 1024 / GB, 1)
                total, available = (gb, available) if key == "MemTotal" else (total, gb)
    except (OSError, ValueError, IndexError):
        with contextlib.suppress(ValueError, OSError, AttributeError):
            total = round(os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") / GB, 1)
    return total, available


def killed_advice(run_dir: str | Path, params: dict[str, Any]) -> str:
    """What to say when a run's process was killed, likely for memory: the peaks its finished parts recorded, the
    machine's memory, and the settings that lower the peak (with the run's values)."""
    total, available = machine_memory_gb()
    parts = read_memory(run_dir)
    lines = [format_memory(parts) + " (the part that was killed is not among them)" if parts else
             "no part of the run had finished, so no peak memory was recorded"]
    if total is not None:
        lines.append(f"this machine: {total:.1f} GB" + (f", {available:.1f} GB available now" if available else "")
                     + " (other processes count too)")
    micro = params.get("micro_batch_size", 0)
    lines.append("to lower the peak: micro_batch_size (now " + (f"{micro}" if micro else "0: each step in one pass")
                 + f"), eval_batch_size (now {params.get('eval_batch_size', '?')}), activation_checkpointing, "
                 "max_concurrent_rollouts (RL's generation in chunks), or fewer other jobs beside it; each changes "
                 "how the run computes, not what it measures, so a resumed run may change it")
    return "\n  ".join(lines)


def smaller_micro_batch(params: dict[str, Any]) -> int | None:
    """A micro_batch_size about half the current pass (a quarter of a step taken whole) that divides the step, or
    None when the step is already cut into single sequences or the run's step size is unknown."""
    step = params.get("prompts_per_step", 0) * params.get("num_generations", 0)
    current = params.get("micro_batch_size", 0) or step
    target = current // 4 if current == step else current // 2
    if step <= 0 or target < 1:
        return None
    return max(n for n in range(1, target + 1) if step % n == 0)


def lower_peak_settings(params: dict[str, Any]) -> dict[str, int]:
    """Compute-only settings, with values, that about halve the peak of a training pass and of an evaluation batch:
    what a killed run can resume with (empty when neither can get smaller or the run's parameters are unknown)."""
    out = {}
    micro = smaller_micro_batch(params)
    if micro:
        out["micro_batch_size"] = micro
    if params.get("eval_batch_size", 0) > 1:
        out["eval_batch_size"] = params["eval_batch_size"] // 2
    return out


def memory_callback() -> Any:
    """A transformers TrainerCallback that adds the peak resident set since the stage began (`memory/peak_rss_gb`,
    and `memory/peak_gpu_gb` with a GPU) to each logged row. Put it before the history callback: callbacks see the
    same `logs` dict in order, so the rows the history keeps carry it."""
    from transformers import TrainerCallback

    class _MemoryCallback(TrainerCallback):
        def on_log(self, args, state, control, logs=None, **kwargs):
            if logs is not None:
                logs.update({f"memory/{key}": value for key, value in peak().items()})

    return _MemoryCallback()


__all__ = ["MEMORY_FILE", "format_memory", "killed_advice", "machine_memory_gb", "measured", "memory_callback", "peak",
           "read_memory", "reset_peak"]
