"""RunConfig: one schema, typos and wrong types fail with messages that say what to fix."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest
import yaml

from searchrl.config import FIELD_DOCS, ConfigError, RunConfig, load_params_file, parse_scalar

PARAMS_DIR = Path(__file__).resolve().parents[1] / "params"


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def test_defaults_build_a_valid_config() -> None:
    cfg = RunConfig()
    assert cfg.rewards == ["em"] and cfg.sft_question_types == ["single_hop"]
    assert cfg.to_dict() == RunConfig.defaults()
    assert cfg.changed() == {}


def test_every_field_has_a_docstring_and_describe_lists_it() -> None:
    names = [f.name for f in dataclasses.fields(RunConfig)]
    assert RunConfig.field_names() == tuple(names)
    undocumented = [n for n in names if not FIELD_DOCS.get(n, "").strip()]
    assert not undocumented, f"fields without a docstring: {undocumented}"
    table = RunConfig.describe()
    for name in names:
        line = next((ln for ln in table.splitlines() if ln.split() and ln.split()[0] == name), None)
        assert line is not None, f"{name} missing from describe()"
        assert FIELD_DOCS[name] in line
    assert "list[str]" in table and "-- RL --" in table


def test_unknown_key_names_key_source_and_suggestion(tmp_path: Path) -> None:
    path = write(tmp_path / "p.yaml", "lerning_rate: 1.0e-4\n")
    with pytest.raises(ConfigError) as err:
        RunConfig.from_params(None, path)
    message = str(err.value)
    assert "'lerning_rate'" in message and str(path) in message and "did you mean 'learning_rate'" in message
    with pytest.raises(ConfigError, match=r"overrides: unknown parameter 'num_generation' \(did you mean"):
        RunConfig.from_params(num_generation=4)
    with pytest.raises(ConfigError, match=r"params: unknown parameter 'zzz'"):
        RunConfig.from_params({"zzz": 1})


@pytest.mark.parametrize(
    ("key", "value", "expected"),
    [
        ("rl_steps", True, "expects int, got True (bool)"),
        ("rl_steps", "twenty", "expects int, got 'twenty' (str)"),
        ("rl_steps", 2.5, "expects int"),
        ("learning_rate", "fast", "expects float"),
        ("use_peft", 1, "expects bool, got 1 (int)"),
        ("model", 3, "expects str"),
        ("rewards", "em", "write a list"),
        ("rewards", ["em", 3], "item 1 is 3 (int)"),
        ("reward_weights", [1.0, True], "item 1 is True (bool)"),
    ],
)
def test_wrong_types_are_rejected(key: str, value: object, expected: str) -> None:
    with pytest.raises(ConfigError) as err:
        RunConfig.from_params({key: value})
    assert repr(key) in str(err.value) and expected in str(err.value)


def test_accepted_conversions() -> None:
    cfg = RunConfig.from_params({"temperature": 1, "reward_weights": [1, 0.5], "rewards": ("em", "f1"), "n_eval": 1e2})
    assert cfg.temperature == 1.0 and isinstance(cfg.temperature, float)
    assert cfg.reward_weights == [1.0, 0.5] and cfg.rewards == ["em", "f1"]
    assert cfg.n_eval == 100 and isinstance(cfg.n_eval, int)


def test_direct_construction_validates_too() -> None:
    with pytest.raises(ConfigError, match="expects int"):
        RunConfig(rl_steps="three")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="num_generations must be >= 2"):
        RunConfig(num_generations=1)


@pytest.mark.parametrize(
    ("params", "expected"),
    [
        ({"rl_steps": -1}, "rl_steps must be >= 0"),
        ({"num_generations": 1}, "num_generations must be >= 2"),
        ({"temperature": -0.5}, "temperature must be >= 0"),
        ({"learning_rate": 0.0}, "learning_rate must be > 0"),
        ({"rewards": ["em", "f1"], "reward_weights": [1.0]}, "one weight per reward"),
        ({"loss_type": "dapoo"}, "did you mean 'dapo'"),
        ({"scale_rewards": "groups"}, "scale_rewards must be one of"),
        ({"report_to": "tensorbord"}, "did you mean 'tensorboard'"),
        ({"device": "gpu"}, "device must be"),
        ({"two_stage": True, "stage1_steps": 0}, "stage1_steps"),
    ],
)
def test_semantic_checks(params: dict, expected: str) -> None:
    with pytest.raises(ConfigError, match=expected):
        RunConfig.from_params(params)


def test_semantic_error_names_the_source_that_set_the_value(tmp_path: Path) -> None:
    path = write(tmp_path / "p.yaml", "num_generations: 1\n")
    with pytest.raises(ConfigError, match=rf"{re.escape(str(path))}: num_generations must be >= 2"):
        RunConfig.from_params(None, path)


def test_all_problems_are_reported_at_once() -> None:
    with pytest.raises(ConfigError) as err:
        RunConfig.from_params({"seedd": 1, "rl_steps": "x", "use_peft": "maybe"})
    assert all(s in str(err.value) for s in ("'seedd'", "'rl_steps'", "'use_peft'"))


def test_precedence_defaults_yaml_params_overrides(tmp_path: Path) -> None:
    first = write(tmp_path / "a.yaml", "seed: 1\nrl_steps: 5\ntop_k: 4\nn_eval: 7\n")
    second = write(tmp_path / "b.yaml", "seed: 2\nrl_steps: 6\n")
    cfg = RunConfig.from_params({"rl_steps": 7, "model": "m"}, first, second, model="override")
    assert (cfg.top_k, cfg.n_eval) == (4, 7)  # only the first file sets them
    assert cfg.seed == 2  # later file wins over earlier
    assert cfg.rl_steps == 7  # params dict wins over files
    assert cfg.model == "override"  # keyword overrides win over everything
    assert cfg.temperature == RunConfig().temperature  # untouched default


def test_yaml_round_trip(tmp_path: Path) -> None:
    cfg = RunConfig.from_params({"rewards": ["em", "f1"], "reward_weights": [1, 0.5], "learning_rate": 3e-6})
    path = tmp_path / "params.yaml"
    text = cfg.to_yaml(path, header="resolved\nsecond line")
    assert text.startswith("# resolved\n# second line\n")
    assert RunConfig.from_params(None, path) == cfg
    assert list(yaml.safe_load(path.read_text())) == list(RunConfig.field_names())


def test_yaml_exponent_without_dot_is_a_float(tmp_path: Path) -> None:
    # Plain PyYAML reads 1e-5 as a string; parameter files must not trip over it.
    path = write(tmp_path / "p.yaml", "learning_rate: 1e-5\nsft_learning_rate: 2E-4\n")
    cfg = RunConfig.from_params(None, path)
    assert cfg.learning_rate == 1e-5 and cfg.sft_learning_rate == 2e-4
    assert parse_scalar("1e-5") == 1e-5 and parse_scalar("[em, f1]") == ["em", "f1"] and parse_scalar("true") is True


@pytest.mark.parametrize("text", ["- a\n- b\n", "just a string\n", "3\n"])
def test_yaml_that_is_not_a_mapping_names_the_file(tmp_path: Path, text: str) -> None:
    path = write(tmp_path / "bad.yaml", text)
    with pytest.raises(ConfigError, match=rf"{re.escape(str(path))}: a parameter file must be a mapping"):
        RunConfig.from_params(None, path)


def test_yaml_errors_name_the_file(tmp_path: Path) -> None:
    broken = write(tmp_path / "broken.yaml", "seed: [1, 2\n")
    with pytest.raises(ConfigError, match=rf"{re.escape(str(broken))}: not valid YAML"):
        load_params_file(broken)
    with pytest.raises(ConfigError, match="parameter file not found"):
        load_params_file(tmp_path / "missing.yaml")


def test_yaml_string_for_list_field_is_rejected(tmp_path: Path) -> None:
    path = write(tmp_path / "p.yaml", "rewards: em\n")
    with pytest.raises(ConfigError, match=r"'rewards' expects list\[str\], got 'em'"):
        RunConfig.from_params(None, path)


def test_notebook_key_is_reserved_and_returned(tmp_path: Path) -> None:
    path = write(tmp_path / "p.yaml", "notebook: quickstart\nseed: 3\n")
    values, notebook = load_params_file(path)
    assert notebook == "quickstart" and values == {"seed": 3}
    assert RunConfig.from_params(None, path).seed == 3
    with pytest.raises(ConfigError, match="'notebook' must be a notebook name"):
        load_params_file(write(tmp_path / "q.yaml", "notebook: [a]\n"))


def test_empty_yaml_means_no_changes(tmp_path: Path) -> None:
    assert RunConfig.from_params(None, write(tmp_path / "empty.yaml", "# nothing\n")) == RunConfig()


def test_from_globals_picks_fields_and_catches_typos() -> None:
    namespace = {"seed": 4, "rewards": ["f1"], "np": object(), "Path": Path, "CONSTANT": "x", "In": [""], "Out": {},
                 "_": 3}
    cfg = RunConfig.from_globals(namespace)
    assert cfg.seed == 4 and cfg.rewards == ["f1"]
    # Every other plain value is a parameter papermill injected or a typo: each fails, with the nearest name.
    with pytest.raises(ConfigError) as err:
        RunConfig.from_globals({"seed": 1, "lr": 1e-4, "steps": 5, "top_K": 5, "results": [1, 2]})
    for expected in ("'lr' (did you mean 'learning_rate'?)", "'steps' (did you mean 'rl_steps'?)",
                     "'top_K' (did you mean 'top_k'?)", "'results'"):
        assert expected in str(err.value)
    with pytest.raises(ConfigError, match=r"unknown parameter 'lerning_rate' \(did you mean 'learning_rate'\?\)"):
        RunConfig.from_globals({"seed": 1, "lerning_rate": 1e-4})
    with pytest.raises(ConfigError, match="expects int"):
        RunConfig.from_globals({"seed": "one"})


def test_text_values_are_read_as_yaml_as_papermill_passes_them() -> None:
    # `papermill -p rewards "[em]" -p learning_rate 1e-4` hands the kernel strings; PyYAML reads 1e-4 as text too.
    cfg = RunConfig.from_globals({"rewards": "[em, f1]", "learning_rate": "1e-4", "rl_steps": "5", "bf16": "true",
                                  "reward_options": "{f1: {max_words: 3}}"})
    assert cfg.rewards == ["em", "f1"] and cfg.learning_rate == 1e-4 and cfg.rl_steps == 5 and cfg.bf16 is True
    assert cfg.reward_options == {"f1": {"max_words": 3}}
    assert RunConfig.from_params({"run_name": "2024"}).run_name == "2024"  # a text field keeps the text


def test_rollout_settings_are_declared_once_and_travel_as_one_object() -> None:
    from searchrl.rollout import RolloutConfig

    rollout_fields = {f.name for f in dataclasses.fields(RolloutConfig)}
    assert rollout_fields <= set(RunConfig.field_names())
    cfg = RunConfig.from_params({"max_searches": 3, "top_k": 5, "temperature": 0.7, "max_completion_tokens": 300})
    rollout = cfg.rollout_config()
    assert type(rollout) is RolloutConfig
    assert (rollout.max_searches, rollout.top_k, rollout.temperature, rollout.max_completion_tokens) == (3, 5, 0.7, 300)
    with pytest.raises(ConfigError, match="did you mean 'max_completion_tokens'"):
        RunConfig.from_params({"max_completion_length": 3})
    with pytest.raises(ValueError, match="top_p must be in"):
        RolloutConfig(top_p=0)


def test_registry_names_presets_import_paths_and_reward_options_are_checked() -> None:
    cfg = RunConfig.from_params({"rewards": ["preset:r1_searcher_stage2"],
                                 "reward_options": {"f1": {"max_words": 5}}})
    assert cfg.rewards == ["preset:r1_searcher_stage2"]
    assert RunConfig.from_params({"rewards": ["searchrl.rewards.examples:concise_answer"]})
    for params, expected in [
        ({"rewards": ["preset:r1_searcher_stage3"]}, "did you mean 'r1_searcher_stage2'"),
        ({"rewards": ["no_such_module_xyz:fn"]}, "cannot import module 'no_such_module_xyz'"),
        ({"rewards": ["searchrl.rewards.examples:nothing_here"]}, "has no attribute 'nothing_here'"),
        ({"rewards": ["f1"], "reward_options": {"em": {}}}, "not among this run's rewards"),
        ({"rewards": ["f1"], "reward_options": {"f1": {"max_word": 5}}}, "did you mean 'max_words'"),
        ({"protocol": "serch_r1"}, "did you mean 'search_r1'"),
        ({"advantage_estimator": "reinforce++"}, "unknown advantage estimator"),
        ({"rewards": ["f1", "preset:r1_searcher_stage2"]}, "more than once"),
    ]:
        with pytest.raises(ConfigError, match=re.escape(expected)):
            RunConfig.from_params(params)


def test_replace_validates_and_leaves_original() -> None:
    cfg = RunConfig()
    changed = cfg.replace(rl_steps=3)
    assert changed.rl_steps == 3 and cfg.rl_steps == RunConfig().rl_steps
    with pytest.raises(ConfigError, match="did you mean 'rl_steps'"):
        cfg.replace(rl_step=3)
    with pytest.raises(dataclasses.FrozenInstanceError):
        cfg.seed = 5  # type: ignore[misc]


def test_every_params_file_in_the_repo_is_valid() -> None:
    """Each params/<notebook>/<profile>.yaml validates against its notebook and starts with the command running it."""
    from searchrl.experiments.runner_plan import plan_run

    files = sorted(PARAMS_DIR.glob("**/*.yaml")) if PARAMS_DIR.is_dir() else []
    if not files:
        pytest.skip("no parameter files under params/ yet")
    for path in files:
        relative = path.relative_to(PARAMS_DIR.parent).as_posix()
        first = path.read_text(encoding="utf-8").lstrip().splitlines()[0]
        assert first.startswith("#") and "searchrl.runner" in first and relative in first, (
            f"{relative} must begin with the command that runs it: # python -m searchrl.runner NOTEBOOK -f {relative}"
        )
        _, declared = load_params_file(path)
        assert path.parent.parent == PARAMS_DIR and (declared or path.parent.name) == path.parent.name, (
            f"{relative}: keep it in params/<notebook>/ and let its notebook: key (if any) name that notebook"
        )
        notebook = PARAMS_DIR.parent / "notebooks" / f"{path.parent.name}.ipynb"
        if notebook.is_file():
            plan_run(notebook, [path])  # keys, types and the notebook's parameters cell, without executing
        else:
            RunConfig.from_params(None, path)


def test_what_can_be_known_before_work_is_checked_before_work(tmp_path: Path) -> None:
    import torch

    with pytest.raises(ConfigError, match="dataset: no such file"):
        RunConfig.from_params({"dataset": str(tmp_path / "missing.jsonl"), "corpus": str(tmp_path)})
    with pytest.raises(ConfigError, match="corpus is empty"):
        RunConfig.from_params({"dataset": str(tmp_path)})
    with pytest.raises(ConfigError, match="eval_split must be one of train, dev, test"):
        RunConfig.from_params({"eval_split": "validation"})
    if not torch.cuda.is_available():
        with pytest.raises(ConfigError, match="no CUDA GPU is visible"):
            RunConfig.from_params({"device": "cuda:0"})


def test_rl_steps_zero_means_no_rl_stage() -> None:
    from searchrl.trainer.schedules import rl_schedule

    assert rl_schedule(RunConfig.from_params({"rl_steps": 0})) == []
    assert [s.name for s in rl_schedule(RunConfig.from_params({"rl_steps": 3}))] == ["rl"]
    two = rl_schedule(RunConfig.from_params({"rl_steps": 3, "two_stage": True, "stage1_steps": 3}))
    assert [(s.name, s.steps) for s in two] == [("rl_stage1", 3)]
    assert two[0].rewards == ["preset:r1_searcher_stage1"]  # R1-Searcher's stage 1 unless stage1_rewards says


def test_stage1_rewards_are_a_checked_setting() -> None:
    from searchrl.trainer.schedules import rl_schedule

    cfg = RunConfig.from_params({"rl_steps": 4, "two_stage": True, "stage1_steps": 2, "rewards": ["em"],
                                 "stage1_rewards": ["support_recall", "format_r1s_stage1"]})
    assert [(s.name, s.rewards, s.steps, s.offset) for s in rl_schedule(cfg)] == [
        ("rl_stage1", ["support_recall", "format_r1s_stage1"], 2, 0), ("rl_stage2", ["em"], 2, 2)]
    with pytest.raises(ConfigError, match="stage1_rewards"):
        RunConfig.from_params({"rl_steps": 4, "two_stage": True, "stage1_steps": 2, "stage1_rewards": ["suport_recall"]})


def test_arm_overrides_are_checked_naming_the_arm() -> None:
    arms = {"em": {"rewards": ["em"]}, "f1": {"rewards": ["f1"], "learning_rate": 2e-5}}
    cfg = RunConfig.from_params({"arms": arms, "seeds": [0, 1],
                                 "claims": {"F1 beats EM": {"better": "f1", "worse": "em", "metric": "f1"}}})
    assert list(cfg.arms) == ["em", "f1"] and cfg.seeds == [0, 1]
    with pytest.raises(ConfigError, match=r"arm 'em': unknown parameter 'rewardz' \(did you mean 'rewards'\?\)"):
        RunConfig.from_params({"arms": {"em": {"rewardz": ["em"]}}})
    with pytest.raises(ConfigError, match="arm 'lr': .*learning_rate"):
        RunConfig.from_params({"arms": {"lr": {"learning_rate": "fast"}}})
    with pytest.raises(ConfigError, match="arm 'a' may not set seeds"):
        RunConfig.from_params({"arms": {"a": {"seeds": [1]}}})
    with pytest.raises(ConfigError, match="names arm 'b', which is not among the arms"):
        RunConfig.from_params({"arms": {"a": {}}, "claims": {"x": {"better": "a", "worse": "b"}}})
    with pytest.raises(ConfigError, match="item 1 is 'x'"):
        RunConfig.from_params({"seeds": [0, "x"]})
