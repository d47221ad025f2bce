"""The schema checks the names a run picks from registries of higher layers without importing them: its plain lists
(searchrl.config.names, searchrl.config.rewards) equal the registries, it says what the registries say, a name a
notebook registers still passes, and validating every params file imports neither torch nor pandas."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from searchrl.config import ConfigError, RunConfig
from searchrl.config import names as plain
from searchrl.config import rewards as plain_rewards
from searchrl.core import registry as core_registry

ROOT = Path(__file__).resolve().parents[1]
LIB = ROOT / "lib"


def _run(code: str) -> str:
    """stdout of `code` in a fresh interpreter that imports this tree's package, run from the repository root."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(LIB), os.environ.get("PYTHONPATH", "")])}
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT,
                          env=env).stdout


# ---- the plain lists are the registries' names ----------------------------------------------------------------


def test_each_plain_name_tuple_equals_its_registry():
    from searchrl.data.benchmarks import BENCHMARKS
    from searchrl.evaluation.baselines import BASELINES
    from searchrl.evaluation.paper_tables import LAYOUTS
    from searchrl.judge import JUDGE_BACKENDS
    from searchrl.metrics.scoring import METRICS
    from searchrl.protocols import PROTOCOLS
    from searchrl.retrieval import RETRIEVERS
    from searchrl.trainer.advantages import ADVANTAGE_ESTIMATORS

    for choices, registry in ((plain.PROTOCOLS, PROTOCOLS), (plain.RETRIEVERS, RETRIEVERS),
                              (plain.ADVANTAGE_ESTIMATORS, ADVANTAGE_ESTIMATORS), (plain.BENCHMARKS, BENCHMARKS),
                              (plain.LAYOUTS, LAYOUTS), (plain.METRICS, METRICS), (plain.BASELINES, BASELINES),
                              (plain.JUDGE_BACKENDS, JUDGE_BACKENDS)):
        assert choices.kind == registry.kind
        assert choices.builtin == tuple(registry.names()), f"{registry.kind}: update searchrl/config/names.py"
        assert choices.live is registry  # what the schema asks once the registry is imported
    without = tuple(n for n in BENCHMARKS.names() if BENCHMARKS.without_questions(n))
    assert plain.BENCHMARKS_WITHOUT_QUESTIONS == without


def test_the_reward_names_options_and_presets_equal_the_registries():
    from searchrl.rewards import REWARD_PRESETS, REWARDS, reward_options

    assert plain_rewards.REWARD_OPTIONS == {n: tuple(reward_options(n)) for n in REWARDS.names()}, (
        "update REWARD_OPTIONS in searchrl/config/rewards.py")
    assert plain_rewards.REWARDS.live is REWARDS and plain_rewards.REWARD_PRESETS.live is REWARD_PRESETS
    assert {n: REWARD_PRESETS.get(n) for n in REWARD_PRESETS.names()} == plain_rewards.PRESET_REWARDS


def test_each_registry_records_itself_by_kind():
    made = core_registry.Registry("a kind no registry has")
    try:
        assert core_registry.live_registry("a kind no registry has") is made
        core_registry.Registry("a kind no registry has")  # a later one of the same kind does not stand in for it
        assert core_registry.live_registry("a kind no registry has") is made
    finally:
        core_registry._LIVE.pop("a kind no registry has")
    assert core_registry.live_registry("a kind no registry has") is None


# ---- the plain check says what the registry says ----------------------------------------------------------------

# Each is a bad (or unusual but fine) setting: the messages must not depend on whether the registries are imported.
CASES = [
    {"protocol": "serch_r1"}, {"protocol": "Search-R1"}, {"protocol": 3}, {"protocol": "no_mod_xyz:Cls"},
    {"protocol": "searchrl.protocols.search_r1:Nope"},
    {"retriever": "bm2"}, {"retriever": "web"}, {"retriever": "http://:80"}, {"retriever": "http://h:99999"},
    {"retriever": "http://h:80?x=1"}, {"retriever": "web+ftp://x"}, {"retriever": "BM25"},
    {"retriever": "http:127.0.0.1:8000"}, {"retriever": "web+https://api.example/v1"},
    {"advantage_estimator": "reinforce++"}, {"advantage_estimator": "GRPO"},
    {"rewards": ["preset:r1_searcher_stage3"]}, {"rewards": ["no_such_module_xyz:fn"]}, {"rewards": ["fl"]},
    {"rewards": ["f1"], "reward_options": {"em": {}}}, {"rewards": ["f1"], "reward_options": {"f1": {"max_word": 5}}},
    {"rewards": ["f1", "preset:r1_searcher_stage2"]}, {"rewards": ["f1"], "reward_options": {"f1": 3}},
    {"rewards": ["format_r_search"], "reward_options": {"format_r_search": {"gama_e": 1}}},
    {"rewards": ["preset:r_search"], "reward_options": {"evidence_r_search": {"answerr": 1}}},
    {"two_stage": True, "stage1_steps": 1, "rl_steps": 2, "stage1_rewards": ["retrival_r1s"]},
    {"benchmarks": ["hotpotq"]}, {"benchmarks": ["custom"]}, {"benchmarks": ["R1S-2Wiki", "synthetic"]},
    {"benchmarks": ["nomod_xyz:spec"]}, {"paper_layouts": ["search_r1_table3"]},
    {"paper_layouts": ["Search-R1 Table2"]}, {"eval_metrics": ["cem:r1searcher"]}, {"eval_metrics": ["xyz"]},
    {"eval_metrics": ["CEM:R1-Searcher", "f1"]}, {"difficulty_metric": "f2"}, {"difficulty_metric": "f1:r_serch"},
    {"baselines": ["prompted_search:serch_r1"]}, {"baselines": ["naive:x"]}, {"baselines": ["evidence_tool:a@"]},
    {"baselines": ["evidence_tool:a@nonexistent-model"]}, {"baselines": ["sft:"]}, {"baselines": ["naiv"]},
    {"baselines": ["RSTool:/runs/a@gemma3-270m", "direct", "prompted_search:r1-searcher++"]},
    {"judge": "locl:x"}, {"judge": "openai:"}, {"judge": "openai:m@http://h/v1"}, {"judge": "Local"},
    {"evidence_answerer": "gemma3-27m"}, {"evidence_answerer": "tiny-random"}, {"eval_split": "val"},
    {"arms": {"a": {"protocol": "serch_r1"}, "b": {"model": "x"}, "c d": {}, "e": {"seed": 1}}},
    {"arms": {"a": {"rewards": ["fl"]}}, "claims": {"x": {"better": "a", "worse": "z", "metric": "f2"}}},
    {"arms": {"a": {}, "b": {"cold_start_from": "q"}}},
    {"arms": {"a": {"top_k": 2}, "b": {}}, "cold_start_arm": True,
     "claims": {"x": {"better": "a", "worse": "cold_start"}, "y": {"better": "a", "worse": "cold_start.a"}}},
]  # fmt: skip


def _messages() -> list[str]:
    out = []
    for params in CASES:
        try:
            RunConfig.from_params(params)
            out.append("valid")
        except ConfigError as error:
            out.append(str(error))
    return out


def test_the_plain_checks_say_what_the_registries_say(monkeypatch):
    import searchrl.data.benchmarks
    import searchrl.evaluation.baselines
    import searchrl.evaluation.paper_tables
    import searchrl.judge
    import searchrl.metrics.scoring
    import searchrl.protocols
    import searchrl.retrieval
    import searchrl.rewards
    import searchrl.trainer.advantages  # noqa: F401  (every registry the schema asks)

    live = _messages()
    assert live.count("valid") < len(CASES) // 2  # the cases are mostly errors
    monkeypatch.setattr(core_registry, "_LIVE", {})  # as in a process that imported no registry
    assert plain.PROTOCOLS.live is None
    assert _messages() == live


def test_a_name_registered_at_run_time_passes_and_describe_lists_it():
    code = """if True:
        import json
        from searchrl.config import ConfigError, RunConfig
        def check(params):
            try:
                RunConfig.from_params(params)
                return "valid"
            except ConfigError as error:
                return str(error)
        params = {"rewards": ["brevity"], "reward_options": {"brevity": {"limit": 3}}, "protocol": "mine"}
        before = check(params)
        from searchrl.protocols import PROTOCOLS, SearchR1Protocol
        from searchrl.rewards import REWARDS
        def brevity(completions, **kwargs):
            return [0.0 for _ in completions]
        REWARDS.register("brevity", brevity)
        PROTOCOLS.register("mine", SearchR1Protocol, doc="a protocol of my own")
        after_plain_function = check(params)
        after = check({"rewards": ["brevity"], "protocol": "mine"})
        print(json.dumps([before, after_plain_function, after, "mine" in RunConfig.describe()]))
    """
    before, with_options, after, listed = json.loads(_run(code))
    assert "unknown reward 'brevity'" in before and "unknown protocol 'mine'" in before
    assert "reward 'brevity' has no option 'limit'" in with_options and "its options are none" in with_options
    assert after == "valid" and listed


# ---- checking params files imports no heavy library ---------------------------------------------------------


def test_validating_every_params_file_imports_neither_torch_nor_pandas():
    code = """if True:
        import glob, sys
        from searchrl.config import RunConfig
        files = sorted(glob.glob("params/*/*.yaml"))
        for path in files:
            RunConfig.from_params(None, path)
        print(len(files), [m for m in ("torch", "pandas") if m in sys.modules])
    """
    count, heavy = _run(code).split(" ", 1)
    assert int(count) > 0 and heavy.strip() == "[]"


def test_describe_lists_every_registry_with_its_descriptions():
    from searchrl.protocols import PROTOCOLS
    from searchrl.retrieval import RETRIEVERS
    from searchrl.rewards import REWARD_PRESETS, REWARDS
    from searchrl.trainer.advantages import ADVANTAGE_ESTIMATORS

    table = RunConfig.describe()
    for title, registry in (("protocol", PROTOCOLS), ("retriever", RETRIEVERS), ("rewards", REWARDS),
                            ("rewards: presets (write preset:<name>)", REWARD_PRESETS),
                            ("advantage_estimator", ADVANTAGE_ESTIMATORS)):
        assert f"\n\n== {title} ==\n{registry.describe()}" in table


@pytest.mark.parametrize("module", ["searchrl.config", "searchrl.cli"])
def test_the_parameter_table_commands_list_the_registries(module):
    args = ["params"] if module == "searchrl.cli" else []
    code = f"import runpy, sys; sys.argv = ['x', *{args!r}]; runpy.run_module({module!r}, run_name='__main__')"
    out = _run(code)
    assert "== advantage_estimator ==" in out and "group-relative" in out and "http://HOST:PORT" in out
