"""Two SearchGRPOTrainer steps in one or several processes, recording what tests/test_distributed.py checks.

    accelerate launch --config_file launch/cpu_2proc.yaml --num_processes 2 tests/distributed_grpo_run.py OUT
    python tests/distributed_grpo_run.py OUT                        # the same global batch in one process

Six questions about the fake retriever's entities, four answers each, three questions per step: a global batch of
12 samples, so each of two processes holds 6 and one question's group is split between them. Completions are
scripted by the sample's place in its group (its global position, not its place in this process's slice), so a
sample gets the same completion whichever process rolls it out. Each process writes OUT/rank<k>.json: what its
reward function scored (its slice) and what the group reward computed over (after the gather), the trainer's log
history and a checksum of its final parameters; the main process also writes OUT/params.pt.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import sys
from pathlib import Path

os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).parent))  # fakes.py

import torch
from accelerate import PartialState

from fakes import FakeRetriever, MiniProtocol, ScriptedGenerator
from searchrl.models import tiny_test_policy
from searchrl.rewards import group as group_module
from searchrl.rewards import make_reward
from searchrl.rewards.inputs import prompt_key
from searchrl.rollout import RolloutConfig, SearchRollout
from searchrl.trainer import SearchGRPOConfig, SearchGRPOTrainer, prompt_dataset

NUM_GENERATIONS = 4
GLOBAL_BATCH = 12  # samples per step over all processes: 3 questions x 4 answers
STEPS = 2
ENTITIES = 6  # one question per fake-retriever entity; 2 steps x 3 questions use each once
NOBODY_RIGHT = {2, 5}  # entities whose four answers are all wrong: zero-variance groups, dropped (DAPO)
ROLLOUT = RolloutConfig(max_searches=2, top_k=2, max_completion_tokens=256, max_turn_tokens=64)


def member_script(entity: int, member: int) -> list[str]:
    """The turns of one answer: member 0 searches once, 1 twice, 2 guesses wrong, 3 answers without searching."""
    year = str(1900 + entity) if entity not in NOBODY_RIGHT else "no idea"
    return [
        [f"<search>Entity{entity} founded</search>", f"<answer>{year}</answer>"],
        [f"<search>Entity{entity}</search>", f"<search>Entity{entity} founded</search>", f"<answer>{year}</answer>"],
        ["<answer>no idea</answer>"],
        [f"<answer>{year}</answer>"],
    ][member]


class GroupPlaceGenerator:
    """Scripted turns chosen by each sample's place in its group.

    TRL hands each process a contiguous slice of the global batch, in rank order, with every group's members
    adjacent; so a sample's global position is rank * slice size + its position in the slice. The first turn of a
    rollout sees every sample of the slice in order (the engine resets generators before each rollout).
    """

    def __init__(self, tokenizer, rank: int):
        self.tokenizer, self.rank = tokenizer, rank
        self.player: ScriptedGenerator | None = None

    def reset(self) -> None:
        self.player = None

    def generate_turn(self, sequences, max_new_tokens):
        if self.player is None:
            offset = self.rank * len(sequences)
            entities = [int(re.search(r"Entity(\d+)", self.tokenizer.decode(s)).group(1)) for s in sequences]
            scripts = [member_script(e, (offset + i) % NUM_GENERATIONS) for i, e in enumerate(entities)]
            self.player = ScriptedGenerator(self.tokenizer, scripts)
        return self.player.generate_turn(sequences, max_new_tokens)


class RecordedReward:
    """A reward function that remembers what it was given and what it returned, call by call (this slice only)."""

    def __init__(self, reward):
        self.reward, self.__name__, self.calls = reward, reward.__name__, []

    def __call__(self, prompts=None, completions=None, **kwargs):
        rewards = self.reward(prompts=prompts, completions=completions, **kwargs)
        self.calls.append({"ids": list(kwargs["id"]), "num_searches": list(kwargs["num_searches"]),
                           "rewards": [float(r) for r in rewards]})
        return rewards


def record_group_rows(question_of: dict[str, str]) -> list[list]:
    """Patch the group reward's grouping step to remember the rows it groups: what the reward computes over, after
    the gather. Each entry is one call's [question id, retrieval count, correct] rows."""
    seen: list[list] = []
    original = group_module.rewards_by_group

    def recording(rows, eta):
        seen.append([[question_of[key], count, correct] for key, count, correct in rows])
        return original(rows, eta)

    group_module.rewards_by_group = recording
    return seen


def parameter_digest(model) -> str:
    """sha256 of every parameter's bytes, in name order: equal digests mean bit-identical weights."""
    digest = hashlib.sha256()
    for name, tensor in sorted(model.state_dict().items()):
        digest.update(name.encode())
        digest.update(tensor.detach().cpu().contiguous().numpy().tobytes())
    return digest.hexdigest()


def main(out: Path) -> None:
    state = PartialState(cpu=True)  # several processes: gloo, as the trainer's use_cpu would choose
    out.mkdir(parents=True, exist_ok=True)
    model, tokenizer = tiny_test_policy(seed=0)
    initial = {k: v.detach().clone() for k, v in model.state_dict().items()}
    protocol = MiniProtocol()
    rows = [{"id": f"q{i}", "question": f"When was Entity{i} founded?", "golden_answers": [str(1900 + i)],
             "metadata": {}} for i in range(ENTITIES)]
    data = prompt_dataset(rows, protocol, tokenizer)
    group_rows = record_group_rows({prompt_key(p): i for p, i in zip(data["prompt"], data["id"])})
    reward = RecordedReward(make_reward("group_r1spp", protocol))
    args = SearchGRPOConfig(
        output_dir=str(out / "trainer"), seed=0, max_steps=STEPS, num_generations=NUM_GENERATIONS,
        per_device_train_batch_size=GLOBAL_BATCH // state.num_processes, rollout=ROLLOUT,
        # SGD, not Adam: Adam's first step turns any gradient, even one at float round-off level, into a step of
        # +-lr, so reduction order alone could flip weights; SGD keeps the runs comparable by their gradients.
        optim="sgd", learning_rate=0.5, drop_zero_variance=True,
        use_cpu=True, bf16=False, report_to="none", save_strategy="no", logging_steps=1, disable_tqdm=True,
    )
    trainer = SearchGRPOTrainer(model=model, reward_funcs=[reward], args=args, train_dataset=data,
                                retriever=FakeRetriever(n=ENTITIES), protocol=protocol, processing_class=tokenizer)
    trainer._engine = SearchRollout(protocol, trainer.retriever, tokenizer,
                                    GroupPlaceGenerator(tokenizer, state.process_index), ROLLOUT)
    trainer.train()
    trained = trainer.accelerator.unwrap_model(trainer.model)
    largest_update = max((p.detach() - initial[k]).abs().max().item() for k, p in trained.state_dict().items())
    record = {
        "rank": state.process_index, "world_size": state.num_processes, "reward_calls": reward.calls,
        "group_rows": group_rows, "log_history": trainer.state.log_history,
        "parameter_digest": parameter_digest(trained), "largest_update": largest_update,
    }
    (out / f"rank{state.process_index}.json").write_text(json.dumps(record, indent=1))
    if state.is_main_process:
        torch.save({k: v.detach().cpu() for k, v in trained.state_dict().items()}, out / "params.pt")
    state.wait_for_everyone()


if __name__ == "__main__":
    main(Path(sys.argv[1]))
