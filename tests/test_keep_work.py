"""Work a failed or killed run keeps: evaluation files written whole or not at all, and difficulty outcomes cached
part by part within a round."""

from __future__ import annotations

import builtins
import io
import json

import pandas as pd
import pytest

from searchrl.config.difficulty import DifficultyConfig
from searchrl.core.files import atomic_write_text
from searchrl.data.difficulty import DifficultyCache, label_difficulty
from searchrl.data.schema import make_row
from searchrl.evaluation.evaluate import EvalResult

# ------------------------------------------------------------------------------------------------ evaluation files


class _Killed(OSError):
    pass


class _DyingFile:
    """A file handle that writes half of the first text it is given, then fails: a kill or a full disk mid-write."""

    def __init__(self, handle):
        self._handle = handle

    def write(self, text):
        self._handle.write(text[: len(text) // 2])
        self._handle.flush()
        raise _Killed("killed mid-write")

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self._handle.close()

    def __getattr__(self, name):
        return getattr(self._handle, name)


def _writes_die(monkeypatch):
    """Every file opened for writing from now on dies halfway through its first write, however it was opened."""
    real_open = builtins.open

    def dying_open(file, mode="r", *args, **kwargs):
        handle = real_open(file, mode, *args, **kwargs)
        return _DyingFile(handle) if any(m in mode for m in "wax") else handle

    monkeypatch.setattr(builtins, "open", dying_open)  # what pandas writes through
    monkeypatch.setattr(io, "open", dying_open)  # what pathlib writes through


def _result(n=3):
    records = [{"id": f"q{i}", "question": f"Question {i}?", "golden_answers": ["a"], "qtype": "bridge", "hops": 2,
                "em": float(i % 2), "f1": 0.5, "cem": float(i % 2), "searches": i, "format_ok": True, "answered": True,
                "model_tokens": 10, "completion": "<answer>a</answer> \u00e9"} for i in range(n)]
    return EvalResult(pd.DataFrame(records), {"protocol": "mini"})


def test_records_file_survives_a_write_that_dies_midway(tmp_path, monkeypatch):
    """The records file an evaluation appended to (and a resume reads back) is rewritten whole by
    `trajectories_jsonl`: a write that dies leaves it as it was, every line still readable."""
    path = tmp_path / "trajectories" / "after_rl.jsonl"
    _result(3).trajectories_jsonl(path)
    before = path.read_bytes()
    assert len(before.splitlines()) == 3

    with monkeypatch.context() as patch:
        _writes_die(patch)
        with pytest.raises(_Killed):
            _result(5).trajectories_jsonl(path)
    assert path.read_bytes() == before
    assert [json.loads(line)["id"] for line in path.read_text(encoding="utf-8").splitlines()] == ["q0", "q1", "q2"]

    _result(5).trajectories_jsonl(path)  # a write that finishes replaces it
    assert len(path.read_text(encoding="utf-8").splitlines()) == 5
    assert sorted(p.name for p in path.parent.iterdir() if not p.name.endswith(".tmp")) == ["after_rl.jsonl"]


def test_summary_file_survives_a_write_that_dies_midway(tmp_path, monkeypatch):
    path = tmp_path / "eval" / "after_rl.json"
    _result(3).to_json(path)
    before = path.read_bytes()
    with monkeypatch.context() as patch:
        _writes_die(patch)
        with pytest.raises(_Killed):
            _result(5).to_json(path)
    assert path.read_bytes() == before and json.loads(before)["summary"]["n"] == 3
    assert json.loads(_result(5).to_json(path).read_text())["summary"]["n"] == 5


def test_trajectories_jsonl_writes_what_pandas_writes(tmp_path):
    result = _result(4)
    result.records.loc[1, "completion"] = "line\u2028separator and \u00fc"
    expected = tmp_path / "pandas.jsonl"
    result.records.to_json(expected, orient="records", lines=True, force_ascii=False)
    assert result.trajectories_jsonl(tmp_path / "sub" / "ours.jsonl").read_bytes() == expected.read_bytes()


def test_the_atomic_writer_takes_a_string_path_and_makes_its_folders(tmp_path):
    assert atomic_write_text(str(tmp_path / "a" / "b.txt"), "x\n").read_text() == "x\n"


# ------------------------------------------------------------------------------------------------ difficulty labels

# The rollout at which each question is first right (None: never).
SOLVE_AT = {f"q{i}": k for i, k in enumerate([1, 3, 9, 12, None, 2, 17, None, 5, 4, 11])}


class CountingSampler:
    """Rollouts answer right exactly at each question's SOLVE_AT rollout, counted per question, so the outcome does
    not depend on how questions are grouped into calls. With `die_after`, the run is killed once that many
    questions have been sampled: a call that would go past it raises."""

    def __init__(self, die_after=None, batch_size=None, solve_at=None):
        self.identity = {"policy": "counting", "rollout": {"temperature": 1.0}}
        self.solve_at = SOLVE_AT if solve_at is None else solve_at
        self.rollouts: dict[str, int] = {}
        self.calls: list[list[str]] = []
        self.die_after = die_after
        if batch_size is not None:
            self.batch_size = batch_size

    def correct(self, rows, repeats):
        if self.die_after is not None and sum(map(len, self.calls)) + len(rows) > self.die_after:
            raise KeyboardInterrupt
        self.calls.append([r["id"] for r in rows])
        out = []
        for row in rows:
            start = self.rollouts.get(row["id"], 0)
            self.rollouts[row["id"]] = start + repeats
            out.append([self.solve_at[row["id"]] == start + k + 1 for k in range(repeats)])
        return out


def _rows(ids=SOLVE_AT):
    return [make_row(q, f"What does question {q} ask?", ["right"], type="bridge") for q in ids]


def _cfg(tmp_path):
    return DifficultyConfig(difficulty_rollouts=15, difficulty_chunk=4,
                            difficulty_cache=str(tmp_path / "difficulty.jsonl"))


def _labels(rows):
    return {r["id"]: (r["metadata"]["rollouts_to_solve"], r["metadata"]["rollouts_sampled"],
                      r["metadata"]["difficulty"]) for r in rows}


def test_a_round_is_sampled_and_cached_part_by_part_with_the_same_labels(tmp_path):
    whole = label_difficulty(_rows(), CountingSampler(), _cfg(tmp_path / "whole"), progress=False, save_every=100)
    sampler = CountingSampler()
    parts = label_difficulty(_rows(), sampler, _cfg(tmp_path / "parts"), progress=False, save_every=3)
    assert _labels(parts) == _labels(whole)
    assert _labels(parts)["q3"] == (12, 12, "medium") and _labels(parts)["q4"] == (None, 15, "unsolved")
    # Round 1: 11 questions in parts of 3, which solves q0, q1, q5 and q9; round 2 starts with what is left.
    assert sampler.calls[:4] == [["q0", "q1", "q2"], ["q3", "q4", "q5"], ["q6", "q7", "q8"], ["q9", "q10"]]
    assert sampler.calls[4] == ["q2", "q3", "q4"]


def test_parts_are_whole_batches_of_a_sampler_that_batches(tmp_path):
    # 16 rollouts a batch at 4 each: 4 questions a batch, so parts of 3 become parts of 4.
    sampler = CountingSampler(batch_size=16)
    label_difficulty(_rows(), sampler, _cfg(tmp_path), progress=False, save_every=3)
    assert [len(call) for call in sampler.calls[:3]] == [4, 4, 3]
    with pytest.raises(ValueError, match="save_every"):
        label_difficulty(_rows(), sampler, _cfg(tmp_path), progress=False, save_every=0)


def test_an_interrupted_round_keeps_the_parts_it_finished(tmp_path):
    cfg = _cfg(tmp_path)
    with pytest.raises(KeyboardInterrupt):
        label_difficulty(_rows(), CountingSampler(die_after=7), cfg, progress=False, save_every=3)
    cache = DifficultyCache(cfg.difficulty_cache)
    saved = {e["id"]: (e["solved_at"], e["sampled"]) for e in cache.entries.values()}
    assert saved == {"q0": (1, 4), "q1": (3, 4), "q2": (None, 4), "q3": (None, 4), "q4": (None, 4), "q5": (2, 4)}

    # The rerun samples the six cached questions no more than an uninterrupted run would have, and labels alike.
    rerun = CountingSampler()
    rerun.rollouts = {q: 4 for q in saved}  # the policy goes on from the rollouts it had drawn
    labelled = label_difficulty(_rows(), rerun, cfg, progress=False, save_every=3)
    assert rerun.calls[0] == ["q2", "q3", "q4"]  # round 2 for those; the cached solved ones are skipped
    assert _labels(labelled) == _labels(label_difficulty(_rows(), CountingSampler(), _cfg(tmp_path / "fresh"),
                                                         progress=False, save_every=3))


def test_by_default_a_long_round_is_saved_before_it_ends(tmp_path):
    solve_at = {f"q{i}": None for i in range(100)}
    cfg = _cfg(tmp_path)
    sampler = CountingSampler(die_after=len(solve_at) - 1, solve_at=solve_at)  # killed just before round 1 ends
    with pytest.raises(KeyboardInterrupt):
        label_difficulty(_rows(solve_at), sampler, cfg, progress=False)
    saved = sorted(e["id"] for e in DifficultyCache(cfg.difficulty_cache).entries.values())
    assert saved and saved == sorted(q for call in sampler.calls for q in call)
