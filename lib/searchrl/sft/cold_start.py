"""The supervised cold start: TRL's SFTTrainer on tokenized items whose retrieved tokens are masked from the loss.

R1-Searcher++ (eq. 2) fine-tunes on search trajectories before RL with the loss restricted to the tokens the model
writes: the documents the search engine appended are context, not targets. The masks are built in `tokenize_sft`;
TRL's SFTTrainer (1.16) takes a pre-tokenized dataset with a `labels` column as is (it only truncates to
`max_length` and drops rows without a trained token, and its collator pads labels with -100), so they reach the
loss unchanged and TRL's loss, metrics and progress bar are kept.

All training settings (device, precision, learning rate, epochs, ...) travel in one `SFTConfig`; a run builds it
from its RunConfig in `searchrl.trainer.arguments.sft_args`, the same place that builds the RL arguments.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from datasets import Dataset

from searchrl.core.quiet import silence_known_warnings, tied_weights_resume_note
from searchrl.data.tokenize import IGNORE_INDEX, tokenize_sft

silence_known_warnings()


def make_sft_trainer(model, tokenizer, items: Sequence[Mapping] | Dataset, args):
    """An SFTTrainer over `items` (tokenized with `args.max_length` when they are not a Dataset yet)."""
    from trl import SFTTrainer

    dataset = items if isinstance(items, Dataset) else tokenize_sft(items, tokenizer, args.max_length or 1024)
    return SFTTrainer(model=model, args=args, train_dataset=dataset, processing_class=tokenizer)


def sft_train(model, tokenizer, items: Sequence[Mapping] | Dataset, args, *, stage_bar: str | None = None,
              resume_from_checkpoint: str | None = None) -> dict[str, Any]:
    """Cold start `model` in place on `items` (or a dataset from `tokenize_sft`) with TRL's `SFTConfig` `args`.

    Returns {"history": the trainer's log history (loss per logging step), "train_loss", "steps", "examples",
    "trained_tokens", "seconds"}. The model's train/eval mode is restored afterwards. `stage_bar` names a progress
    bar over the steps (with the running loss) shown instead of the trainer's printed logs; `resume_from_checkpoint`
    continues an interrupted cold start from one of its trainer checkpoints (weights, optimizer and data position).
    """
    was_training = model.training
    trainer = make_sft_trainer(model, tokenizer, items, args)
    if stage_bar is not None:
        from searchrl.core.progress import attach_stage_bar

        attach_stage_bar(trainer, stage_bar, {"loss": "loss"})
    dataset = trainer.train_dataset
    try:
        with tied_weights_resume_note(trainer.model):
            output = trainer.train(resume_from_checkpoint=resume_from_checkpoint)
    finally:
        model.train(was_training)
    return {
        "history": list(trainer.state.log_history),
        "train_loss": float(output.training_loss),
        "steps": int(trainer.state.global_step),
        "examples": len(dataset),
        "trained_tokens": int(sum(sum(label != IGNORE_INDEX for label in row) for row in dataset["labels"])),
        "seconds": float(output.metrics.get("train_runtime", float("nan"))),
    }


__all__ = ["make_sft_trainer", "sft_train"]
