"""Partial fine-tuning: RL trains only the top decoder blocks of the policy (`train_top_layers`).

Why: on a CPU the backward pass costs about twice the forward (an RL step of the CPU demo spends 14.7 s in backward
against 9.3 s in forward, `benchmarks/step_split.py`). Autograd stops at the lowest weight that needs a gradient, so
with the embeddings and the lower blocks frozen the backward pass runs through the trained blocks only, and their
gradients are exactly what full fine-tuning would compute for them (the frozen weights only stop being updated).
What the policy can learn is narrower, which is why it is a setting, measured as a lever, not a default.

The output layer stays frozen too: in the bundled SmolLM2 it is the input embedding matrix (tied), the largest
single weight, and the lowest point of the network. The final norm, which sits above the blocks, is trained.
"""

from __future__ import annotations

import torch

from searchrl.trainer.levers.base import Lever

__all__ = ["TrainTopLayers", "decoder_blocks", "train_top_blocks"]


def decoder_blocks(model: torch.nn.Module) -> tuple[str, torch.nn.ModuleList]:
    """The model's list of decoder blocks and its qualified name: the first `ModuleList` with as many entries as
    the config's `num_hidden_layers` (`model.layers` in LLaMA-style models, `transformer.h` in GPT-2)."""
    count = getattr(getattr(model, "config", None), "num_hidden_layers", None)
    for name, module in model.named_modules():
        if isinstance(module, torch.nn.ModuleList) and count is not None and len(module) == count:
            return name, module
    raise ValueError(f"train_top_layers: found no list of {count} decoder blocks in {type(model).__name__}; "
                     "train every layer (train_top_layers: 0) or use LoRA (use_peft: true)")


def train_top_blocks(model: torch.nn.Module, top: int) -> tuple[int, int]:
    """Freeze every weight of `model` except those of its top `top` decoder blocks and of the modules registered
    after the blocks (the final norm), other than the output embedding. Returns (trained, total) parameter counts.
    `top` 0 leaves every weight as it is."""
    if top == 0:
        total = sum(p.numel() for p in model.parameters())
        return sum(p.numel() for p in model.parameters() if p.requires_grad), total
    prefix, blocks = decoder_blocks(model)
    if not 0 < top <= len(blocks):
        raise ValueError(f"train_top_layers must be in [0, {len(blocks)}] for this model; got {top}")
    trained_ids = {id(p) for block in list(blocks)[-top:] for p in block.parameters()}
    output = model.get_output_embeddings() if hasattr(model, "get_output_embeddings") else None
    frozen_ids = {id(p) for p in output.parameters()} if output is not None else set()
    inside = f"{prefix}."
    seen_blocks = False
    for name, param in model.named_parameters():  # registration order: embeddings, blocks, final norm, head
        if name.startswith(inside):
            seen_blocks = True
        elif seen_blocks and id(param) not in frozen_ids:
            trained_ids.add(id(param))
    trained = total = 0
    for param in model.parameters():
        param.requires_grad_(id(param) in trained_ids)
        total += param.numel()
        trained += param.numel() if param.requires_grad else 0
    return trained, total


class TrainTopLayers(Lever):
    """train_top_layers: freezes the policy below its top N blocks when the trainer is built (after the ppo critic
    copied the body, which trains in full); the optimizer, built in train(), takes only the weights that still
    need gradients."""

    name = "freeze"

    def __init__(self, trainer) -> None:
        super().__init__(trainer)
        top = trainer.args.train_top_layers
        trained, total = train_top_blocks(trainer.accelerator.unwrap_model(trainer.model), top)
        print(f"train_top_layers {top}: training {trained:,} of {total:,} weights")
