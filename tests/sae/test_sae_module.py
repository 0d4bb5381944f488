"""The SAE module itself: hook points, the error term, normalisation state, config views."""

import pytest
import torch

from interp.sae import SAE, SAEConfig
from tests.support.tolerances import tolerance


def random_sae(**kw):
    torch.manual_seed(0)
    sae = SAE(SAEConfig(d_in=8, d_sae=24, hook_name="blocks.2.hook_resid_post", **kw))
    with torch.no_grad():
        for param in sae.parameters():
            param.add_(torch.randn_like(param) * 0.1)
    return sae


def test_hook_points_see_each_stage():
    sae = random_sae()
    x = torch.randn(3, 8)
    _, cache = sae.run_with_cache(x)
    assert list(cache.keys()) == [
        "hook_sae_input",
        "hook_sae_acts_pre",
        "hook_sae_acts_post",
        "hook_sae_recons",
        "hook_sae_output",
    ]
    torch.testing.assert_close(cache["hook_sae_acts_post"], torch.relu(cache["hook_sae_acts_pre"]))
    torch.testing.assert_close(cache["hook_sae_acts_pre"], (x - sae.b_dec) @ sae.W_enc + sae.b_enc)
    torch.testing.assert_close(cache["hook_sae_output"], sae.decode(sae.encode(x)))


def test_error_term_returns_the_input_until_a_hook_edits_features():
    sae = random_sae(normalize_activations="constant_norm_rescale")
    sae.use_error_term = True
    x = torch.randn(2, 5, 8)
    # The error term is x - decode(encode(x)), added back: sums over d_sae and d_in.
    within = tolerance(torch.float32, reduction=sae.cfg.d_sae, depth=2, magnitude=x)
    torch.testing.assert_close(sae(x), x, **within)
    _, cache = sae.run_with_cache(x)
    torch.testing.assert_close(cache["hook_sae_error"], x - sae.decode(sae.encode(x)))
    zeroed = sae.run_with_hooks(x, fwd_hooks=[("hook_sae_acts_post", lambda a, hook: a * 0)])
    sae.encode(x)  # the norm that decode() denormalises with
    torch.testing.assert_close(zeroed, sae.decode(torch.zeros(2, 5, 24)) + cache["hook_sae_error"])


def test_decode_needs_the_input_norm_first():
    sae = SAE(SAEConfig(d_in=8, d_sae=24, normalize_activations="layer_norm"))
    with pytest.raises(
        RuntimeError,
        match=r"decode\(\) of an SAE with "
        r"normalize_activations='layer_norm' needs the input's norm",
    ):
        sae.decode(torch.zeros(24))


def test_config_views():
    cfg = SAEConfig(
        d_in=8,
        d_sae=24,
        hook_name="blocks.2.hook_resid_post",
        model_name="m",
        extra={"context_size": 64},
    )
    assert cfg.hook_layer == 2 and cfg.metadata.hook_name == "blocks.2.hook_resid_post"
    assert cfg.to_dict()["metadata"]["context_size"] == 64
    with pytest.raises(
        ValueError,
        match=r"apply_b_dec_to_input=True with architecture "
        "'transcoder'",
    ):
        SAEConfig(d_in=8, d_sae=24, architecture="transcoder")
    # SAELens builds such a config (TopKSAEConfig's k defaults to 100); encoding says why not
    wide_k = SAE(SAEConfig(d_in=8, d_sae=24, architecture="topk", k=30))
    with pytest.raises(ValueError, match=r"k=30 is larger than d_sae=24"):
        wide_k.encode(torch.zeros(8))


def test_wrong_width_input_is_a_clear_error():
    with pytest.raises(
        ValueError,
        match=r"The SAE reads width 8 \(cfg.d_in\) at "
        r"'blocks.2.hook_resid_post', but got an activation of shape \(3, 9\)",
    ):
        random_sae().encode(torch.zeros(3, 9))
