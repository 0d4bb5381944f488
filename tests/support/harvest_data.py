"""What the harvest tests harvest and compare: the start of the shipped tiny-Shakespeare text
written to a file, the shakespeare-char model on one thread, and a folder's bytes.

    text = shakespeare_text(tmp_path / "small.txt", n_chars=1200)
    harvest(shakespeare_model(), text, ["blocks.0.hook_resid_post"], tmp_path / "acts")
"""

from __future__ import annotations

import gzip
from pathlib import Path

import torch

import interp

SHAKESPEARE = Path(interp.__file__).parent / "shipped" / "data" / "tinyshakespeare.txt.gz"


def shakespeare_text(path: Path, n_chars: int) -> Path:
    """The first ``n_chars`` characters of tiny Shakespeare, written to ``path``."""
    path.write_text(gzip.open(SHAKESPEARE, "rt").read()[:n_chars])
    return path


def shakespeare_model() -> interp.HookedTransformer:
    """shakespeare-char, with torch set to one thread (as each harvest process runs)."""
    torch.set_num_threads(1)
    return interp.load_model("shakespeare-char")


def folder_bytes(folder: Path) -> dict[str, bytes]:
    """Every file of ``folder`` by name: two harvests that agree hold the same bytes."""
    return {path.name: path.read_bytes() for path in sorted(folder.iterdir())}
