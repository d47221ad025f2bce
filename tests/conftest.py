"""Shared fixtures: the real SmolLM2 tokenizer and a tiny random policy (built once per session)."""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).parent))  # tests/fakes.py
os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
# Tests run in parallel workers (pytest -n 2) on 2 cores: one thread each, in this process and in the notebook
# kernels it starts. Oversubscribed OpenMP threads on a small CPU are many times slower, not a little.
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
torch.set_num_threads(int(os.environ["OMP_NUM_THREADS"]))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
# Dense indexes built by tests are cached in a throwaway folder, never in the user's ~/.cache.
os.environ.setdefault("SEARCHRL_INDEX_CACHE", tempfile.mkdtemp(prefix="searchrl-index-cache-"))
os.environ.setdefault("SEARCHRL_DIFFICULTY_CACHE", tempfile.mkdtemp(prefix="searchrl-difficulty-") + "/cache.jsonl")

SHARED_DATA = Path(__file__).resolve().parents[2] / "shared" / "data"


@pytest.fixture(scope="session")
def tiny_policy():
    from searchrl.models import tiny_test_policy

    return tiny_test_policy(seed=0)


@pytest.fixture(scope="session")
def tokenizer(tiny_policy):
    return tiny_policy[1]


@pytest.fixture(scope="session")
def tiny_policy_path(tiny_policy, tmp_path_factory):
    from searchrl.models import save_policy

    return save_policy(*tiny_policy, tmp_path_factory.mktemp("tiny-policy"))


@pytest.fixture(scope="session")
def shared_data():
    if not SHARED_DATA.exists():
        pytest.skip("../shared/data is not present")
    return SHARED_DATA
