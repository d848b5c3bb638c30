# SPDX-License-Identifier: Apache-2.0
"""Fixtures: a fresh disk directory per test, and what the GPU tests need (skips without it)."""

import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))


@pytest.fixture(autouse=True)
def _no_user_cache(tmp_path, monkeypatch):
    # from_env() and global_cache() must never touch the user's own cache directory.
    monkeypatch.setenv("KCACHE_DIR", str(tmp_path / "env-cache"))
    monkeypatch.delenv("KCACHE_REMOTE", raising=False)


@pytest.fixture
def disk(tmp_path):
    path = tmp_path / "cache"
    path.mkdir(mode=0o700)
    return str(path)
