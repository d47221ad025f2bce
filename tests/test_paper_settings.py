"""The papers' settings that evaluation, the update schedule and the ppo critic take: each is refused with a
message naming it when wrong, and each reaches what it controls (evaluation's decoding, TRL's config, the critic's
optimizer)."""

from __future__ import annotations

import math
from types import SimpleNamespace

import pandas as pd
import pytest
import torch

from fakes import SEARCH_SCRIPTS, Replaying, scripted_trainer
from searchrl.config import ConfigError, RunConfig, eval_decoding
from searchrl.trainer.arguments import grpo_args
from searchrl.trainer.levers.ppo_critic import lr_factor


@pytest.mark.parametrize(("values", "names"), [
    ({"eval_top_k": -1}, "eval_top_k"),
    ({"eval_temperature": -0.1}, "eval_temperature"),
    ({"steps_per_generation": 0}, "steps_per_generation"),
    ({"value_lr_scheduler_type": "constant_warmup"}, "value_lr_scheduler_type"),
    ({"value_warmup_ratio": 1.0}, "value_warmup_ratio"),
    ({"num_generations": 1}, "num_generations"),  # grpo needs a group
    ({"num_generations": 1, "advantage_estimator": "ppo", "drop_zero_variance": True}, "num_generations"),
    ({"num_generations": 1, "advantage_estimator": "ppo", "prompts_per_step": 1}, "num_generations"),
])
def test_a_bad_value_is_refused_naming_its_setting(values, names):
    with pytest.raises(ConfigError, match=names):
        RunConfig.from_params(values)


def test_a_misspelt_setting_names_the_nearest():
    with pytest.raises(ConfigError, match="did you mean 'eval_temperature'"):
        RunConfig.from_params({"eval_temprature": 0.1})


def test_eval_decoding_defaults_to_greedy_with_the_training_top_k():
    assert eval_decoding(RunConfig(top_k=3)) == {"top_k": 3, "greedy": True, "temperature": 0.0, "top_p": 1.0}
    cfg = RunConfig(top_k=3, eval_top_k=5, eval_temperature=0.1, top_p=0.9)
    assert eval_decoding(cfg) == {"top_k": 5, "greedy": False, "temperature": 0.1, "top_p": 0.9}
    assert eval_decoding(cfg.to_dict()) == eval_decoding(cfg)  # a run's saved params.yaml reads the same
    rollout = cfg.eval_rollout_config()
    assert (rollout.top_k, rollout.temperature, rollout.top_p) == (5, 0.1, 0.9)
    assert cfg.rollout_config().top_k == 3  # training keeps its own


def test_an_experiment_evaluates_with_the_evaluation_decoding(monkeypatch, tmp_path):
    from searchrl.evaluation import evaluate as evaluate_module
    from searchrl.experiments.experiment_eval import ExperimentEvaluation

    seen = {}

    class Result:
        def to_json(self, path):
            pass

        def trajectories_jsonl(self, path):
            pass

    def fake_evaluate(model, tokenizer, protocol, retriever, rows, **kwargs):
        seen.update(kwargs)
        return Result()

    monkeypatch.setattr(evaluate_module, "evaluate", fake_evaluate)
    exp = ExperimentEvaluation()
    exp.cfg = RunConfig(top_k=3, eval_top_k=5, eval_temperature=0.1)
    exp.run_dir, exp.eval_rows, exp.results = tmp_path, [], {}
    exp.tokenizer = exp.protocol = exp.retriever = None
    exp.evaluate(None, "after RL")
    assert seen["rollout"].top_k == 5 and seen["rollout"].temperature == 0.1 and seen["greedy"] is False
    exp.cfg = RunConfig(top_k=3)
    exp.evaluate(None, "after RL")
    assert seen["rollout"].top_k == 3 and seen["greedy"] is True


def test_evaluation_samples_at_the_evaluation_temperature(monkeypatch, tiny_policy, tokenizer):
    """evaluate(greedy=False) builds its generator sampling at the rollout's temperature and top_p."""
    from fakes import FakeRetriever
    from searchrl.evaluation.evaluate import evaluate
    from searchrl.rollout import generators

    built = []
    original = generators.HFTurnGenerator.from_rollout.__func__

    def spy(cls, *args, **kwargs):
        generator = original(cls, *args, **kwargs)
        built.append((generator.sample.greedy, generator.sample.temperature, generator.sample.top_p))
        return generator

    monkeypatch.setattr(generators.HFTurnGenerator, "from_rollout", classmethod(spy))
    rows = [{"id": "q0", "question": "When was Entity1 founded?", "golden_answers": ["1901"], "metadata": {}}]
    for cfg in (RunConfig(eval_temperature=0.1, top_p=0.9, max_completion_tokens=16, max_turn_tokens=16),
                RunConfig(max_completion_tokens=16, max_turn_tokens=16)):
        result = evaluate(tiny_policy[0], tokenizer, "search_r1", FakeRetriever(), rows,
                          rollout=cfg.eval_rollout_config(), greedy=eval_decoding(cfg)["greedy"], progress=False)
        assert result.config["greedy"] is eval_decoding(cfg)["greedy"]
    assert built[0] == (False, 0.1, 0.9) and built[1][0] is True


def test_steps_per_generation_reaches_trl(tmp_path):
    cfg = RunConfig(prompts_per_step=2, num_generations=4, micro_batch_size=4, steps_per_generation=3, device="cpu")
    args = grpo_args(cfg, tmp_path)
    # an update is 2 micro-batches of 4 rollouts; a generation batch serves 3 of them: 24 rollouts, 6 questions
    assert (args.per_device_train_batch_size, args.gradient_accumulation_steps) == (4, 2)
    assert (args.steps_per_generation, args.generation_batch_size) == (6, 24)
    one = grpo_args(RunConfig(prompts_per_step=2, num_generations=4, micro_batch_size=4, device="cpu"), tmp_path)
    assert one.steps_per_generation == one.gradient_accumulation_steps == 2


def varied_reward(prompts, completions, **kwargs):
    return [float(len(c) % 7) for c in completions]


def _rows(n):
    return [{"id": f"q{i}", "question": f"When was Entity{i} founded?", "golden_answers": ["1901"], "metadata": {}}
            for i in range(n)]


def test_two_updates_per_batch_of_rollouts(tmp_path, tiny_policy_path, tokenizer):
    cfg = RunConfig(prompts_per_step=1, num_generations=4, rl_steps=4, steps_per_generation=2, learning_rate=1e-3,
                    save_steps=100, device="cpu", max_completion_tokens=96, health_action="off")
    args = grpo_args(cfg, tmp_path / "out", rollout_log_dir=tmp_path / "rollouts")
    args.save_strategy = "no"
    generator = Replaying(tokenizer, SEARCH_SCRIPTS * 2)
    trainer = scripted_trainer(tiny_policy_path, tokenizer, args, _rows(4), [varied_reward], generator)
    sizes = []
    loss = trainer.compute_loss

    def recording(model, inputs, *a, **k):
        sizes.append(inputs["completion_ids"].size(0))
        return loss(model, inputs, *a, **k)

    trainer.compute_loss = recording
    trainer.train()
    # 4 updates of 4 rollouts each from 2 batches of 8 (2 questions x 4): generation at steps 1 and 3 only
    assert generator.batches == 2 and trainer.state.global_step == 4 and sizes == [4, 4, 4, 4]
    assert sorted(p.name for p in (tmp_path / "rollouts").glob("*.jsonl")) == ["step-0001.jsonl", "step-0003.jsonl"]
    assert len(pd.read_json(tmp_path / "rollouts" / "step-0001.jsonl", lines=True)) == 8


def test_lr_factor_follows_transformers_schedules():
    assert [lr_factor("constant", p, 0.5) for p in (0, 0.5, 1)] == [1.0, 1.0, 1.0]
    assert [lr_factor("constant_with_warmup", p, 0.5) for p in (0, 0.25, 0.5, 1)] == [0.0, 0.5, 1.0, 1.0]
    assert [lr_factor("linear", p, 0.0) for p in (0, 0.5, 1)] == [1.0, 0.5, 0.0]
    assert math.isclose(lr_factor("cosine", 0.5, 0.0), 0.5) and math.isclose(lr_factor("cosine", 1, 0.0), 0.0)
    from transformers import get_scheduler  # the same shape as the policy's scheduler

    optimizer = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=1.0)
    scheduler = get_scheduler("constant_with_warmup", optimizer, num_warmup_steps=2, num_training_steps=8)
    ours = []
    for step in range(8):
        ours.append((optimizer.param_groups[0]["lr"], lr_factor("constant_with_warmup", step / 8, 2 / 8)))
        optimizer.step()
        scheduler.step()
    assert all(math.isclose(a, b) for a, b in ours)


def test_ppo_with_one_response_per_prompt_and_a_warming_critic(tmp_path, tiny_policy_path, tokenizer):
    """num_generations 1 under ppo reaches TRL; with 2 updates per batch the critic takes 2 steps on each batch, at
    the learning rate its schedule gives at each step."""
    cfg = RunConfig(prompts_per_step=4, num_generations=1, advantage_estimator="ppo", rl_steps=4,
                    steps_per_generation=2, value_lr=1e-3, value_lr_scheduler_type="constant_with_warmup",
                    value_warmup_ratio=0.5, learning_rate=1e-3, save_steps=100, device="cpu",
                    max_completion_tokens=96, health_action="off")
    args = grpo_args(cfg, tmp_path / "out")
    assert args.num_generations == 1 and args.generation_batch_size == 8
    args.save_strategy = "no"
    generator = Replaying(tokenizer, SEARCH_SCRIPTS * 2)
    trainer = scripted_trainer(tiny_policy_path, tokenizer, args, _rows(8), [varied_reward], generator)
    critic = trainer.lever("ppo_critic")
    assert critic.critic.mini_batch_size == 4  # one update's share of the batch of 8
    rates = []
    fit = critic.critic.fit

    def spy(*a, **k):
        rates.append(critic.critic.optimizer.param_groups[0]["lr"])
        return fit(*a, **k)

    critic.critic.fit = spy
    trainer.train()
    assert generator.batches == 2 and trainer.state.global_step == 4
    # the critic regresses at steps 0 and 2 of 4: warm-up over the first half (0), then value_lr
    assert rates == [0.0, 1e-3]
    steps = [s["step"] for s in critic.critic.optimizer.state_dict()["state"].values()]
    assert steps and float(steps[0]) == 4  # 2 batches x 2 mini-batches
    logged = [e["search/value_lr"] for e in trainer.state.log_history if "search/value_lr" in e]
    assert logged and logged[0] == 0.0
    assert all(math.isfinite(e["loss"]) for e in trainer.state.log_history if "loss" in e)


def test_num_generations_one_under_ppo_passes_the_schema():
    cfg = RunConfig(num_generations=1, advantage_estimator="ppo", prompts_per_step=2)
    assert cfg.num_generations == 1
    assert SimpleNamespace(**cfg.to_dict()).num_generations == 1


def _jsonl(path, rows):
    import json

    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def _qa(prefix, n):
    return [{"id": f"{prefix}{i}", "question": f"Who founded {prefix} {i}?", "golden_answers": [f"founder {i}"],
             "metadata": {"type": "bridge"}} for i in range(n)]


def test_eval_sets_evaluate_benchmark_questions_and_train_on_every_dataset_row(tmp_path):
    from searchrl.experiments.experiment_data import ExperimentData

    data = tmp_path / "data"
    _jsonl(data / "r1-searcher" / "eval_set" / "bamboogle.jsonl", _qa("b", 5))
    _jsonl(data / "r1-searcher" / "eval_set" / "2wiki_500.jsonl", _qa("w", 7))
    dataset = _jsonl(tmp_path / "train.jsonl", _qa("t", 6))
    corpus = _jsonl(tmp_path / "corpus.jsonl", [{"id": "d0", "title": "A", "contents": "A founded B."}])
    cfg = RunConfig(dataset=str(dataset), corpus=str(corpus), eval_sets=["r1s_bamboogle", "r1s_2wiki"], n_eval=3,
                    n_train=100, data_dir=str(data))
    loader = ExperimentData()
    loader.cfg = cfg
    docs, train, evaluation = loader._load_data()
    assert len(train) == 6 and len(docs) == 1  # no held-out cut from the dataset; the run's own corpus
    assert [r["metadata"]["type"] for r in evaluation] == ["r1s_bamboogle", "r1s_2wiki"] * 3  # interleaved
    assert all(r["id"].split("/")[0] == r["metadata"]["type"] for r in evaluation)
    assert {r["metadata"]["benchmark_type"] for r in evaluation} == {"bridge"}
    again = ExperimentData()
    again.cfg = cfg.replace(seed=3)
    assert [r["id"] for r in again._load_data()[2]] == [r["id"] for r in evaluation]  # the same for every seed
    everything = ExperimentData()
    everything.cfg = cfg.replace(n_eval=0)
    assert len(everything._load_data()[2]) == 12


def test_eval_sets_are_checked_and_read_by_experiments_only(tmp_path):
    dataset = _jsonl(tmp_path / "train.jsonl", _qa("t", 2))
    files = {"dataset": str(dataset), "corpus": str(dataset)}
    with pytest.raises(ConfigError, match="eval_sets: unknown benchmark 'r1s_2wik'"):
        RunConfig.from_params({**files, "eval_sets": ["r1s_2wik"]})
    from searchrl.experiments.experiment_data import ExperimentData

    synthetic = ExperimentData()
    synthetic.cfg = RunConfig.from_params({"eval_sets": ["r1s_2wiki"]})  # a profile may state them before its data
    with pytest.raises(ValueError, match="eval_sets .* are searched in the run's corpus"):
        synthetic._load_data()
    with pytest.raises(ConfigError, match="eval_sets names a benchmark twice"):
        RunConfig.from_params({**files, "eval_sets": ["nq", "nq"]})
    assert RunConfig.merge(("p", {**files, "eval_sets": ["nq"]}), notebook="ablate_mask").eval_sets == ["nq"]
    with pytest.raises(ConfigError, match="notebook 'eval_benchmarks' takes no parameter 'eval_sets'"):
        RunConfig.merge(("p", {**files, "eval_sets": ["nq"]}), notebook="eval_benchmarks")


def test_stage1_dataset_gives_the_first_stage_its_own_questions(tmp_path):
    from searchrl.experiments.experiment_rl import ExperimentRL
    from searchrl.trainer.schedules import rl_schedule

    stage1 = _jsonl(tmp_path / "stage_1.jsonl", _qa("s", 3))
    cfg = RunConfig(two_stage=True, rl_steps=4, stage1_steps=2, stage1_dataset=str(stage1))
    exp = ExperimentRL()
    exp.cfg, exp.train_rows = cfg, _qa("t", 5)
    first, second = rl_schedule(cfg)
    assert [r["id"] for r in exp._stage_rows(first)] == ["s0", "s1", "s2"]
    assert exp._stage_rows(second) is exp.train_rows
    exp.cfg = cfg.replace(stage1_dataset="")
    assert exp._stage_rows(first) is exp.train_rows
    assert RunConfig(stage1_dataset=str(tmp_path / "missing.jsonl")).two_stage is False  # unread without two_stage
    with pytest.raises(ConfigError, match="stage1_dataset: no such file"):
        RunConfig(two_stage=True, rl_steps=4, stage1_steps=2, stage1_dataset=str(tmp_path / "missing.jsonl"))


def test_max_prompt_tokens_leaves_out_longer_prompts(tokenizer, capsys):
    from fakes import MiniProtocol
    from searchrl.trainer.data import prompt_dataset, prompt_tokens

    protocol = MiniProtocol()
    rows = _qa("t", 2) + [{"id": "long", "question": "Who? " * 200, "golden_answers": ["x"], "metadata": {}}]
    lengths = [prompt_tokens(protocol.build_prompt(r["question"], tokenizer, chat=True), tokenizer) for r in rows]
    cap = max(lengths[:2])
    assert lengths[2] > cap
    assert prompt_dataset(rows, protocol, tokenizer)["id"] == ["t0", "t1", "long"]
    assert prompt_dataset(rows, protocol, tokenizer, max_prompt_tokens=cap)["id"] == ["t0", "t1"]
    assert "1 of 3 training questions have a longer prompt" in capsys.readouterr().out
    with pytest.raises(ValueError, match="raise it"):
        prompt_dataset(rows, protocol, tokenizer, max_prompt_tokens=1)
    with pytest.raises(ConfigError, match="max_prompt_tokens must be >= 0"):
        RunConfig(max_prompt_tokens=-1)


def _cold_start(cfg, tokenizer, rows):
    from fakes import MiniProtocol
    from searchrl.experiments.experiment_cold_start import ExperimentColdStart

    exp = ExperimentColdStart()
    exp.cfg, exp.train_rows, exp.protocol, exp.tokenizer, exp.retriever = cfg, rows, MiniProtocol(), tokenizer, None
    exp.run_dir = None
    return exp


def test_sft_source_is_checked():
    with pytest.raises(ConfigError, match=r"sft_source must be .* \(did you mean 'templated'\?\)"):
        RunConfig(sft_source="templatd")
    with pytest.raises(ConfigError, match="sft_source 'rejection:' names no teacher"):
        RunConfig(sft_source="rejection:")
    with pytest.raises(ConfigError, match="sft_batch_size must be >= 1"):
        RunConfig(sft_batch_size=0)
    assert RunConfig(sft_source="rejection:qwen2.5-7b-instruct").sft_source == "rejection:qwen2.5-7b-instruct"


def test_answer_only_and_file_sources_make_the_cold_start_items(tmp_path, tokenizer):
    from searchrl.data.tokenize import IGNORE_INDEX, tokenize_sft

    dataset = _jsonl(tmp_path / "train.jsonl", _qa("t", 4))
    files = {"dataset": str(dataset), "corpus": str(dataset)}
    exp = _cold_start(RunConfig(**files, sft_examples=3, sft_source="answer_only", sft_question_types=[]),
                      tokenizer, _qa("t", 4))
    items = exp.cold_start_items()
    assert len(items) == 3 and all(i["segments"] == [(f"<answer> {i['golden_answers'][0]} </answer>", True)]
                                   for i in items)
    trajectories = _jsonl(tmp_path / "traj.jsonl", [
        {"question": "Who founded t 0?", "segments": [["<search>t 0</search>", True],
                                                     ["<information>doc</information>", False],
                                                     ["<answer>x</answer>", True]]},
    ])
    exp.cfg = exp.cfg.replace(sft_source=str(trajectories))
    (item,) = exp.cold_start_items()
    assert item["prompt"] == exp.protocol.build_prompt("Who founded t 0?", tokenizer, chat=True)
    labels = tokenize_sft([item], tokenizer)["labels"][0]
    doc = tokenizer("<information>doc</information>", add_special_tokens=False)["input_ids"]
    assert labels.count(IGNORE_INDEX) >= len(doc)  # the retrieved segment is not trained
    bad = _jsonl(tmp_path / "bad.jsonl", [{"question": "q"}])
    exp.cfg = exp.cfg.replace(sft_source=str(bad))
    with pytest.raises(ValueError, match="bad.jsonl:1"):
        exp.cold_start_items()


def test_rejection_source_samples_the_teacher_and_keeps_text(monkeypatch, tmp_path, tokenizer):
    from searchrl.sft import rejection
    from searchrl.sft.sources import as_text_item

    text = ["<search>", "q", "</search>", "<information>d</information>", "<answer>x</answer>"]
    pieces = [tokenizer(t, add_special_tokens=False)["input_ids"] for t in text]
    mask = [[1] * len(p) for p in pieces[:3]] + [[0] * len(pieces[3]), [1] * len(pieces[4])]
    sampled = {"id": "t0", "question": "Who founded t 0?", "golden_answers": ["x"], "qtype": "bridge",
               "prompt_ids": [1, 2], "completion_ids": [t for piece in pieces for t in piece], "env_mask": [m for row in mask for m in row]}
    item = as_text_item(sampled, tokenizer, "PROMPT")
    assert item["prompt"] == "PROMPT" and "completion_ids" not in item
    assert item["segments"] == [("<search>q</search>", True), ("<information>d</information>", False),
                                ("<answer>x</answer>", True)]
    seen = {}

    def fake(model, teacher_tokenizer, protocol, retriever, rows, **kwargs):
        seen.update(model=model, rows=len(rows), **kwargs)
        return [sampled]

    monkeypatch.setattr(rejection, "rejection_sampled_trajectories", fake)
    dataset = _jsonl(tmp_path / "train.jsonl", _qa("t", 4))
    cfg = RunConfig(dataset=str(dataset), corpus=str(dataset), sft_examples=2, sft_source="rejection:policy",
                    sft_question_types=[])
    exp = _cold_start(cfg, tokenizer, _qa("t", 4))
    exp.run_dir = tmp_path
    (made,) = exp.cold_start_items(model="the policy")
    assert seen["model"] == "the policy" and seen["max_per_question"] == 1 and seen["rows"] == 4
    assert made["segments"] == item["segments"] and made["prompt"].endswith(exp.protocol.build_prompt(
        "Who founded t 0?", tokenizer, chat=True)[-20:])


def test_sft_batch_size_reaches_the_sft_config(tmp_path):
    from searchrl.trainer.arguments import sft_args

    args = sft_args(RunConfig(sft_batch_size=64, micro_batch_size=16, device="cpu"), tmp_path, num_processes=1)
    assert args.per_device_train_batch_size * args.gradient_accumulation_steps == 64
    assert args.per_device_train_batch_size == 16
