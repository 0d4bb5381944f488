"""``setup()`` names every submodule after its path (``model.ln_final.name == "ln_final"``),
as TransformerLens 2.18's does (its names: ``tl218_reference/make_state_dicts.py``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from interp import HookedTransformer, HookedTransformerConfig
from interp.sae import SAE, HookedSAETransformer, SAEConfig

HERE = Path(__file__).resolve().parents[1] / "tl218_reference" / "state_dicts"
INDEX = json.loads((HERE / "state_dicts.json").read_text())
MODELS = sorted(INDEX["models"])
TOKENS = torch.tensor(INDEX["tokens"])


def config(name: str) -> HookedTransformerConfig:
    entry = INDEX["models"][name]
    return HookedTransformerConfig(**entry["config"], dtype=getattr(torch, entry["dtype"]))


@pytest.mark.parametrize("name", MODELS)
def test_setup_names_every_submodule_as_transformer_lens(name):
    model = HookedTransformer(config(name))
    assert model.ln_final.name == "ln_final" and model.blocks[0].attn.name == "blocks.0.attn"
    tl_names = INDEX["models"][name]["module_names"]
    shared = set(tl_names) & set(model.mod_dict)
    assert {"embed", "blocks", "blocks.1", "blocks.1.mlp", "unembed"} < shared
    # TransformerLens's other modules are opt-in hooks here (hook_result, hook_attn_in, ...)
    assert all(name.rsplit(".", 1)[-1].startswith("hook_") for name in set(tl_names) - shared)
    assert all(model.mod_dict[path].name == tl_names[path] for path in shared)
    assert all(module.name == path for path, module in model.mod_dict.items())
    model.set_use_attn_result(True)  # a hook point added later is named too
    assert model.blocks[1].attn.hook_result.name == "blocks.1.attn.hook_result"


def test_a_spliced_sae_is_named_and_hook_names_stay_the_models():
    model = HookedSAETransformer(config("gpt2"))
    sae = SAE(SAEConfig(d_in=16, d_sae=32, hook_name="blocks.0.hook_resid_post"))
    model.add_sae(sae)
    assert model.blocks[0].hook_resid_post.name == "blocks.0.hook_resid_post"
    _, cache = model.run_with_cache(TOKENS)
    assert "blocks.0.hook_resid_post.hook_sae_acts_post" in cache
    model.reset_saes()
    assert sae.hook_sae_acts_post.name == "hook_sae_acts_post"
