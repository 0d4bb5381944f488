"""A Hugging Face hub cache in a temporary folder, laid out as huggingface_hub lays it out
(``models--owner--name/refs/main`` and ``snapshots/<commit>/``), used offline: the loaders
find cached repos in it and nothing can download."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from huggingface_hub import constants

COMMIT = "0" * 40


class HubCache:
    def __init__(self, root: Path) -> None:
        self.root = root

    def add(self, repo_id: str, files: dict[str, Path]) -> Path:
        """Cache ``files`` (name in the repo -> local file) as repo ``repo_id``'s snapshot."""
        repo = self.root / f"models--{repo_id.replace('/', '--')}"
        snapshot = repo / "snapshots" / COMMIT
        snapshot.mkdir(parents=True, exist_ok=True)
        (repo / "refs").mkdir(exist_ok=True)
        (repo / "refs" / "main").write_text(COMMIT)
        for name, source in files.items():
            shutil.copy(source, snapshot / name)
        return snapshot


@pytest.fixture
def hub_cache(tmp_path, monkeypatch) -> HubCache:
    """An empty offline hub cache that huggingface_hub (and so interp) reads."""
    root = tmp_path / "hub"
    root.mkdir()
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(root))
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    return HubCache(root)
