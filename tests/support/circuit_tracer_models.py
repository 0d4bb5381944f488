"""The models of ``tests/circuit_tracer_reference`` (``make_fixtures.py``'s random weights and
transcoders) as interp ``ReplacementModel``s, for the tests that compare to circuit-tracer."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path

from safetensors.torch import load_file

from interp import HookedTransformer, HookedTransformerConfig
from interp.circuits import ReplacementModel, load_transcoders

REFERENCE = Path(__file__).parents[1] / "circuit_tracer_reference"


def fresh_model(family: str) -> HookedTransformer:
    cfg = HookedTransformerConfig(**json.loads((REFERENCE / family / "config.json").read_text()))
    model = HookedTransformer(cfg)
    missing, unexpected = model.load_state_dict(
        load_file(REFERENCE / family / "model.safetensors"), strict=False
    )
    assert not missing and not unexpected, (missing, unexpected)
    return model


@cache
def replacement_model(family: str, variant: str) -> ReplacementModel:
    """``family`` in gpt2 / llama / gemma2; ``variant`` in skip / noskip / clt."""
    transcoders = load_transcoders(REFERENCE / family / variant)
    return ReplacementModel.from_model(fresh_model(family), transcoders)
