"""Feature analysis against brute-force references: top contexts and density over a small
dataset, DLA summing to the logit, logit weights through W_O, exact feature patching (batched
engine) against one hooked forward per feature."""

import pytest
import torch

import interp
from interp.sae import SAE, HookedSAETransformer, SAEConfig
from interp.sae.features import (
    HISTOGRAM_EDGES,
    feature_acts,
    feature_attribution,
    feature_directions,
    feature_dla,
    feature_logit_weights,
    feature_patch,
    spearman,
    text_windows,
    top_activations,
    top_logit_tokens,
    top_logits,
)
from interp.train import default_text
from tests.support.tolerances import error_bound, model_tolerance, tolerance

RESID = "blocks.1.hook_resid_post"


def random_sae(d_in, hook_name, d_sae=64, seed=0, **kw):
    torch.manual_seed(seed)
    sae = SAE(SAEConfig(d_in=d_in, d_sae=d_sae, hook_name=hook_name, **kw))
    with torch.no_grad():
        sae.W_enc.copy_(torch.randn_like(sae.W_enc) * 0.1)
        sae.b_enc.copy_(torch.randn_like(sae.b_enc) * 0.3 - 0.3)  # sparse: many features off
        sae.b_dec.copy_(torch.randn_like(sae.b_dec) * 0.1)
    return sae


@pytest.fixture(scope="module")
def model():
    return HookedSAETransformer.from_model(interp.load_model("shakespeare-char")).eval()


@pytest.fixture(scope="module")
def windows(model):
    windows = text_windows(model, default_text()[: 12 * 40], 40)
    assert windows.shape == (12, 40)  # longer than n_ctx: the text is not truncated
    return windows


def test_text_windows_cut_the_text(model):
    windows = text_windows(model, "ROMEO:\n" * 10, 8)
    assert windows.shape == (8, 8)
    assert model.to_string(windows.flatten()) == ("ROMEO:\n" * 10)[:64]
    with pytest.raises(ValueError, match="The text is 3 tokens; windows of 8 need at least 8"):
        text_windows(model, "abc", 8)


def test_top_activations_equal_brute_force(model, windows):
    sae = random_sae(model.cfg.d_model, RESID)
    k, left, right = 5, 3, 2
    stats = top_activations(model, sae, windows, k=k, batch_size=5, left=left, right=right)
    acts = feature_acts(model, sae, windows)  # [12, 40, d_sae]
    n_seq, n_pos, d_sae = acts.shape
    flat = acts.reshape(-1, d_sae)
    assert 0 < (flat > 0).float().mean() < 0.5  # a sparse, but not dead, SAE
    torch.testing.assert_close(stats.fire_count, (flat > 0).sum(0))
    assert stats.n_tokens == n_seq * n_pos
    assert stats.l0 == pytest.approx(float((flat > 0).sum(-1).float().mean()))
    torch.testing.assert_close(stats.act_sum, flat.double().sum(0))
    # Batches of 5 against one batch of all: a forward's error, at the top values' size.
    checked = 0
    for f in range(d_sae):
        column = flat[:, f]
        order = column.argsort(descending=True)[:k]
        expected = column[order].clamp(min=0)
        within = model_tolerance(model.cfg, expected)
        torch.testing.assert_close(stats.top_values[f], expected, **within)
        for j, token in enumerate(order.tolist()):
            if column[token] <= 0:
                assert stats.top_position[f, j] == -1 and stats.top_sequence[f, j] == -1
                continue
            seq, pos = stats.top_sequence[f, j].item(), stats.top_position[f, j].item()
            assert acts[seq, pos, f] == stats.top_values[f, j]
            if (column == column[token]).sum() == 1:
                assert (seq, pos) == divmod(token, n_pos)
            for o in range(-left, right + 1):
                inside = 0 <= pos + o < n_pos
                token_id = windows[seq, pos + o].item() if inside else -1
                value = acts[seq, pos + o, f].item() if inside else 0.0
                assert stats.context_tokens[f, j, o + left] == token_id
                close = pytest.approx(value, abs=within["atol"], rel=within["rtol"])
                assert stats.context_acts[f, j, o + left] == close
            checked += 1
        positive = column[column > 0]
        counts = torch.histogram(positive.clamp(1e-3, 1e3).double(), HISTOGRAM_EDGES.double())
        torch.testing.assert_close(stats.histogram[f], counts.hist.long())
    assert checked > 50
    # batches of 1 and of everything give the same top values
    whole = top_activations(model, sae, windows, k=k, batch_size=len(windows))
    torch.testing.assert_close(whole.top_values, stats.top_values)


def test_top_activations_with_fewer_tokens_than_k(model, windows):
    # A batch of 6 tokens and k = 10: each feature keeps its 6 values, the rest empty.
    sae = random_sae(model.cfg.d_model, RESID)
    short = windows[:1, :6]
    stats = top_activations(model, sae, short, k=10, left=2, right=1)
    flat = feature_acts(model, sae, short).reshape(-1, sae.cfg.d_sae)  # [6, d_sae]
    expected = flat.T.sort(dim=-1, descending=True).values.clamp(min=0)
    within = model_tolerance(model.cfg, expected)
    torch.testing.assert_close(stats.top_values[:, :6], expected, **within)
    assert (stats.top_values[:, 6:] == 0).all() and (stats.top_position[:, 6:] == -1).all()
    fired = stats.top_values > 0
    assert (stats.top_position[fired] >= 0).all() and (stats.top_position[~fired] == -1).all()


def test_top_activations_on_batches_shorter_than_k(model, windows):
    """A batch of fewer tokens than k (a 6-token prompt, k=10) merges its candidates into
    the running top-k as a longer batch does."""
    sae = random_sae(model.cfg.d_model, RESID)
    short = windows[:4, :3]  # batches of one 3-token sequence, k = 5
    stats = top_activations(model, sae, short, k=5, batch_size=1, left=2, right=1)
    flat = feature_acts(model, sae, short).reshape(-1, sae.cfg.d_sae)  # [12, d_sae]
    expected = flat.topk(5, dim=0).values.T.clamp(min=0)  # [d_sae, 5]
    torch.testing.assert_close(stats.top_values, expected, **model_tolerance(model.cfg, expected))
    assert ((stats.top_position >= 0) == (stats.top_values > 0)).all()
    one = top_activations(model, sae, short[:1], k=10)  # fewer tokens than k altogether
    assert one.top_values.shape == (sae.cfg.d_sae, 10) and (one.top_values[:, 3:] == 0).all()


def test_contexts_are_readable(model, windows):
    sae = random_sae(model.cfg.d_model, RESID)
    stats = top_activations(model, sae, windows, k=3, left=4, right=1)
    feature = stats.most_active(1)[0]
    best = stats.contexts(feature, model.tokenizer)[0]
    assert best["value"] == pytest.approx(float(stats.top_values[feature, 0]))
    assert best["acts"][best["index"]] == pytest.approx(best["value"])
    seq, pos = best["sequence"], best["position"]
    expected = model.to_str_tokens(windows[seq, max(0, pos - 4) : pos + 2])
    assert best["tokens"] == expected


def test_feature_dla_sums_to_the_logit(model):
    last = f"blocks.{model.cfg.n_layers - 1}.hook_resid_post"
    sae = random_sae(model.cfg.d_model, last, d_sae=256)
    tokens = model.to_tokens("ROMEO:\nWhat say")
    answer = model.to_single_token(" ")
    dla = feature_dla(model, sae, tokens, answer)
    logits, cache = model.run_with_cache(tokens)
    x = cache[last][0, -1]
    acts = sae.encode(x)
    rest = x - acts @ sae.W_dec  # b_dec + the error
    scale = cache["ln_final.hook_scale"][0, -1]
    rest_logit = ((rest - rest.mean()) / scale * model.ln_final.w + model.ln_final.b) @ model.W_U
    total = dla.sum() + rest_logit[answer] + model.b_U[answer]
    # d_sae features, each a dot product over d_model, summed: the logit's split.
    terms = dla.abs().sum() + rest_logit[answer].abs() + model.b_U[answer].abs()
    bound = error_bound(torch.float32, reduction=dla.numel() * model.cfg.d_model, magnitude=terms)
    assert total.item() == pytest.approx(logits[0, -1, answer].item(), abs=bound)
    wrong = model.to_single_token("e")
    diff = feature_dla(model, sae, tokens, answer, wrong)
    expected = dla - feature_dla(model, sae, tokens, wrong)
    within = tolerance(torch.float32, reduction=model.cfg.d_model, magnitude=dla)
    torch.testing.assert_close(diff, expected, **within)


def test_logit_weights_through_attention_output(model):
    cfg = model.cfg
    sae = random_sae(cfg.n_heads * cfg.d_head, "blocks.2.attn.hook_z", reshape_activations="hook_z")
    directions = feature_directions(model, sae)
    for f in (0, 17):
        z = sae.W_dec[f].view(cfg.n_heads, cfg.d_head)
        attn_out = torch.einsum("hd,hdm->m", z, model.blocks[2].attn.W_O)
        within = tolerance(torch.float32, reduction=cfg.n_heads * cfg.d_head, magnitude=attn_out)
        torch.testing.assert_close(directions[f], attn_out, **within)
    weights = feature_logit_weights(model, sae)
    centred = directions - directions.mean(-1, keepdim=True)
    torch.testing.assert_close(weights, (centred * model.ln_final.w) @ model.W_U)
    top = top_logits(model, sae, 17, k=3, weights=weights)
    assert [v for _, v in top["promoted"]] == pytest.approx(weights[17].topk(3).values.tolist())
    assert top["suppressed"][0][0] == model.tokenizer.decode([int(weights[17].argmin())])
    with pytest.raises(ValueError, match="writes 512 wide at 'blocks.0.mlp.hook_post'"):
        feature_directions(model, random_sae(cfg.d_mlp, "blocks.0.mlp.hook_post"))


def test_top_logit_tokens_in_chunks_equal_the_whole_matrix(model):
    sae = random_sae(model.cfg.d_model, RESID, d_sae=70)
    weights = feature_logit_weights(model, sae)
    promoted, suppressed = top_logit_tokens(model, sae, k=4, features_per_chunk=16)  # 5 chunks
    assert promoted.indices.shape == suppressed.indices.shape == (70, 4)
    torch.testing.assert_close(promoted.values, weights.topk(4, dim=-1).values)
    torch.testing.assert_close(suppressed.values, weights.topk(4, dim=-1, largest=False).values)
    whole = weights.gather(-1, promoted.indices)  # the chosen tokens carry those weights
    torch.testing.assert_close(whole, promoted.values)
    with pytest.raises(ValueError, match="k"):
        top_logit_tokens(model, sae, k=0)  # no token at all: nothing to show


def naive_feature_patch(model, sae, tokens, metric, index, values):
    """One forward per (pos, feature), the feature set by a hook on hook_sae_acts_post."""
    out = []
    for pos, feature in index:

        def set_feature(acts, hook, pos=pos, feature=feature):
            acts[:, pos, feature] = values[:, pos, feature]
            return acts

        name = f"{sae.cfg.hook_name}.hook_sae_acts_post"
        with model.saes([sae], use_error_term=True):
            logits = model.run_with_hooks(tokens, fwd_hooks=[(name, set_feature)])
        out.append(metric(logits))
    return torch.stack(out)


@pytest.mark.parametrize("kind", ["ablate", "clean"])
def test_feature_patch_equals_one_forward_per_feature(model, kind):
    sae = random_sae(model.cfg.d_model, RESID, d_sae=128, architecture="topk", k=8)
    corrupted = model.to_tokens("ROMEO:\nWhat sayst thou")
    clean = model.to_tokens("JULIA:\nWhat sayst thou")
    answer = model.to_single_token("?")

    def metric(logits):
        return logits[0, -1].log_softmax(-1)[answer]

    acts = feature_acts(model, sae, corrupted)
    values = torch.zeros_like(acts) if kind == "ablate" else feature_acts(model, sae, clean)
    changed = (acts != values)[0].nonzero().tolist()
    index = [tuple(row) for row in changed[:: max(1, len(changed) // 40)]]
    assert len(index) >= 20
    exact = feature_patch(
        model, sae, corrupted, metric, index, None if kind == "ablate" else values
    )
    reference = naive_feature_patch(model, sae, corrupted, metric, index, values)
    # The rest of the forward run in a batch or one at a time; a log-probability moves by at
    # most twice its logits' error.
    logits = model(corrupted)
    within = model_tolerance(model.cfg, 2 * logits.abs().max())
    torch.testing.assert_close(exact, reference, **within)
    assert exact.std() > 1e-3


def test_attribution_is_activation_times_gradient():
    # float64, so central differences of the real spliced model are a precise reference
    model = HookedSAETransformer.from_model(interp.load_model("shakespeare-char")).double()
    sae = random_sae(model.cfg.d_model, RESID, d_sae=128).double()
    z_sae = random_sae(128, "blocks.2.attn.hook_z", d_sae=96, reshape_activations="hook_z")
    z_sae = z_sae.double()
    tokens = model.to_tokens("ROMEO:\nWhat say")
    answer = model.to_single_token("s")

    def metric(logits):
        return logits[0, -1, answer]

    result = feature_attribution(model, [sae, z_sae], tokens, metric)
    assert set(result) == {RESID, "blocks.2.attn.hook_z"}
    assert not model.acts_to_saes and not any(p.has_hooks for p in model.hook_points())
    for spliced, (attr, acts) in zip([sae, z_sae], result.values(), strict=True):
        torch.testing.assert_close(acts, feature_acts(model, spliced, tokens))
        name = f"{spliced.cfg.output_hook}.hook_sae_acts_post"
        for pos, feature in (acts[0] > 0).nonzero()[:3].tolist():

            def bump(sign, pos=pos, feature=feature, name=name):
                def hook(a, hook):
                    a[0, pos, feature] += sign * 1e-4
                    return a

                with model.saes([sae, z_sae], use_error_term=True):
                    return metric(model.run_with_hooks(tokens, fwd_hooks=[(name, hook)]))

            gradient = (bump(1) - bump(-1)) / 2e-4
            expected = (acts[0, pos, feature] * gradient).item()
            assert attr[0, pos, feature].item() == pytest.approx(expected, rel=1e-5, abs=1e-9)


def test_spearman():
    cases = [
        ([1.0, 2, 3, 4], [10.0, 20, 30, 40], 1.0),
        ([1.0, 2, 3], [3.0, 2, 1], -1.0),
        ([1.0, 1, 2], [1.0, 1, 2], 1.0),
        ([1.0, 2, 3, 4], [1.0, 3, 2, 4], 0.8),  # 1 - 6 * 2 / (4 * 15)
    ]
    for a, b, expected in cases:
        assert spearman(torch.tensor(a), torch.tensor(b)) == pytest.approx(expected)
