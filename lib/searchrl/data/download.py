"""Fetch the papers' benchmarks in FlashRAG's jsonl format (for machines with internet access).

Everything else in `searchrl.data` works offline; this module is the one place that talks to the Hugging Face
hub. The files it writes are read back with `searchrl.data.loaders.load_qa`.
"""

from __future__ import annotations

from pathlib import Path

FLASHRAG_HUB_ID = "RUC-NLPIR/FlashRAG_datasets"

# The datasets of the papers (and a few neighbours) and the splits the hub holds for them.
FLASHRAG_SPLITS: dict[str, tuple[str, ...]] = {
    "nq": ("train", "dev", "test"),
    "triviaqa": ("train", "dev", "test"),
    "popqa": ("test",),
    "hotpotqa": ("train", "dev"),
    "2wikimultihopqa": ("train", "dev"),
    "musique": ("train", "dev"),
    "bamboogle": ("test",),
    "squad": ("train", "dev"),
    "narrativeqa": ("train", "dev", "test"),
}


def download_flashrag(dataset: str, split: str, out_dir: str | Path) -> Path:
    """Download one FlashRAG dataset split and write it to `out_dir/<dataset>/<split>.jsonl`; returns that path.

    Raises ValueError for a dataset or split the hub does not hold (before any network access) and
    RuntimeError, with what to do instead, when the download fails.
    """
    if dataset not in FLASHRAG_SPLITS:
        raise ValueError(f"unknown FlashRAG dataset {dataset!r}; choose from {', '.join(FLASHRAG_SPLITS)}")
    if split not in FLASHRAG_SPLITS[dataset]:
        raise ValueError(
            f"FlashRAG has no {split!r} split of {dataset}; it has {', '.join(FLASHRAG_SPLITS[dataset])}"
        )
    out = Path(out_dir).expanduser() / dataset / f"{split}.jsonl"
    out.parent.mkdir(parents=True, exist_ok=True)
    from datasets import load_dataset  # imported here: importing searchrl.data must stay light and offline

    try:
        rows = load_dataset(FLASHRAG_HUB_ID, dataset, split=split)
    except Exception as err:  # network, authentication and hub errors all end here, with one clear message
        raise RuntimeError(
            f"could not download {dataset}/{split} from the Hugging Face hub ({FLASHRAG_HUB_ID}): {err}. "
            f"Without internet access, copy the jsonl file onto this machine and read it with "
            f"searchrl.data.loaders.load_qa."
        ) from err
    rows.to_json(str(out), lines=True, force_ascii=False)
    return out


__all__ = ["FLASHRAG_HUB_ID", "FLASHRAG_SPLITS", "download_flashrag"]
