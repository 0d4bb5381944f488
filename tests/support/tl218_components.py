"""The TransformerLens 2.18 fixtures of ``tl218_reference/make_components.py``: its models
rebuilt in interp with the same random weights, and each case's tensors."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path

import torch
from safetensors.torch import load_file

from interp import HookedTransformer, HookedTransformerConfig
from tests.support.tolerances import tolerance

HERE = Path(__file__).resolve().parents[1] / "tl218_reference"
INDEX = json.loads((HERE / "components.json").read_text())
CASES = INDEX["cases"]


@cache
def _file(name: str) -> dict[str, torch.Tensor]:
    return load_file(HERE / name)


def case(name: str) -> dict[str, torch.Tensor]:
    """The tensors of case ``name`` by key (``logits``, ``cache.<hook>``, ...)."""
    tensors = _file(CASES[name]["file"])
    return {key: tensors[f"{name}.{key}"] for key in CASES[name]["keys"]}


def model_of(case_name: str) -> HookedTransformer:
    """The case's model, built from its TransformerLens config with TransformerLens's weights."""
    model_name = CASES[case_name]["model"]
    model = HookedTransformer(HookedTransformerConfig(**INDEX["configs"][model_name]))
    tensors = _file(CASES[case_name]["file"])
    prefix = f"{model_name}.param."
    state = {key[len(prefix) :]: value for key, value in tensors.items() if key.startswith(prefix)}
    loaded = model.load_state_dict(state, strict=False)  # the fixtures hold parameters only
    buffers = {name for name, _ in model.named_buffers()}
    assert not loaded.unexpected_keys and set(loaded.missing_keys) <= buffers, loaded
    model.eval()
    return model


def close(actual: torch.Tensor, expected: torch.Tensor, depth: int, reduction: int = 32) -> None:
    """Equal up to float32 rounding of a ``depth``-sub-layer computation summing ``reduction``
    terms at a time, relative to the reference's size."""
    magnitude = expected.float().pow(2).mean().sqrt().clamp(min=1.0)
    tol = tolerance(torch.float32, reduction=reduction, depth=depth, magnitude=magnitude)
    torch.testing.assert_close(actual, expected, **tol)
