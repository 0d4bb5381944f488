"""Path patching against ARENA's step-by-step algorithm, and against activation patching."""

from __future__ import annotations

import pytest
import torch

import interp
from interp import patching
from interp.patching import LogitDiff
from interp.patching.path import path_patch, path_patch_runs

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def setup():
    cfg = interp.HookedTransformerConfig(
        n_layers=3, d_model=32, n_heads=4, d_mlp=64, d_vocab=97, n_ctx=32, init_range=0.3, seed=2
    )
    model = interp.HookedTransformer(cfg).eval()
    generator = torch.Generator().manual_seed(0)
    clean = torch.randint(0, 97, (2, 6), generator=generator)
    corrupted = clean.clone()
    corrupted[:, 1] = (clean[:, 1] + 7) % 97
    corrupted[:, 3] = (clean[:, 3] + 5) % 97
    answers = torch.randint(0, 97, (2, 2), generator=generator)
    _, clean_cache = model.run_with_cache(clean)
    _, corrupted_cache = model.run_with_cache(corrupted)
    return model, clean, corrupted, clean_cache, corrupted_cache, LogitDiff(answers)


def freeze_heads_hooks(model, orig_cache, new_cache, sender):
    """ARENA's patch_or_freeze_head_vectors: every head's z from orig, the sender's from new."""

    def hook(z, hook):
        z = orig_cache[hook.name].clone()
        if hook.layer() == sender[0]:
            z[:, :, sender[1]] = new_cache[hook.name][:, :, sender[1]]
        return z

    return [(f"blocks.{layer}.attn.hook_z", hook) for layer in range(model.cfg.n_layers)]


def test_head_to_final_resid_post_matches_arena(setup):
    model, clean, corrupted, clean_cache, corrupted_cache, metric = setup
    expected = torch.zeros(3, 4)
    final = "blocks.2.hook_resid_post"
    for layer in range(3):
        for head in range(4):
            hooks = freeze_heads_hooks(model, clean_cache, corrupted_cache, (layer, head))
            with model.hooks(fwd_hooks=hooks):
                _, cache = model.run_with_cache(clean, names_filter=final)
            logits = model.unembed(model.ln_final(cache[final]))
            expected[layer, head] = metric(logits).mean()
    result = patching.get_path_patch_head_to_final_resid_post(
        model, clean, corrupted_cache, metric, progress=False, max_batch_size=6
    )
    assert result.axis_names == ("layer", "head")
    torch.testing.assert_close(result.as_subclass(torch.Tensor), expected, atol=1e-5, rtol=0)
    # The direct path is not the whole effect: activation patching differs.
    total = patching.get_act_patch_attn_head_out_all_pos(
        model, clean, corrupted_cache, metric, progress=False
    )
    assert (total - result).abs().max() > 1e-3


def test_head_to_heads_queries_matches_arena(setup):
    model, clean, corrupted, clean_cache, corrupted_cache, metric = setup
    receivers = [(2, 0), (2, 3)]
    expected = torch.zeros(3, 4)
    for layer in range(3):
        for head in range(4):
            hooks = freeze_heads_hooks(model, clean_cache, corrupted_cache, (layer, head))
            with model.hooks(fwd_hooks=hooks):
                _, cache = model.run_with_cache(clean, names_filter="blocks.2.attn.hook_q")

            def patch_q(q, hook, patched=cache["blocks.2.attn.hook_q"]):
                q = q.clone()
                q[:, :, [0, 3]] = patched[:, :, [0, 3]]
                return q

            logits = model.run_with_hooks(clean, fwd_hooks=[("blocks.2.attn.hook_q", patch_q)])
            expected[layer, head] = metric(logits).mean()
    result = patching.get_path_patch_head_to_heads(
        model, clean, corrupted_cache, metric, receiver_heads=receivers, receiver_input="q",
        progress=False,
    )  # fmt: skip
    torch.testing.assert_close(result.as_subclass(torch.Tensor), expected, atol=1e-5, rtol=0)
    assert not model.cfg.use_split_qkv_input and "blocks.0.hook_q_input" not in model.hook_dict


def test_every_receiver_equals_activation_patching(setup):
    model, clean, corrupted, clean_cache, corrupted_cache, metric = setup
    receivers = ["resid_end"]
    for layer in range(3):
        receivers.append((layer, "mlp"))
        receivers += [(layer, head, kind) for head in range(4) for kind in "qkv"]
    senders = [[(layer, head)] for layer in range(3) for head in range(4)]
    result = path_patch_runs(
        model, corrupted, clean_cache, metric, senders, receivers, progress=False
    ).view(3, 4)
    expected = patching.get_act_patch_attn_head_out_all_pos(
        model, corrupted, clean_cache, metric, progress=False
    )
    torch.testing.assert_close(result, expected.as_subclass(torch.Tensor), atol=1e-5, rtol=0)
    assert not model.cfg.use_hook_mlp_in
    assert not any(point.has_hooks for point in model.hook_points())


def test_senders_together_and_bad_receivers(setup):
    model, clean, corrupted, clean_cache, corrupted_cache, metric = setup
    no_receivers = path_patch(model, clean, corrupted_cache, metric, [(0, 1)], receivers=[])
    assert no_receivers.item() == pytest.approx(metric(model(clean)).mean().item(), abs=1e-5)
    both = path_patch(model, clean, corrupted_cache, metric, [(0, 1), (1, 2)], ["resid_end"])
    one = path_patch(model, clean, corrupted_cache, metric, [(0, 1)], ["resid_end"])
    assert (both - one).abs() > 1e-6
    with pytest.raises(ValueError, match="Unknown receiver"):
        path_patch(model, clean, corrupted_cache, metric, [(0, 1)], receivers=[(1, "attn")])
    with pytest.raises(ValueError, match="outside"):
        path_patch(model, clean, corrupted_cache, metric, [(5, 1)], receivers=["resid_end"])
