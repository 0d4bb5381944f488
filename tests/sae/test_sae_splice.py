"""Splicing SAEs into a model: SAELens's HookedSAETransformer vocabulary, against references
computed with ordinary hooks on the plain model."""

import pytest
import torch

import interp
from interp.sae import SAE, HookedSAETransformer, SAEConfig
from tests.support.tolerances import model_tolerance

RESID = "blocks.1.hook_resid_post"


def random_sae(d_in, hook_name, seed=0, **kw):
    torch.manual_seed(seed)
    sae = SAE(SAEConfig(d_in=d_in, d_sae=4 * d_in, hook_name=hook_name, **kw))
    with torch.no_grad():
        for param in sae.parameters():
            param.add_(torch.randn_like(param) * 0.05)
    return sae


@pytest.fixture(scope="module")
def model():
    return HookedSAETransformer.from_model(interp.load_model("shakespeare-char")).eval()


@pytest.fixture(scope="module")
def tokens(model):
    return model.to_tokens("To be, or not to be: that is the question.")


def model_state(model):
    """What splicing may change: the modules at each hook, and the hooks attached."""
    return {
        name: (type(point), len(point.fwd_hooks), len(point.bwd_hooks))
        for name, point in model.hook_dict.items()
    }


def test_from_model_is_the_same_model(tokens):
    plain = interp.load_model("shakespeare-char").eval()
    reference = plain(tokens)
    model = HookedSAETransformer.from_model(plain)
    assert model is plain and isinstance(model, interp.HookedTransformer)
    torch.testing.assert_close(model(tokens), reference, atol=0, rtol=0)


def test_error_term_leaves_logits_unchanged(model, tokens):
    sae = random_sae(model.cfg.d_model, RESID)
    plain = model(tokens)
    spliced = model.run_with_saes(tokens, saes=[sae], use_error_term=True)
    within = model_tolerance(model.cfg, plain, spliced=(sae.cfg.d_sae,))
    torch.testing.assert_close(spliced, plain, **within)
    assert (model.run_with_saes(tokens, saes=[sae]) - plain).abs().max() > 1e-2


def test_spliced_logits_equal_a_hook_that_runs_the_sae(model, tokens):
    sae = random_sae(model.cfg.d_model, RESID)
    reference = model.run_with_hooks(tokens, fwd_hooks=[(RESID, lambda x, hook: sae(x))])
    torch.testing.assert_close(model.run_with_saes(tokens, saes=[sae]), reference)


def test_cache_keys_and_early_exit(model, tokens):
    sae = random_sae(model.cfg.d_model, RESID)
    _, cache = model.run_with_cache_with_saes(tokens, saes=[sae])
    acts = cache[f"{RESID}.hook_sae_acts_post"]
    assert acts.shape == (*tokens.shape, sae.cfg.d_sae)
    torch.testing.assert_close(acts, sae.encode(cache[RESID]))
    for name in ("input", "acts_pre", "acts_post", "recons", "output"):
        assert f"{RESID}.hook_sae_{name}" in cache
    torch.testing.assert_close(cache[f"{RESID}.hook_sae_output"], cache["blocks.2.hook_resid_pre"])
    assert set(sae.hook_dict) >= {"hook_sae_acts_post"}  # the SAE's own names come back
    assert sae.hook_sae_acts_post.name == "hook_sae_acts_post"


def test_feature_ablation_and_steering_through_ordinary_hooks(model, tokens):
    sae = random_sae(model.cfg.d_model, RESID)
    _, cache = model.run_with_cache_with_saes(tokens, saes=[sae])
    feature = int(cache[f"{RESID}.hook_sae_acts_post"][0].sum(0).argmax())

    def ablate(acts, hook):
        acts = acts.clone()
        acts[..., feature] = 0
        return acts

    def ablated_resid(x, hook):  # the same edit, done by hand on the plain model
        acts = sae.encode(x)
        error = x - sae.decode(acts)
        acts[..., feature] = 0
        return sae.decode(acts) + error

    with model.saes([sae], use_error_term=True):
        ablated = model.run_with_hooks(tokens, fwd_hooks=[(f"{RESID}.hook_sae_acts_post", ablate)])
    by_hand = model.run_with_hooks(tokens, fwd_hooks=[(RESID, ablated_resid)])
    within = model_tolerance(model.cfg, by_hand, spliced=(sae.cfg.d_sae,))
    torch.testing.assert_close(ablated, by_hand, **within)
    assert (ablated - model(tokens)).abs().max() > 1e-3

    def steer(acts, hook):
        return acts + 3.0 * torch.nn.functional.one_hot(torch.tensor(feature), sae.cfg.d_sae)

    sae.use_error_term = True
    steered = model.run_with_hooks_with_saes(
        tokens, saes=[sae], fwd_hooks=[(f"{RESID}.hook_sae_acts_post", steer)]
    )
    direction = 3.0 * sae.W_dec[feature].detach()
    reference = model.run_with_hooks(tokens, fwd_hooks=[(RESID, lambda x, hook: x + direction)])
    within = model_tolerance(model.cfg, reference, spliced=(sae.cfg.d_sae,))
    torch.testing.assert_close(steered, reference, **within)


def test_hook_z_sae_and_several_at_once(model, tokens):
    width = model.cfg.n_heads * model.cfg.d_head
    attn = random_sae(width, "blocks.0.attn.hook_z", seed=1, reshape_activations="hook_z")
    resid = random_sae(model.cfg.d_model, RESID, seed=2)

    def run_both(z, hook):
        return attn(z)

    reference = model.run_with_hooks(
        tokens,
        fwd_hooks=[("blocks.0.attn.hook_z", run_both), (RESID, lambda x, hook: resid(x))],
    )
    logits, cache = model.run_with_cache_with_saes(tokens, saes=[attn, resid])
    torch.testing.assert_close(logits, reference)
    assert cache["blocks.0.attn.hook_z.hook_sae_acts_post"].shape == (*tokens.shape, 4 * width)
    assert cache["blocks.0.attn.hook_z"].shape == (
        *tokens.shape,
        model.cfg.n_heads,
        model.cfg.d_head,
    )
    with model.saes([attn, resid]):
        assert set(model.acts_to_saes) == {"blocks.0.attn.hook_z", RESID}
    assert model.acts_to_saes == {}


def test_transcoder_reads_one_hook_and_replaces_another(model, tokens):
    torch.manual_seed(3)
    d = model.cfg.d_model
    transcoder = SAE(
        SAEConfig(
            d_in=d,
            d_sae=64,
            architecture="skip_transcoder",
            hook_name="blocks.0.hook_resid_mid",
            hook_name_out="blocks.0.hook_mlp_out",
            apply_b_dec_to_input=False,
        )
    )
    with torch.no_grad():
        transcoder.W_skip.normal_(0, 0.01)
    _, cache = model.run_with_cache(tokens, names_filter="blocks.0.hook_resid_mid")
    mid = cache["blocks.0.hook_resid_mid"]
    reference = model.run_with_hooks(
        tokens, fwd_hooks=[("blocks.0.hook_mlp_out", lambda out, hook: transcoder(mid))]
    )
    logits, spliced_cache = model.run_with_cache_with_saes(tokens, saes=[transcoder])
    torch.testing.assert_close(logits, reference)
    assert "blocks.0.hook_mlp_out.hook_sae_acts_post" in spliced_cache
    assert set(model.acts_to_saes) == set()
    plain = model(tokens)
    with_error = model.run_with_saes(tokens, saes=[transcoder], use_error_term=True)
    within = model_tolerance(model.cfg, plain, spliced=(transcoder.cfg.d_sae,))
    torch.testing.assert_close(with_error, plain, **within)


def test_saes_context_cleans_up_when_the_body_raises(model, tokens):
    before = model_state(model)
    sae = random_sae(model.cfg.d_model, RESID)
    with pytest.raises(RuntimeError, match="boom"):
        with model.saes([sae]):
            assert f"{RESID}.hook_sae_acts_post" in model.hook_dict
            raise RuntimeError("boom")
    assert model_state(model) == before
    assert not any(point.has_hooks for point in model.hook_points())
    torch.testing.assert_close(model(tokens), interp.load_model("shakespeare-char")(tokens))


def test_hooks_on_the_spliced_point_stay_and_run(model, tokens):
    seen = []
    handle = model.hook_dict[RESID].add_hook(lambda x, hook: seen.append(hook.name))
    sae = random_sae(model.cfg.d_model, RESID)
    model.add_sae(sae)
    try:
        model(tokens)
        assert seen == [RESID]
    finally:
        model.reset_saes()
    model(tokens)
    assert seen == [RESID, RESID]
    handle.remove()
    assert not model.hook_dict[RESID].has_hooks


def test_add_sae_replaces_and_saes_restores(model, tokens):
    first = random_sae(model.cfg.d_model, RESID, seed=4)
    second = random_sae(model.cfg.d_model, RESID, seed=5)
    model.add_sae(first)
    try:
        with model.saes([second]):
            assert model.acts_to_saes[RESID] is second
        assert model.acts_to_saes[RESID] is first
        spliced = model(tokens)  # the restored SAE is the one spliced
    finally:
        model.reset_saes()
    reference = model.run_with_hooks(tokens, fwd_hooks=[(RESID, lambda x, hook: first(x))])
    torch.testing.assert_close(spliced, reference)
    assert model.acts_to_saes == {}


def test_gradients_reach_the_features(model, tokens):
    sae = random_sae(model.cfg.d_model, RESID)
    with model.saes([sae], use_error_term=True):
        _, cache = model.run_with_cache(
            tokens,
            return_type="loss",
            incl_bwd=True,
            names_filter=lambda n: n.endswith("acts_post"),
        )
    grad = cache[f"{RESID}.hook_sae_acts_post_grad"]
    assert grad.shape == (*tokens.shape, sae.cfg.d_sae) and grad.abs().sum() > 0


def test_bad_splices_are_clear_errors_and_leave_the_model(model, caplog):
    before = model_state(model)
    wide = random_sae(2 * model.cfg.d_model, RESID)
    with pytest.raises(ValueError, match=r"d_in=256, but 'blocks.1.hook_resid_post' is 128 wide"):
        model.add_sae(wide)
    with caplog.at_level("WARNING"):  # SAELens skips an SAE on a hook the model lacks
        model.add_sae(random_sae(model.cfg.d_model, "blocks.1.hook_resid_pots"))
    assert "No hook found for blocks.1.hook_resid_pots. Skipping." in caplog.text
    assert "closest: blocks.1.hook_resid_post" in caplog.text
    transcoder = SAE(
        SAEConfig(
            d_in=128,
            d_sae=8,
            architecture="transcoder",
            hook_name=RESID,
            apply_b_dec_to_input=False,
        )
    )
    with pytest.raises(ValueError, match="without cfg.hook_name_out"):
        model.add_sae(transcoder)
    with pytest.raises(ValueError, match="d_in=256"):
        with model.saes([random_sae(model.cfg.d_model, RESID), wide]):
            pass
    with caplog.at_level("WARNING"):
        model.reset_saes(RESID)
    assert f"No SAE is attached to {RESID}. There's nothing to reset." in caplog.text
    assert model_state(model) == before
