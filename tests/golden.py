"""Golden records of what searchrl computes, to show that a refactor changes no behaviour.

    python tests/golden.py record OUT_DIR [--only PART ...] [--case NAME ...] [--notebook NAME ...]
                                          [--fresh-model-cache]
    python tests/golden.py compare OLD_DIR NEW_DIR [--renames MAP.json]
    python tests/golden.py tests-ast OLD_COMMIT

`tests-ast` compares each test file of OLD_COMMIT with the working tree's, import statements removed: a refactor
that only moves code should leave every test body as it was.

Record once on the code before a change and once after, then compare: `compare` prints one line per artefact,
`identical` or `DIFFERENT` with the first differing key (JSON) or line (text), and exits 1 when any artefact differs
or exists on one side only. Two records of the same code compare identical (everything that varies from run to run
is normalised away, see below), so any difference is a change in behaviour or in text the code prints.

What is recorded (one folder per part under OUT_DIR; JSON with sorted keys, tensors as nested lists of floats
written by `repr`, which round-trips exactly):

trainer/<case>.json
    `SearchGRPOTrainer` on a tiny random Llama (the tests' fixture: `tiny_test_policy(seed=0)` with the real
    SmolLM2 tokenizer), MiniProtocol and FakeRetriever from tests/fakes.py, on the CPU, every seed (torch, random,
    numpy) set to 0 before each stage. Each case is one combination of levers (see CASES). Per case:
      scored  - one batch through `_generate_and_score_completions`: every tensor of the batch (prompt and
                completion ids and masks, tool_mask, advantages, old/ref log-probs, num_items_in_batch, ...), then
                `compute_loss` and `loss.backward()`: the loss, the full gradient of two fixed small parameters
                (GRAD_PARAMS) and, for every parameter, the sum and the sum of squares of its gradient (None when it
                has none, e.g. below train_top_layers), and the trainer's logged metrics (timings left out);
      train   - a fresh trainer of the same case through `trainer.train()` (TRAIN_STEPS steps, or the case's
                `steps`: 2 for grpo_kl, so that the policy has left the reference, 3 for the prompt selections,
                whose sampler draws from what earlier steps scored): its log history
                (runtimes and throughputs left out), the same fingerprint of the weights after the update, and
                every text file the trainer wrote in its output folder (the rollout log, rewrites, ...).
    Scripted cases replay fixed rollouts (tests/fakes.py SEARCH_SCRIPTS, through the real rollout engine), so their
    tokens do not depend on sampling; the "mini" cases sample from the tiny model (seeded), as the tests of dynamic
    sampling, prompt selection and the opener levers do. Every case writes a rollout log (rollout_log_dir), which
    only records what was scored. Not covered by a trainer case: vLLM generation, several processes, PEFT.

notebooks/<notebook>/...
    Each notebook in notebooks/ run by the runner with its params/<notebook>/smoke.yaml and `-p torch_threads 1`
    into a scratch output root (two at a time; `report` last, over the ablation runs just made, since its smoke
    profile reports the newest finished runs under the output root). From each run folder: every .json, .jsonl,
    .csv, .md, .yaml, .txt and .html file (arms included), and metrics.parquet as JSON rows; not the weights,
    checkpoints/, the executed notebook, logs and figures' images. Also `<notebook>._run.json`: the runner's exit
    status and every file of the run folder, marked recorded, skipped or binary. Index and difficulty caches are
    fresh per record; the tiny models (tiny-searcher) are read from the model cache (~/.cache/searchrl, built on
    first use) unless --fresh-model-cache builds them in a scratch cache. Takes about 4-5 minutes on 2 cores.
    Normalised (see `_normalise_text`, `VOLATILE_KEYS`, `SKIPPED_FILES`): absolute paths (run folder, output
    root, repository, scratch folders) to <RUN>/<ROOT>/<REPO>/<SCRATCH>, run ids to <RUNID>, ISO timestamps to
    <TIME>; values of clock, wall-time, throughput (questions_per_second, *_per_second), peak-memory, pid,
    hostname and heartbeat fields (JSON keys and metrics columns) to "<volatile>"; provenance.json (commit,
    versions, hostname, command), status.json, lock files and the executed notebook are not recorded.

config/
    describe.txt: `RunConfig.describe()`; params/<notebook>__<file>.json for every params/*/*.yaml: the file's
    values, `RunConfig.from_params(None, file).to_dict()` and what the runner would run (`plan_run(notebook,
    [file])`: resolved config and the values injected into the notebook), or the error text where building fails.

help/<module>.txt
    `python -m <module> --help` (stdout, stderr, exit status) of every module in ENTRY_POINTS (those with an
    `if __name__ == "__main__"` block or a __main__.py).

Module renames: `compare --renames MAP.json` takes {"old.dotted.name": "new.dotted.name", ...} and rewrites the OLD
side's text and file names with it before comparing (longest names first, whole dotted names only), so that
output naming a moved module (help usage lines, docs in describe()) compares equal when only the name moved.
"""

from __future__ import annotations

import argparse
import ast
import concurrent.futures
import json
import math
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TESTS = ROOT / "tests"

# Every module with an `if __name__ == "__main__"` block or a __main__.py (grep -rl '__name__ == "__main__"' lib/).
# The commands users type (`python -m searchrl.<name>`), which keep their names across moves of the code.
ENTRY_POINTS = [
    "searchrl.config",
    "searchrl.headroom",
    "searchrl.kernel_watch",
    "searchrl.retrieval.serve",
    "searchrl.runner",
    "searchrl.score",
    "searchrl.seeds",
    "searchrl.slim",
    "searchrl.train",
]
# Run after every other notebook: its smoke profile reports the newest ablation runs under the output root.
LAST_NOTEBOOKS = ["report"]
PARTS = ("trainer", "notebooks", "config", "help")

for _name, _value in {"OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false", "HF_HUB_OFFLINE": "1",
                      "TRL_EXPERIMENTAL_SILENCE": "1", "PYTHONHASHSEED": "0"}.items():
    os.environ.setdefault(_name, _value)


# ---- writing and comparing ------------------------------------------------------------------------------------------


def plain(value):
    """JSON-ready form of `value`: tensors as {dtype, shape, values}, floats kept exact (json writes repr)."""
    import numpy as np
    import torch

    if isinstance(value, torch.Tensor):
        t = value.detach().cpu()
        values = t.double().tolist() if t.is_floating_point() else t.tolist()
        return {"dtype": str(t.dtype), "shape": list(t.shape), "values": values}
    if isinstance(value, np.ndarray):
        return {"dtype": str(value.dtype), "shape": list(value.shape), "values": value.tolist()}
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    return repr(value)


def write_json(path: Path, obj) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(plain(obj), indent=1, sort_keys=True, ensure_ascii=False) + "\n", encoding="utf-8")


def write_text(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


def _first_json_difference(a, b, where="$"):
    if type(a) is not type(b) and not (isinstance(a, (int, float)) and isinstance(b, (int, float))
                                       and not isinstance(a, bool) and not isinstance(b, bool)):
        return f"{where}: {_short(a)} != {_short(b)}"
    if isinstance(a, dict):
        for key in sorted(set(a) | set(b)):
            if key not in a or key not in b:
                return f"{where}.{key}: only in {'new' if key not in a else 'old'}"
            found = _first_json_difference(a[key], b[key], f"{where}.{key}")
            if found:
                return found
        return None
    if isinstance(a, list):
        for i, (x, y) in enumerate(zip(a, b)):
            found = _first_json_difference(x, y, f"{where}[{i}]")
            if found:
                return found
        return f"{where}: length {len(a)} != {len(b)}" if len(a) != len(b) else None
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return None
    return None if a == b else f"{where}: {_short(a)} != {_short(b)}"


def _short(value, n=120):
    text = json.dumps(value, ensure_ascii=False) if not isinstance(value, str) else repr(value)
    return text if len(text) <= n else text[:n] + "..."


def _rename(text: str, renames: dict[str, str]) -> str:
    for old in sorted(renames, key=len, reverse=True):
        text = re.sub(rf"(?<![\w.]){re.escape(old)}(?![\w])", renames[old], text)
    return text


def compare(old_dir: Path, new_dir: Path, renames: dict[str, str] | None = None) -> int:
    renames = renames or {}
    old = {_rename(str(p.relative_to(old_dir)), renames): p for p in old_dir.rglob("*") if p.is_file()}
    new = {str(p.relative_to(new_dir)): p for p in new_dir.rglob("*") if p.is_file()}
    different = 0
    for name in sorted(set(old) | set(new)):
        if name not in new or name not in old:
            print(f"DIFFERENT  {name}: only in {'old' if name not in new else 'new'}")
            different += 1
            continue
        a = _rename(old[name].read_text(encoding="utf-8"), renames)
        b = new[name].read_text(encoding="utf-8")
        if a == b:
            print(f"identical  {name}")
            continue
        where = None
        if name.endswith(".json"):
            try:
                where = _first_json_difference(json.loads(a), json.loads(b))
            except ValueError:
                where = None
        if where is None:
            lines_a, lines_b = a.splitlines(), b.splitlines()
            i = next((i for i, (x, y) in enumerate(zip(lines_a, lines_b)) if x != y), min(len(lines_a), len(lines_b)))
            where = (f"line {i + 1}: {_short(lines_a[i] if i < len(lines_a) else '<end>')} != "
                     f"{_short(lines_b[i] if i < len(lines_b) else '<end>')}")
        print(f"DIFFERENT  {name}: {where}")
        different += 1
    total = len(set(old) | set(new))
    print(f"{total - different} of {total} artefacts identical, {different} different")
    return 1 if different else 0


# ---- trainer --------------------------------------------------------------------------------------------------------

GRAD_PARAMS = ["model.norm.weight", "model.layers.1.self_attn.v_proj.weight"]  # full gradients recorded
TRAIN_STEPS = 1
OPENERS = ["<think> one fact", "<think> two facts"]  # as in tests/test_opener_anchor.py, test_explore_openers.py
# Logged values that measure time, not behaviour.
TIMING_KEY = re.compile(r"(^timing/|runtime|per_second|_time$|step_time)")


def seed_all(seed: int = 0) -> None:
    import numpy as np
    import torch

    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def varied_reward(prompts, completions, **kwargs):  # tests/test_trainer_masks.py
    return [float(len(c) % 5) for c in completions]


def reward_by_question(prompts, completions, question, **kwargs):  # tests/test_dynamic_sampling.py
    return [0.0 if q.startswith("Constant") else random.random() for q in question]


def reward_by_type(prompts, completions, qtype, **kwargs):  # tests/test_prompt_selection.py
    return [0.0 if t == "flat" else random.random() for t in qtype]


def random_reward(prompts, completions, **kwargs):  # tests/test_explore_openers.py
    return [random.random() for _ in completions]


def flat_on_entity0(prompts, completions, **kwargs):  # tests/test_explore_openers.py
    return [0.0 if "Entity0" in str(p) else random.random() for p in prompts]


ONE_QUESTION = [{"id": "q0", "question": "When was Entity1 founded?", "golden_answers": ["1901"], "metadata": {}}]
CONSTANT_AND_VARIED = [
    {"id": "c", "question": "Constant question?", "golden_answers": ["x"], "metadata": {"type": "single_hop"}},
    {"id": "v", "question": "Varied question?", "golden_answers": ["y"], "metadata": {"type": "inference"}}]
FLAT_AND_VARIED = [{"id": f"{t}{i}", "question": f"Question {t} {i}?", "golden_answers": ["x"],
                    "metadata": {"type": t}} for t in ("flat", "varied") for i in range(6)]
THREE_TYPES = [{"id": f"{t}{i}", "question": f"When was Entity{i} founded?", "golden_answers": [str(1900 + i)],
                "metadata": {"type": t}} for t in ("bridge", "inference", "single_hop") for i in range(3)]
ENTITIES = [{"id": f"q{i}", "question": f"When was Entity{i} founded?", "golden_answers": ["1901"],
             "metadata": {"type": "single_hop" if i else "bridge"}} for i in range(3)]

# One trainer per lever combination. kind: "scripted" replays SEARCH_SCRIPTS (4 rollouts of one question, reward
# varied_reward); "mini" samples from the tiny model; "memorization" replays R1-Searcher++-style scripts (as
# tests/test_memorization.py). settings: SearchGRPOConfig fields; rollout: RolloutConfig fields; inputs: the rows
# of the scored batch (indices into rows); steps: trainer.train() steps.
SCRIPTED = {"per_device_train_batch_size": 4, "num_generations": 4, "max_completion_length": 96, "beta": 0.0}
CASES = {
    "grpo": {"kind": "scripted", "settings": {}},
    "grpo_kl": {"kind": "scripted", "settings": {"beta": 0.1}, "steps": 2},  # step 2: the policy has left the ref
    "grpo_unmasked": {"kind": "scripted", "settings": {"mask_retrieved": False}},
    "grpo_positive": {"kind": "scripted", "settings": {"advantage_estimator": "grpo_positive"}},
    "rloo": {"kind": "scripted", "settings": {"advantage_estimator": "rloo"}},
    "reinforce_pp": {"kind": "scripted", "settings": {"advantage_estimator": "reinforce_pp", "reward_kl_coef": 0.1}},
    "ppo": {"kind": "scripted", "settings": {"advantage_estimator": "ppo", "reward_kl_coef": 0.05, "value_lr": 1e-3,
                                              "critic_mini_batch_size": 2}},
    "shared_prefix": {"kind": "scripted", "settings": {"shared_prefix": True}},
    "length_groups": {"kind": "scripted", "settings": {"length_grouped_micro_batches": True,
                                                        "per_device_train_batch_size": 2,
                                                        "gradient_accumulation_steps": 2,
                                                        "steps_per_generation": 2}},
    "train_top_layers": {"kind": "scripted", "settings": {"train_top_layers": 1, "learning_rate": 1e-2}},
    "dynamic_sampling_off": {"kind": "mini", "rows": CONSTANT_AND_VARIED, "reward": reward_by_question,
                             "inputs": [0, 0, 1, 1],
                             "settings": {"num_generations": 2, "max_completion_length": 8,
                                          "per_device_train_batch_size": 4}},
    "drop_zero_variance": {"kind": "mini", "rows": CONSTANT_AND_VARIED, "reward": reward_by_question,
                           "inputs": [0, 0, 1, 1],
                           "settings": {"num_generations": 2, "max_completion_length": 8,
                                        "per_device_train_batch_size": 4, "drop_zero_variance": True}},
    "dynamic_sampling": {"kind": "mini", "rows": CONSTANT_AND_VARIED, "reward": reward_by_question,
                         "inputs": [0, 0, 1, 1],
                         "settings": {"num_generations": 2, "max_completion_length": 8,
                                      "per_device_train_batch_size": 4, "dynamic_sampling": True,
                                      "dynamic_sampling_max_draws": 2}},
    "dynamic_sampling_shortfall": {"kind": "mini", "rows": CONSTANT_AND_VARIED, "reward": reward_by_question,
                                   "inputs": [0, 0, 1, 1],
                                   "settings": {"num_generations": 2, "max_completion_length": 8,
                                                "per_device_train_batch_size": 4, "dynamic_sampling": True,
                                                "dynamic_sampling_draw": "shortfall",
                                                "dynamic_sampling_max_draws": 3}},
    "prompt_selection_informative": {"kind": "mini", "rows": FLAT_AND_VARIED, "reward": reward_by_type,
                                     "inputs": [0, 0, 6, 6], "steps": 3,
                                     "settings": {"num_generations": 2, "max_completion_length": 8,
                                                  "per_device_train_batch_size": 4,
                                                  "prompt_selection": "informative", "seed": 3}},
    "prompt_selection_stratified": {"kind": "mini", "rows": THREE_TYPES, "reward": varied_reward,
                                    "inputs": [0, 0, 3, 3, 6, 6], "steps": 3,
                                    "settings": {"num_generations": 2, "max_completion_length": 8,
                                                 "per_device_train_batch_size": 6,
                                                 "prompt_selection": "stratified",
                                                 "stratified_type_weights": {"single_hop": 1}, "seed": 3}},
    "explore_openers": {"kind": "mini", "rows": ONE_QUESTION, "reward": random_reward, "inputs": [0] * 4,
                        "settings": {"num_generations": 4, "per_device_train_batch_size": 4, "bf16": False},
                        "rollout": {"max_completion_tokens": 24, "explore_openers": ["", OPENERS[0]]}},
    "opener_anchor": {"kind": "mini", "rows": ENTITIES[:2], "reward": "em", "inputs": [0] * 4 + [1] * 4,
                      "settings": {"num_generations": 4, "per_device_train_batch_size": 8, "bf16": False},
                      "rollout": {"max_completion_tokens": 24, "explore_openers": OPENERS, "opener_anchor": 2.0}},
    "centred_opener_advantage": {"kind": "mini", "rows": ENTITIES, "reward": flat_on_entity0,
                                 "inputs": [0] * 4 + [1] * 4,
                                 "settings": {"num_generations": 4, "per_device_train_batch_size": 8, "bf16": False,
                                              "dynamic_sampling": True, "dynamic_sampling_max_draws": 8},
                                 "rollout": {"max_completion_tokens": 24, "explore_openers": OPENERS,
                                             "center_opener_advantage": True}},
    "memorization_extractive": {"kind": "memorization",
                                "memorization": {"memorization_coef": 0.1, "rewrite_model": "extractive"}},
}


def _memorization_parts():
    """R1-Searcher++'s protocol with a one-line prompt and four scripted rollouts, two of them correct and searched
    (the candidates for a rewrite), as in tests/test_memorization.py."""
    from searchrl.protocols.r1_searcher_pp import R1SearcherPPProtocol

    class ShortPromptPP(R1SearcherPPProtocol):
        system_prompt = "Search or recall, then answer in \\boxed{}. Question: {question}"

    search = "I will look this up. <|begin_external_search|>{q}<|end_external_search|>"
    scripts = [
        [search.format(q="Entity1"), "Entity1 was founded in 1901, so the answer is \\boxed{1901}."],
        ["<|begin_internal_answer|>Entity1 was founded in 1901.<|end_internal_answer|> \\boxed{1901}"],
        [search.format(q="Entity2"), "So \\boxed{1902}."],
        [search.format(q="Entity1 founded"), "\\boxed{1901}"],
    ]
    return ShortPromptPP(), scripts, 192


class ReplayEngine:
    """Every batch replays the scripts from the start through the real rollout engine (ScriptedGenerator plays
    them once), so that trainer.train() can generate as often as it needs."""

    def __init__(self, protocol, tokenizer, scripts, max_tokens):
        self.protocol, self.tokenizer, self.scripts, self.max_tokens = protocol, tokenizer, scripts, max_tokens

    def run(self, prompt_ids):
        from fakes import FakeRetriever, ScriptedGenerator
        from searchrl.rollout import RolloutConfig, SearchRollout

        generator = ScriptedGenerator(self.tokenizer, self.scripts)
        return SearchRollout(self.protocol, FakeRetriever(), self.tokenizer, generator,
                             RolloutConfig(max_completion_tokens=self.max_tokens)).run(prompt_ids)


def build_trainer(case: dict, out: Path, policy_path: Path, tokenizer, max_steps: int):
    """The case's trainer (output folder `out`, rollout log in out/rollouts) and the rows of its scored batch."""
    from fakes import SEARCH_SCRIPTS, FakeRetriever, MiniProtocol
    from searchrl.config.memorization import MemorizationConfig
    from searchrl.rollout import RolloutConfig
    from searchrl.trainer import SearchGRPOConfig, SearchGRPOTrainer, prompt_dataset

    common = {"output_dir": str(out), "use_cpu": True, "bf16": False, "report_to": "none", "max_steps": max_steps,
              "save_strategy": "no", "logging_steps": 1, "seed": 0, "disable_tqdm": True, "learning_rate": 1e-3,
              "rollout_log_dir": str(out / "rollouts")}
    kind = case["kind"]
    if kind == "scripted":
        protocol, scripts, max_tokens = MiniProtocol(), SEARCH_SCRIPTS, 96
        rows, reward, inputs = ONE_QUESTION, varied_reward, [0] * 4
        settings = {**common, **SCRIPTED, **case["settings"]}
    elif kind == "memorization":
        protocol, scripts, max_tokens = _memorization_parts()
        rows, reward, inputs = ONE_QUESTION, varied_reward, [0] * 4
        settings = {**common, "per_device_train_batch_size": 4, "num_generations": 4, "beta": 0.0,
                    "rollout": RolloutConfig(max_completion_tokens=max_tokens),
                    "memorization": MemorizationConfig(**case["memorization"])}
    else:
        protocol, scripts, max_tokens = MiniProtocol(), None, None
        rows, reward, inputs = case["rows"], case["reward"], case["inputs"]
        settings = {**common, **case["settings"]}
        if "rollout" in case:
            settings["rollout"] = RolloutConfig(**case["rollout"])
    args = SearchGRPOConfig(**settings)
    data = prompt_dataset(rows, protocol, tokenizer)
    trainer = SearchGRPOTrainer(model=str(policy_path), reward_funcs=[reward], args=args, train_dataset=data,
                                retriever=FakeRetriever(), protocol=protocol, processing_class=tokenizer)
    if scripts is not None:
        trainer._engine = ReplayEngine(protocol, tokenizer, scripts, max_tokens)
    trainer.model.train()
    return trainer, [dict(data[i]) for i in inputs]


def weights_fingerprint(model, grads: bool) -> dict:
    """Full values of GRAD_PARAMS and, per parameter, the sum and the sum of squares (float64) of its gradient
    (`grads`) or of its weights."""
    import torch

    named = dict(model.named_parameters())
    pick = (lambda p: p.grad) if grads else (lambda p: p.detach())
    full = {name: pick(named[name]) for name in GRAD_PARAMS if name in named}
    sums = {}
    for name, p in named.items():
        t = pick(p)
        sums[name] = None if t is None else [t.double().sum().item(), t.double().pow(2).sum().item()]
    return {"full": full, "sums": sums, "requires_grad": {n: p.requires_grad for n, p in named.items()},
            "dtype": str(next(iter(named.values())).dtype), "any_nan": any(
                pick(p) is not None and bool(torch.isnan(pick(p)).any()) for p in named.values())}


def side_files(folder: Path) -> dict:
    """Every text file the trainer wrote under `folder` (the rollout log and the like); other files by size."""
    files = {}
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        rel = str(path.relative_to(folder))
        if path.suffix in {".json", ".jsonl", ".txt", ".csv", ".md", ".yaml"}:
            files[rel] = _normalise_text(path.read_text(encoding="utf-8"), {str(folder): "<OUT>"})
        else:
            files[rel] = f"<binary, {path.stat().st_size} bytes>"
    return files


def _metrics(trainer) -> dict:
    return {k: list(v) for k, v in sorted(trainer._metrics["train"].items()) if not TIMING_KEY.search(k)}


def record_trainer_case(name: str, case: dict, policy_path: Path, tokenizer, scratch: Path) -> dict:
    import torch

    out: dict = {"case": {k: (v.__name__ if callable(v) else v) for k, v in case.items()}}
    # scored: one batch, its loss and gradients
    seed_all(0)
    trainer, inputs = build_trainer(case, scratch / name / "scored", policy_path, tokenizer, max_steps=1)
    trainer.current_gradient_accumulation_steps = 1  # set by Trainer.train(); the loss is called directly here
    seed_all(0)
    batch = trainer._generate_and_score_completions(inputs)
    scored = {"batch": {k: v for k, v in batch.items()}}
    seed_all(0)
    loss = trainer.compute_loss(trainer.model, batch)
    loss.backward()
    scored["loss"] = loss.detach().double().item()
    scored["grad"] = weights_fingerprint(trainer.model, grads=True)
    scored["metrics"] = _metrics(trainer)
    scored["files"] = side_files(scratch / name / "scored")
    out["scored"] = scored
    del trainer
    # train: a fresh trainer through trainer.train()
    steps = case.get("steps", TRAIN_STEPS)
    seed_all(0)
    trainer, _ = build_trainer(case, scratch / name / "train", policy_path, tokenizer, max_steps=steps)
    seed_all(0)
    result = trainer.train()
    history = [{k: v for k, v in entry.items() if not TIMING_KEY.search(k)} for entry in trainer.state.log_history]
    out["train"] = {"log_history": history, "training_loss": result.training_loss,
                    "global_step": trainer.state.global_step,
                    "weights": weights_fingerprint(trainer.model, grads=False),
                    "files": side_files(scratch / name / "train")}
    if getattr(trainer, "critic", None) is not None:
        out["train"]["critic"] = weights_fingerprint(trainer.critic.model, grads=False)["sums"]
    del trainer
    torch.set_num_threads(1)
    return out


def record_trainer(out_dir: Path, scratch: Path, only_cases: list[str] | None = None) -> list[str]:
    import torch

    sys.path.insert(0, str(TESTS))  # tests/fakes.py
    torch.set_num_threads(1)
    from searchrl.models import save_policy, tiny_test_policy

    seed_all(0)
    model, tokenizer = tiny_test_policy(seed=0)
    policy_path = save_policy(model, tokenizer, scratch / "tiny-policy")
    written = []
    for name, case in CASES.items():
        if only_cases and name not in only_cases:
            continue
        started = time.perf_counter()
        try:
            result = record_trainer_case(name, case, policy_path, tokenizer, scratch / "cases")
        except Exception as err:  # noqa: BLE001  (a case that cannot run is recorded as its error, which compare then shows)
            import traceback

            result = {"error": f"{type(err).__name__}: {err}",
                      "traceback_last": traceback.format_exc().strip().splitlines()[-1]}
        write_json(out_dir / f"{name}.json", result)
        written.append(name)
        print(f"  trainer {name}: {time.perf_counter() - started:.1f}s{' ERROR ' + result['error'] if 'error' in result else ''}",
              flush=True)
    return written


# ---- notebooks ------------------------------------------------------------------------------------------------------

KEPT_SUFFIXES = {".json", ".jsonl", ".csv", ".md", ".yaml", ".txt", ".html"}
SKIPPED_DIRS = {"checkpoints", "logs", ".ipynb_checkpoints"}
SKIPPED_FILES = {"provenance.json", "status.json", ".status.lock", ".owner.lock"}
# Keys whose values are clocks, durations, throughputs, memory readings or process facts: replaced by "<volatile>"
# (JSON keys and metrics columns; every other value is recorded as written).
VOLATILE_KEYS = re.compile(
    r"^(started|updated|finished|ended|created|heartbeat|timestamp|hostname|pid|owner|seconds|wall_s|elapsed|"
    r"elapsed_s|duration|duration_s|step_time|train_runtime|.*_per_second|timing/.*|memory/.*|peak_rss.*)$")
RUN_ID = re.compile(r"\b\d{8}-\d{6}-[0-9a-f]{4}\b")
ISO_TIME = re.compile(r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(\.\d+)?([+-]\d{2}:?\d{2}|Z)?")


def _normalise_text(text: str, paths: dict[str, str]) -> str:
    """Absolute paths to placeholders (longest first), run ids and ISO timestamps to <RUNID>, <TIME>."""
    for path in sorted(paths, key=len, reverse=True):
        text = text.replace(path, paths[path])
    text = RUN_ID.sub("<RUNID>", text)
    return ISO_TIME.sub("<TIME>", text)


def _normalise_json(value):
    if isinstance(value, dict):
        return {k: ("<volatile>" if VOLATILE_KEYS.match(str(k)) else _normalise_json(v)) for k, v in value.items()}
    if isinstance(value, list):
        return [_normalise_json(v) for v in value]
    return value


def _normalise_file(path: Path, paths: dict[str, str]) -> str:
    text = _normalise_text(path.read_text(encoding="utf-8", errors="replace"), paths)
    if path.suffix == ".json":
        try:
            return json.dumps(_normalise_json(json.loads(text)), indent=1, sort_keys=True, ensure_ascii=False) + "\n"
        except ValueError:
            return text
    if path.suffix == ".jsonl":
        lines = []
        for line in text.splitlines():
            try:
                lines.append(json.dumps(_normalise_json(json.loads(line)), sort_keys=True, ensure_ascii=False))
            except ValueError:
                lines.append(line)
        return "\n".join(lines) + "\n"
    return text


def _parquet_rows(path: Path, paths: dict[str, str]) -> str:
    import pandas as pd

    frame = pd.read_parquet(path)
    frame = frame[[c for c in frame.columns if not VOLATILE_KEYS.match(str(c))]]
    rows = json.loads(frame.to_json(orient="records", double_precision=15))
    return _normalise_text(json.dumps({"columns": list(frame.columns), "rows": rows}, indent=1, sort_keys=True,
                                      ensure_ascii=False), paths) + "\n"


def run_one_notebook(notebook: Path, root: Path, log_dir: Path) -> tuple[int, float]:
    started = time.perf_counter()
    command = [sys.executable, "-m", "searchrl.experiments.runner", str(notebook.relative_to(ROOT)),
               "-f", str((ROOT / "params" / notebook.stem / "smoke.yaml").relative_to(ROOT)),
               "-p", "torch_threads", "1", "--output-root", str(root), "--quiet"]
    with open(log_dir / f"{notebook.stem}.log", "w") as log:
        rc = subprocess.run(command, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, env=os.environ.copy(), check=False).returncode
    return rc, time.perf_counter() - started


def record_notebooks(out_dir: Path, scratch: Path, workers: int = 2, only: list[str] | None = None) -> list[str]:
    root = scratch / "nb-outputs"
    logs = scratch / "nb-logs"
    root.mkdir(parents=True, exist_ok=True)
    logs.mkdir(parents=True, exist_ok=True)
    # Caches that the tests also keep per session: nothing carries over from another record.
    os.environ["SEARCHRL_INDEX_CACHE"] = str(scratch / "index-cache")
    os.environ["SEARCHRL_DIFFICULTY_CACHE"] = str(scratch / "difficulty-cache" / "cache.jsonl")
    notebooks = sorted((ROOT / "notebooks").glob("*.ipynb"))
    if only:
        notebooks = [nb for nb in notebooks if nb.stem in only]
    first = [nb for nb in notebooks if nb.stem not in LAST_NOTEBOOKS]
    last = [nb for nb in notebooks if nb.stem in LAST_NOTEBOOKS]
    results = {}
    with concurrent.futures.ThreadPoolExecutor(max_workers=workers) as pool:
        futures = {pool.submit(run_one_notebook, nb, root, logs): nb for nb in first}
        for future in concurrent.futures.as_completed(futures):
            results[futures[future].stem] = future.result()
            print(f"  notebook {futures[future].stem}: rc {results[futures[future].stem][0]}, "
                  f"{results[futures[future].stem][1]:.0f}s", flush=True)
    for nb in last:
        results[nb.stem] = run_one_notebook(nb, root, logs)
        print(f"  notebook {nb.stem}: rc {results[nb.stem][0]}, {results[nb.stem][1]:.0f}s", flush=True)
    for nb in notebooks:
        runs = sorted(p for p in (root / nb.stem).glob("*") if p.is_dir()) if (root / nb.stem).is_dir() else []
        record = {"runner_exit_status": results[nb.stem][0], "run_folders": len(runs), "files": {}}
        for i, run in enumerate(runs):
            paths = {str(run): "<RUN>", str(root): "<ROOT>", str(ROOT): "<REPO>", str(scratch): "<SCRATCH>",
                     tempfile.gettempdir() + "/": "<TMP>/", str(Path.home()): "<HOME>"}
            target = out_dir / nb.stem if i == 0 else out_dir / f"{nb.stem}.{i}"
            for path in sorted(p for p in run.rglob("*") if p.is_file()):
                rel = path.relative_to(run)
                skipped = (set(rel.parts[:-1]) & SKIPPED_DIRS or rel.name in SKIPPED_FILES
                           or rel.name.endswith(".lock") or rel.suffix == ".ipynb")
                record["files"][str(rel)] = "skipped" if skipped else "recorded"
                if skipped:
                    continue
                if rel.suffix == ".parquet":
                    write_text(target / (str(rel) + ".json"), _parquet_rows(path, paths))
                elif rel.suffix in KEPT_SUFFIXES:
                    write_text(target / rel, _normalise_file(path, paths))
                else:
                    record["files"][str(rel)] = "binary, not recorded"
        if not runs:
            record["log_tail"] = _normalise_text((logs / f"{nb.stem}.log").read_text()[-3000:], {str(ROOT): "<REPO>"})
        write_json(out_dir / f"{nb.stem}._run.json",
                   {**record, "files": {_normalise_text(k, {}): v for k, v in sorted(record["files"].items())}})
    return [nb.stem for nb in notebooks]


# ---- config ---------------------------------------------------------------------------------------------------------


def record_config(out_dir: Path) -> list[str]:
    # The table as the commands that print it show it (`python -m searchrl.config`, `searchrl params`): with every
    # registry imported, so each entry's description is listed.
    import searchrl.protocols
    import searchrl.retrieval
    import searchrl.rewards
    import searchrl.trainer.advantages  # noqa: F401
    from searchrl.config import RunConfig, load_params_file
    from searchrl.experiments.runner import plan_run

    write_text(out_dir / "describe.txt", RunConfig.describe() + "\n")
    written = ["describe"]
    for path in sorted((ROOT / "params").glob("*/*.yaml")):
        rel = path.relative_to(ROOT)
        entry: dict = {"file": str(rel)}
        try:
            entry["values"] = load_params_file(path)[0]
        except Exception as err:  # noqa: BLE001  (any failure is recorded as the artefact, for compare to show)
            entry["values_error"] = f"{type(err).__name__}: {err}"
        try:
            entry["from_params"] = RunConfig.from_params(None, path).to_dict()
        except Exception as err:  # noqa: BLE001  (any failure is recorded as the artefact, for compare to show)
            entry["from_params_error"] = _normalise_text(f"{type(err).__name__}: {err}", {str(ROOT): "<REPO>"})
        notebook = ROOT / "notebooks" / f"{path.parent.name}.ipynb"
        if notebook.exists():
            try:
                plan = plan_run(notebook, [path])
                entry["planned"] = {"config": plan.config.to_dict(), "injected": plan.injected,
                                    "output_root": _normalise_text(str(plan.output_root), {str(ROOT): "<REPO>"})}
            except Exception as err:  # noqa: BLE001  (any failure is recorded as the artefact, for compare to show)
                entry["planned_error"] = _normalise_text(f"{type(err).__name__}: {err}", {str(ROOT): "<REPO>"})
        write_json(out_dir / "params" / f"{path.parent.name}__{path.stem}.json", entry)
        written.append(str(rel))
    return written


# ---- help -----------------------------------------------------------------------------------------------------------


def record_help(out_dir: Path) -> list[str]:
    env = {**os.environ, "COLUMNS": "120"}
    for module in ENTRY_POINTS:
        done = subprocess.run([sys.executable, "-m", module, "--help"], cwd=ROOT, capture_output=True, text=True, check=False,
                              env=env, timeout=300)
        text = (f"exit status: {done.returncode}\n--- stdout ---\n{done.stdout}--- stderr ---\n"
                f"{_normalise_text(done.stderr, {str(ROOT): '<REPO>'})}")
        write_text(out_dir / f"{module}.txt", text)
    return list(ENTRY_POINTS)


# ---- command line ---------------------------------------------------------------------------------------------------


def record(out_dir: Path, parts: list[str], fresh_model_cache: bool, cases: list[str] | None,
           notebooks: list[str] | None) -> None:
    out_dir.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix="searchrl-golden-"))
    if fresh_model_cache:  # converted bundled models and the tiny policies built afresh, not read from a cache
        os.environ["SEARCHRL_CACHE"] = str(scratch / "model-cache")
    timings = {}
    try:
        for part in parts:
            started = time.perf_counter()
            target = out_dir / part
            if target.exists():
                shutil.rmtree(target)
            print(f"recording {part} ...", flush=True)
            if part == "trainer":
                written = record_trainer(target, scratch / "trainer", cases)
            elif part == "notebooks":
                written = record_notebooks(target, scratch / "notebooks", only=notebooks)
            elif part == "config":
                written = record_config(target)
            else:
                written = record_help(target)
            timings[part] = time.perf_counter() - started
            files = sum(1 for p in target.rglob("*") if p.is_file())
            print(f"recorded {part}: {len(written)} items, {files} files, {timings[part]:.0f}s", flush=True)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def tests_ast(old_commit: str) -> int:
    """Each test file of `old_commit` against the working tree's, import statements removed; prints the files whose
    bodies differ with their differing lines, and returns 1 when any differs or is gone."""
    import difflib

    class _DropImports(ast.NodeTransformer):
        def visit_Import(self, node):
            return None

        def visit_ImportFrom(self, node):
            return None

    def body(source: str) -> str:
        return ast.unparse(_DropImports().visit(ast.parse(source)))

    listed = subprocess.run(["git", "ls-tree", "-r", "--name-only", old_commit, "tests/"], cwd=ROOT,
                            capture_output=True, text=True, check=True).stdout.split()
    same = differ = gone = 0
    for name in (n for n in listed if n.endswith(".py")):
        old = subprocess.run(["git", "show", f"{old_commit}:{name}"], cwd=ROOT, capture_output=True, text=True,
                             check=True).stdout
        if not (ROOT / name).is_file():
            print(f"gone       {name}")
            gone += 1
            continue
        a, b = body(old), body((ROOT / name).read_text(encoding="utf-8"))
        if a == b:
            same += 1
            continue
        differ += 1
        print(f"DIFFERENT  {name}")
        for line in difflib.unified_diff(a.splitlines(), b.splitlines(), lineterm="", n=0):
            if line[:1] in "+-" and not line.startswith(("+++", "---")):
                print(f"    {line[:150]}")
    print(f"{same} of {same + differ + gone} test files identical without imports, {differ} different, {gone} gone")
    return 1 if differ or gone else 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    rec = sub.add_parser("record", help="record goldens of this code into OUT_DIR")
    rec.add_argument("out_dir", type=Path)
    rec.add_argument("--only", choices=PARTS, action="append", help="record only this part (repeatable)")
    rec.add_argument("--case", action="append", help="trainer part: only this case (repeatable)")
    rec.add_argument("--notebook", action="append", help="notebooks part: only this notebook (repeatable)")
    rec.add_argument("--fresh-model-cache", action="store_true",
                     help="build the tiny models and convert bundled ones into a scratch cache, not ~/.cache")
    cmp_ = sub.add_parser("compare", help="compare two records; exit 1 if any artefact differs")
    cmp_.add_argument("old_dir", type=Path)
    cmp_.add_argument("new_dir", type=Path)
    cmp_.add_argument("--renames", type=Path, help='JSON {"old.module": "new.module"} applied to the old side')
    ast_ = sub.add_parser("tests-ast", help="compare the test files of OLD_COMMIT with today's, imports removed")
    ast_.add_argument("old_commit")
    args = parser.parse_args(argv)
    if args.command == "tests-ast":
        return tests_ast(args.old_commit)
    if args.command == "record":
        record(args.out_dir.resolve(), args.only or list(PARTS), args.fresh_model_cache, args.case, args.notebook)
        return 0
    renames = json.loads(args.renames.read_text()) if args.renames else None
    return compare(args.old_dir, args.new_dir, renames)


if __name__ == "__main__":
    sys.exit(main())
