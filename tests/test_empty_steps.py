"""skip_empty_steps: a zero-gradient step moves no weight; without it Adam's momentum does."""

from __future__ import annotations

import random

import pytest
import torch
from transformers import TrainerCallback

from fakes import mini_trainer
from searchrl.trainer.levers.empty_steps import gradient_is_zero


def _adam_after_an_empty_step(skip: bool) -> tuple[torch.Tensor, torch.Tensor]:
    weight = torch.nn.Parameter(torch.ones(3))
    optimizer = torch.optim.AdamW([weight], lr=0.1, weight_decay=0.0)
    weight.grad = torch.tensor([1.0, -2.0, 0.5])
    optimizer.step()
    informed = weight.detach().clone()
    weight.grad = torch.zeros(3)
    assert gradient_is_zero([weight])
    if skip:
        weight.grad = None
    optimizer.step()
    return informed, weight.detach().clone()


def test_adam_moves_on_a_zero_gradient_and_a_dropped_gradient_stops_it():
    informed, after = _adam_after_an_empty_step(skip=False)
    assert not torch.allclose(informed, after)  # the momentum of the informative step, applied again
    informed, after = _adam_after_an_empty_step(skip=True)
    assert torch.equal(informed, after)


class _Snapshots(TrainerCallback):
    def __init__(self, model):
        self.model, self.weights = model, []

    def on_step_end(self, args, state, control, **kwargs):
        self.weights.append([p.detach().clone() for p in self.model.parameters()])


@pytest.mark.parametrize("skip", [False, True])
def test_steps_without_an_informative_group_leave_the_weights_where_the_last_update_put_them(
        tmp_path, tiny_policy_path, tokenizer, skip):
    calls = []

    def first_step_only(prompts, completions, **kwargs):  # rewards differ in the first step's batch, never after
        calls.append(1)
        return [random.random() if len(calls) == 1 else 0.0 for _ in prompts]

    rows = [{"id": str(i), "question": f"Question {i}?", "golden_answers": ["x"], "metadata": {}} for i in range(2)]
    trainer, _ = mini_trainer(tmp_path, tiny_policy_path, tokenizer, rows, [first_step_only], num_generations=2,
                              per_device_train_batch_size=4, max_completion_length=8, max_steps=3,
                              learning_rate=1e-3, drop_zero_variance=True, skip_empty_steps=skip)
    snapshots = _Snapshots(trainer.model)
    trainer.add_callback(snapshots)
    trainer.train()
    assert len(calls) == 3 and len(snapshots.weights) == 3
    first, last = snapshots.weights[0], snapshots.weights[-1]
    unchanged = all(torch.equal(a, b) for a, b in zip(first, last))
    assert unchanged == skip  # without the lever, steps 2 and 3 still move every weight
    assert (trainer.lever("skip_empty_steps") is not None) == skip  # installed only when asked for
