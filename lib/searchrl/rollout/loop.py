"""The batched question loop: every question rolled out with the training engine (`SearchRollout`).

Evaluation and rejection sampling share it (`searchrl.evaluation.evaluate.evaluate`, `searchrl.sft.rejection`), so
their rollouts are exactly what the policy does during RL (same prompts, same stop strings, same observation text).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence

from searchrl.config.rollout import RolloutConfig
from searchrl.core.progress import progress_bar
from searchrl.protocols.base import SearchProtocol
from searchrl.rollout.base import TurnGenerator
from searchrl.rollout.engine import SearchRollout, Trajectory
from searchrl.rollout.generators import HFTurnGenerator

__all__ = ["rollout_questions"]


def rollout_questions(
    model,
    tokenizer,
    protocol: SearchProtocol,
    retriever,
    rows: Sequence[Mapping],
    rollout: RolloutConfig,
    *,
    greedy: bool,
    batch_size: int,
    chat: bool = True,
    repeats: int = 1,
    generator: TurnGenerator | None = None,
    desc: str = "rollouts",
    progress: bool = True,
    postfix: Callable[[], dict] | None = None,
) -> Iterator[tuple[Mapping, str, list[Trajectory]]]:
    """Roll out every question `repeats` times with the training engine; yields (row, prompt, trajectories).

    The loop that evaluation and rejection sampling share: prompts built by the protocol, batches of `batch_size`
    sequences (whole questions), the model in eval mode meanwhile (its mode restored after), and a progress bar
    whose postfix `postfix()` gives after each batch (running scores, say).
    """
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    if generator is None:
        if model is None:
            raise ValueError("rollouts need a model (or a `generator` that produces the turns)")
        generator = HFTurnGenerator.from_rollout(model, tokenizer, protocol.stop_strings, rollout, greedy=greedy)
    engine = SearchRollout(protocol, retriever, tokenizer, generator, rollout)
    was_training = getattr(model, "training", None)
    if model is not None:
        model.eval()
    per_batch = max(1, batch_size // repeats)  # questions per batch, each repeated
    bar = progress_bar(total=len(rows), desc=desc, unit="question", disable=not progress)
    try:
        for lo in range(0, len(rows), per_batch):
            batch = rows[lo: lo + per_batch]
            prompts = [protocol.build_prompt(r["question"], tokenizer, chat=chat) for r in batch]
            prompt_ids = [tokenizer(p, add_special_tokens=False)["input_ids"] for p in prompts]
            trajs = engine.run([ids for ids in prompt_ids for _ in range(repeats)])
            for q, (row, prompt) in enumerate(zip(batch, prompts)):
                yield row, prompt, trajs[q * repeats: (q + 1) * repeats]
            bar.update(len(batch))
            if postfix is not None:
                bar.set_postfix(postfix())
    finally:
        bar.close()
        if model is not None and was_training is not None:
            model.train(was_training)
