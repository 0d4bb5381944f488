"""The same weights in TransformerLens give the same activation at every shared hook name."""

from __future__ import annotations

import pytest
import torch

from interp.loading.hf import from_hf_model
from tests.conftest import make_hf_gpt2
from tests.support.tolerances import model_tolerance

transformer_lens = pytest.importorskip("transformer_lens")

# Hooks whose meaning is the same in both libraries (TransformerBridge adds hook_in/hook_out
# aliases of its own that interp does not have).
CORE_HOOKS = [
    "hook_embed",
    "hook_pos_embed",
    "ln_final.hook_scale",
    "ln_final.hook_normalized",
    "blocks.{l}.hook_resid_pre",
    "blocks.{l}.hook_resid_mid",
    "blocks.{l}.hook_resid_post",
    "blocks.{l}.hook_attn_out",
    "blocks.{l}.hook_mlp_out",
    "blocks.{l}.ln1.hook_scale",
    "blocks.{l}.ln1.hook_normalized",
    "blocks.{l}.ln2.hook_scale",
    "blocks.{l}.ln2.hook_normalized",
    "blocks.{l}.attn.hook_q",
    "blocks.{l}.attn.hook_k",
    "blocks.{l}.attn.hook_v",
    "blocks.{l}.attn.hook_z",
    "blocks.{l}.attn.hook_attn_scores",
    "blocks.{l}.attn.hook_pattern",
    "blocks.{l}.mlp.hook_pre",
    "blocks.{l}.mlp.hook_post",
]


@pytest.fixture(scope="module")
def bridge_and_model(tmp_path_factory):
    hf_model = make_hf_gpt2(n_layer=2, n_embd=64, n_head=4, vocab_size=1000, n_positions=64)
    folder = tmp_path_factory.mktemp("gpt2")
    hf_model.save_pretrained(folder)
    bridge = transformer_lens.TransformerBridge.boot_transformers(str(folder), tokenizer=None)
    return bridge, from_hf_model(hf_model, tokenizer=None).eval()


def test_every_shared_hook_matches_transformer_lens(bridge_and_model):
    bridge, model = bridge_and_model
    tokens = torch.randint(0, 1000, (2, 12), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        tl_logits, tl_cache = bridge.run_with_cache(tokens)
        logits, cache = model.run_with_cache(tokens)
    torch.testing.assert_close(logits, tl_logits, **model_tolerance(model.cfg, tl_logits))
    shared = sorted(set(cache.keys()) & set(tl_cache.keys()))
    expected = {name.format(l=layer) for name in CORE_HOOKS for layer in range(2)}
    assert expected <= set(shared), sorted(expected - set(shared))
    causal = torch.tril(torch.ones(12, 12, dtype=torch.bool))
    for name in shared:
        ours, theirs = cache[name], tl_cache[name]
        assert ours.shape == theirs.shape, (name, ours.shape, theirs.shape)
        if name.endswith("attn_scores"):  # masked entries may use different fill values
            ours, theirs = ours[..., causal], theirs[..., causal]
        if name.endswith("hook_normalized"):
            # TransformerLens 2.x's HookedTransformer (whose names interp keeps) hooks the layer
            # norm's output after its weight and bias; the 4.x bridge hooks it before them.
            norm = model.get_submodule(name.removesuffix(".hook_normalized"))
            theirs = theirs * norm.w + norm.b
        within = model_tolerance(model.cfg, theirs)
        torch.testing.assert_close(ours, theirs, **within, msg=name)
