"""interp.circuits on its own terms: each edge is the effect of its source on its target in
the frozen local replacement model (float64 finite differences through the model's own
hooks, not autograd); bad input fails clearly and leaves the wrapped model as it was;
graphs and transcoder sets round-trip through their files."""

from __future__ import annotations

import pytest
import torch

import interp
from interp import HookedTransformer, HookedTransformerConfig
from interp.circuits import (
    CrossLayerTranscoder,
    Graph,
    ReplacementModel,
    TranscoderSet,
    attribute,
    compute_graph_scores,
    load_transcoders,
    prune_graph,
)
from interp.components import LayerNorm
from interp.sae import SAE, SAEConfig

TOKENS = torch.tensor([0, 5, 17, 3, 29, 11])
SHAPES = {
    "gpt2": dict(act_fn="gelu_new", normalization_type="LN"),
    "llama": dict(
        act_fn="silu",
        normalization_type="RMS",
        positional_embedding_type="rotary",
        rotary_dim=8,
        gated_mlp=True,
        n_key_value_heads=2,
        final_rms=True,
    ),
    "gemma2": dict(
        act_fn="gelu_pytorch_tanh",
        normalization_type="RMS",
        positional_embedding_type="rotary",
        rotary_dim=8,
        gated_mlp=True,
        use_normalization_before_and_after=True,
        attn_scores_soft_cap=50.0,
        output_logits_soft_cap=3.0,
    ),
}
HOOKS = {
    "gpt2": ("ln2.hook_normalized", "hook_mlp_out"),
    "llama": ("mlp.hook_in", "mlp.hook_out"),
    "gemma2": ("hook_resid_mid", "hook_mlp_out"),
}


def tiny_model(shape: str, dtype: torch.dtype = torch.float32, seed: int = 0) -> HookedTransformer:
    torch.manual_seed(seed)
    cfg = HookedTransformerConfig(
        n_layers=2, d_model=32, n_heads=4, d_head=8, d_mlp=64, d_vocab=48, n_ctx=16,
        dtype=dtype, **SHAPES[shape],
    )  # fmt: skip
    model = HookedTransformer(cfg)
    with torch.no_grad():
        for name, param in model.named_parameters():
            if name.endswith(".w"):
                param.copy_(1 + 0.1 * torch.randn_like(param))
            elif name.split(".")[-1].startswith(("b", "_b")):
                param.copy_(0.05 * torch.randn_like(param))
    return model


def tiny_transcoders(
    shape: str, skip: bool, dtype: torch.dtype = torch.float32, b_enc: float = -0.6
) -> TranscoderSet:
    hook_in, hook_out = HOOKS[shape]
    saes = []
    for layer in range(2):
        cfg = SAEConfig(
            d_in=32, d_sae=24, architecture="skip_transcoder" if skip else "transcoder",
            hook_name=f"blocks.{layer}.{hook_in}", hook_name_out=f"blocks.{layer}.{hook_out}",
            apply_b_dec_to_input=False, dtype=str(dtype).removeprefix("torch."),
        )  # fmt: skip
        sae = SAE(cfg)
        with torch.no_grad():
            sae.W_enc.normal_(0, 0.3)
            sae.W_dec.normal_(0, 0.1)
            sae.b_enc.normal_(b_enc, 0.2)
            sae.b_dec.normal_(0, 0.05)
            if skip:
                sae.W_skip.normal_(0, 0.1)
        saes.append(sae)
    return TranscoderSet.from_saes(saes)


def tiny_clt(shape: str, skip: bool, dtype: torch.dtype = torch.float32) -> CrossLayerTranscoder:
    """A random cross-layer transcoder (JumpReLU) for ``tiny_model(shape)``."""
    clt = CrossLayerTranscoder(2, 24, 32, jumprelu=True, skip_connection=skip, dtype=dtype)
    clt.feature_input_hook, clt.feature_output_hook = HOOKS[shape]
    with torch.no_grad():
        clt.W_enc.normal_(0, 0.3)
        clt.b_enc.normal_(-0.6, 0.2)
        clt.b_dec.normal_(0, 0.05)
        clt.threshold.uniform_(0.2, 0.4)
        for decoder in clt.W_dec:
            decoder.normal_(0, 0.1)
        if skip:
            clt.W_skip.normal_(0, 0.1)
    return clt


# ------------------------------------------------------------ finite differences
def as_transcoder_input(model: ReplacementModel, layer: int, hook: str, act: torch.Tensor):
    """What the transcoders read at ``hook``: a LayerNorm's ``ln2.hook_normalized`` before its
    weight and bias, as circuit-tracer (TransformerLens 3) has it; interp's hook point is after
    them, so undo them here (float64: exact enough)."""
    ln2 = model.blocks[layer].ln2
    if hook == "ln2.hook_normalized" and isinstance(ln2, LayerNorm) and ln2.w is not None:
        return (act - ln2.b) / ln2.w
    return act


def frozen_run(model: ReplacementModel, clean: dict, perturb=None):
    """The local replacement model by forward hooks: patterns and norm scales from the clean
    run, each MLP output its skip path plus the clean remainder; ``perturb(name, act)`` adds
    a source's perturbation. Returns the transcoder inputs and the final norm's output."""
    tcs, n_layers = model.transcoders, model.cfg.n_layers
    seen: dict[str, torch.Tensor] = {}
    perturb = perturb or (lambda name, act: act)

    def frozen(act, hook):
        return clean[hook.name]

    def embed(act, hook):
        return perturb("embed", act)

    def record(layer):
        def fn(act, hook=None):
            seen[f"in{layer}"] = as_transcoder_input(model, layer, model.feature_input_hook, act)

        return fn

    def output(layer):
        def fn(act, hook=None):
            x = seen[f"in{layer}"]
            remainder = clean[f"out{layer}"] - tcs.skip(layer, clean[f"in{layer}"])
            return perturb(f"out{layer}", tcs.skip(layer, x) + remainder)

        return fn

    names = [n for n in model.hook_dict if n.endswith(("attn.hook_pattern", "hook_scale"))]
    hooks = [(n, frozen) for n in names] + [("hook_embed", embed)]
    handles = []
    hook_in, hook_out = model.feature_input_hook, model.feature_output_hook
    for layer in range(n_layers):
        mlp = model.blocks[layer].mlp
        if hook_in == "mlp.hook_in":
            handles.append(mlp.register_forward_pre_hook(lambda m, a, f=record(layer): f(a[0])))
        else:
            hooks.append((f"blocks.{layer}.{hook_in}", record(layer)))
        if hook_out == "mlp.hook_out":
            handles.append(mlp.register_forward_hook(lambda m, a, o, f=output(layer): f(o)))
        else:
            hooks.append((f"blocks.{layer}.{hook_out}", output(layer)))
    try:
        with torch.no_grad(), model.hooks(fwd_hooks=hooks):
            final = model.ln_final(model.model(TOKENS[None], stop_at_layer=n_layers))
    finally:
        for handle in handles:
            handle.remove()
    return [seen[f"in{layer}"][0] for layer in range(n_layers)], final[0]


def clean_cache(model: ReplacementModel) -> dict:
    """The clean run's patterns, norm scales and transcoder inputs and outputs, from one
    forward that takes the same (pattern-materialising) path as the frozen runs."""
    clean: dict[str, torch.Tensor] = {}

    def keep(key, layer=None):
        def fn(act, hook=None):
            if key.startswith("in"):
                act = as_transcoder_input(model, layer, model.feature_input_hook, act)
            clean[key] = act

        return fn

    names = [n for n in model.hook_dict if n.endswith(("attn.hook_pattern", "hook_scale"))]
    pairs = [(name, keep(name)) for name in names]
    handles = []
    for layer in range(model.cfg.n_layers):
        mlp = model.blocks[layer].mlp
        hooks = (f"in{layer}", model.feature_input_hook), (f"out{layer}", model.feature_output_hook)
        for key, hook in hooks:
            if hook == "mlp.hook_in":
                handles.append(
                    mlp.register_forward_pre_hook(lambda m, a, f=keep(key, layer): f(a[0]))
                )
            elif hook == "mlp.hook_out":
                handles.append(mlp.register_forward_hook(lambda m, a, o, f=keep(key): f(o)))
            else:
                pairs.append((f"blocks.{layer}.{hook}", keep(key, layer)))
    try:
        with torch.no_grad(), model.hooks(fwd_hooks=pairs):
            model.model(TOKENS[None])
    finally:
        for handle in handles:
            handle.remove()
    return clean


@pytest.mark.parametrize("shape", ["gpt2", "llama", "gemma2"])
@pytest.mark.parametrize("kind", ["skip", "noskip", "clt"])
def test_edges_are_finite_difference_effects(shape: str, kind: str) -> None:
    if kind == "clt":
        transcoders = tiny_clt(shape, skip=shape == "gpt2", dtype=torch.float64)
    else:
        transcoders = tiny_transcoders(shape, kind == "skip", torch.float64)
    model = ReplacementModel.from_model(tiny_model(shape, torch.float64), transcoders)
    graph = attribute(TOKENS, model, batch_size=16)
    assert graph.adjacency_matrix.dtype == torch.float64
    clean = clean_cache(model)
    clean_inputs, clean_final = frozen_run(model, clean)
    n_layers, n_pos = model.cfg.n_layers, len(TOKENS)
    n_features = len(graph.selected_features)
    features = graph.active_features[graph.selected_features]
    error_start, token_start = n_features, n_features + n_layers * n_pos
    logit_start = token_start + n_pos
    tcs, unembed = model.transcoders, model.unembed.W_U

    everything = torch.arange(tcs.d_transcoder)

    def perturbation(source: int):
        """The source's value added where it writes: {hook key: (position, vector)}."""
        if source < error_start:  # a feature: its activation times its decoder rows
            layer, pos, feature = features[source].tolist()
            value = graph.activation_values[graph.selected_features[source]]
            adds = {
                f"out{target}": (pos, value * tcs.decoder_vectors(layer, feature, target))
                for target in tcs.writes_to(layer)
            }
        elif source < token_start:  # an error node: the MLP output the transcoders missed
            target, pos = divmod(source - error_start, n_pos)
            recon = tcs.decoder_bias(target) + tcs.skip(target, clean[f"in{target}"][0])
            for layer in range(target + 1):
                if target in tcs.writes_to(layer):
                    acts = tcs.encode(layer, clean[f"in{layer}"][0])
                    acts[0] = 0
                    recon = recon + acts @ tcs.decoder_vectors(layer, everything, target)
            vector = (clean[f"out{target}"][0] - recon)[pos] * (pos > 0)  # position 0: zero
            adds = {f"out{target}": (pos, vector)}
        else:  # a token: its embedding
            pos = source - token_start
            adds = {"embed": (pos, model.W_E[TOKENS[pos]])}

        def perturb(name, act):
            if name not in adds:
                return act
            act = act.clone()
            act[0, adds[name][0]] += adds[name][1]
            return act

        return perturb

    def value(target: int, inputs, final) -> torch.Tensor:
        if target < n_features:
            layer, pos, feature = features[target].tolist()
            return inputs[layer][pos] @ tcs.encoder_vectors(layer, feature)
        index = graph.logit_targets[target - logit_start].vocab_idx
        return final[-1] @ (unembed[:, index] - unembed.mean(-1))

    A = graph.adjacency_matrix
    checked = 0
    for targets in (range(n_features), range(logit_start, A.shape[0])):
        bounds = (0, error_start, token_start, logit_start)  # features, errors, tokens
        for sources in (range(a, b) for a, b in zip(bounds, bounds[1:], strict=False)):
            block = A[list(targets)][:, list(sources)]
            if not block.abs().max() > 0:
                continue
            flat = block.abs().flatten().argsort(descending=True)[:2].tolist()
            flat.append(len(block.flatten()) // 2)  # and one entry from the middle (maybe 0)
            for index in flat:
                t, s = targets[index // block.shape[1]], sources[index % block.shape[1]]
                inputs, final = frozen_run(model, clean, perturbation(s))
                effect = value(t, inputs, final) - value(t, clean_inputs, clean_final)
                scale = A.abs().max().item()
                eps = torch.finfo(torch.float64).eps
                assert abs(effect.item() - A[t, s].item()) <= 1e3 * eps * scale, (t, s)
                checked += 1
    assert checked >= 12


# ------------------------------------------------------------------- bad input
def model_state(model: HookedTransformer):
    hooks = sum(len(p.fwd_hooks) + len(p.bwd_hooks) for p in model.hook_dict.values())
    torch_hooks = sum(len(m._forward_hooks) + len(m._forward_pre_hooks) for m in model.modules())
    with torch.no_grad():
        logits = model(TOKENS[None])
    flags = [p.requires_grad for p in model.parameters()]
    return hooks, torch_hooks, logits, flags


def assert_unchanged(model: HookedTransformer, before) -> None:
    hooks, torch_hooks, logits, flags = model_state(model)
    assert (hooks, torch_hooks, flags) == (before[0], before[1], before[3])
    assert torch.equal(logits, before[2])


@pytest.mark.parametrize("shape", ["gpt2", "llama"])
def test_bad_input_is_a_clear_error_and_leaves_the_model_unchanged(shape: str) -> None:
    model = tiny_model(shape)
    model.blocks[0].attn.W_Q.requires_grad_(False)  # a flag that must come back as it was
    before = model_state(model)
    with pytest.raises(ValueError, match="width 24 -> 24"):
        wrong = tiny_transcoders(shape, skip=True)
        wide = [SAE(SAEConfig(**{**t.cfg.__dict__, "d_in": 24, "d_out": 24})) for t in wrong]
        ReplacementModel.from_model(model, TranscoderSet.from_saes(wide))
    with pytest.raises(ValueError, match="has 1 layers but the model has 2"):
        one_layer = list(tiny_transcoders(shape, True))[:1]
        ReplacementModel.from_model(model, TranscoderSet(one_layer, *HOOKS[shape]))
    with pytest.raises(ValueError, match="not a hook point"):
        nowhere = TranscoderSet(list(tiny_transcoders(shape, True)), "hook_x", "mlp.hook_out")
        ReplacementModel.from_model(model, nowhere)
    replacement = ReplacementModel.from_model(model, tiny_transcoders(shape, skip=True))
    with pytest.raises(ValueError, match="n_ctx=16"):
        attribute(torch.arange(20) % 40, replacement)
    with pytest.raises(ValueError, match="max_feature_nodes=0"):
        attribute(TOKENS, replacement, max_feature_nodes=0)
    silent = ReplacementModel.from_model(model, tiny_transcoders(shape, True, b_enc=-1e3))
    with pytest.raises(ValueError, match="No transcoder feature is active"):
        attribute(TOKENS, silent)
    targets_and_errors = [  # attribution_targets: what is wrong, the error it gives
        ([("x", 0.5, torch.randn(7))], ValueError, r"vec must be a \[d_model=32\] tensor"),
        ([("x", 0.5, torch.full((32,), float("nan")))], ValueError, "NaN or inf"),
        ([("x", "high", torch.randn(32))], TypeError, r"\(token_str, prob, vec\) tuple"),
        ([("x", 0.5)], TypeError, r"\(token_str, prob, vec\) tuple"),
        (torch.tensor([1.5]), TypeError, "holds token ids; got torch.float32"),
        ([-1], ValueError, r"in \[0, 48\)"),
    ]
    for targets, error, message in targets_and_errors:
        with pytest.raises(error, match=message):
            attribute(TOKENS, replacement, attribution_targets=targets)
    with pytest.raises(ValueError, match="update_interval=0; it must be a positive int"):
        attribute(TOKENS, replacement, max_feature_nodes=3, update_interval=0)
    assert_unchanged(model, before)
    attribute(TOKENS, replacement, batch_size=8)  # a good run leaves it unchanged too
    assert_unchanged(model, before)


# ------------------------------------------------------------------ round trips
def test_graph_and_transcoders_round_trip(tmp_path) -> None:
    transcoders = tiny_transcoders("llama", skip=True)
    transcoders.save(tmp_path / "tc")
    loaded = load_transcoders(tmp_path / "tc")
    assert (loaded.feature_input_hook, loaded.feature_output_hook) == HOOKS["llama"]
    for a, b in zip(transcoders, loaded, strict=True):
        assert a.cfg.architecture == b.cfg.architecture
        for name, param in a.named_parameters():
            assert torch.equal(param, getattr(b, name)), name
    model = ReplacementModel.from_model(tiny_model("llama"), loaded)
    graph = attribute(TOKENS, model, batch_size=8, max_feature_nodes=10)
    assert len(graph.selected_features) == 10
    graph.to_pt(tmp_path / "graph.pt")
    again = Graph.from_pt(tmp_path / "graph.pt")
    assert torch.equal(again.adjacency_matrix, graph.adjacency_matrix)
    assert again.logit_targets == graph.logit_targets
    assert compute_graph_scores(again) == compute_graph_scores(graph)
    assert torch.equal(prune_graph(again).node_mask, prune_graph(graph).node_mask)


def test_batch_size_does_not_change_the_graph() -> None:
    model = ReplacementModel.from_model(tiny_model("gpt2"), tiny_transcoders("gpt2", True))
    one = attribute(TOKENS, model, batch_size=3)
    many = attribute(TOKENS, model, batch_size=512)
    n = one.adjacency_matrix.shape[0]
    atol = 8 * torch.finfo(torch.float32).eps * n**0.5 * one.adjacency_matrix.abs().max()
    torch.testing.assert_close(one.adjacency_matrix, many.adjacency_matrix, rtol=0, atol=atol)


def test_layer_norm_gradient_with_a_frozen_scale_keeps_the_centring() -> None:
    model = tiny_model("gpt2", torch.float64)
    ln = model.blocks[0].ln1
    x = torch.randn(1, 3, 32, dtype=torch.float64, requires_grad=True)
    with model.hooks(fwd_hooks=[("blocks.0.ln1.hook_scale", lambda s, hook: s.detach())]):
        (ln(x) * torch.arange(32.0, dtype=torch.float64)).sum().backward()
    y = x.detach().clone().requires_grad_(True)
    centred = y - y.mean(-1, keepdim=True)
    scale = (centred.pow(2).mean(-1, keepdim=True) + ln.eps).sqrt().detach()
    ((centred / scale * ln.w + ln.b) * torch.arange(32.0, dtype=torch.float64)).sum().backward()
    torch.testing.assert_close(x.grad, y.grad)


def test_from_pretrained_and_a_text_prompt(tmp_path) -> None:
    cfg = HookedTransformerConfig(
        n_layers=2, d_model=32, n_heads=2, d_mlp=64, d_vocab=50257, n_ctx=32, seed=0
    )
    HookedTransformer(cfg, tokenizer="gpt2").save(tmp_path / "tiny")
    transcoders = tiny_transcoders("gemma2", skip=True, b_enc=0.0)  # reads hook_resid_mid
    transcoders.save(tmp_path / "tc")
    replacement = ReplacementModel.from_pretrained(str(tmp_path / "tiny"), str(tmp_path / "tc"))
    prompt = "The cat sat on the mat"
    graph = attribute(prompt, replacement, batch_size=32, max_feature_nodes=30)
    tokenizer = replacement.tokenizer
    expected = [tokenizer.bos_token_id, *tokenizer.encode(prompt, add_special_tokens=False)]
    assert graph.input_tokens.tolist() == expected  # a special token prepended, as circuit-tracer
    assert graph.input_string == tokenizer.decode(graph.input_tokens)
    assert [t.token_str for t in graph.logit_targets] == [
        tokenizer.decode(t.vocab_idx) for t in graph.logit_targets
    ]
    assert graph.logit_probabilities.sum() <= 1 and len(graph.selected_features) == 30
    again = attribute(graph.input_tokens, replacement, batch_size=32, max_feature_nodes=30)
    assert torch.equal(again.adjacency_matrix, graph.adjacency_matrix)
    targets = attribute(prompt, replacement, attribution_targets=[" dog", " cat"])
    assert [t.vocab_idx for t in targets.logit_targets] == [
        tokenizer.encode(" dog")[0],
        tokenizer.encode(" cat")[0],
    ]


def test_circuit_tracers_loading_arguments(tmp_path) -> None:
    """from_pretrained's backend / device / dtype / lazy_* arguments, the
    from_pretrained_and_transcoders name, ensure_tokenized and zero_softcap, as circuit-tracer's
    scripts call them."""
    tiny_model("gemma2").save(tmp_path / "tiny")
    replacement = ReplacementModel.from_pretrained(
        str(tmp_path / "tiny"), tiny_transcoders("gemma2", skip=True), backend="transformerlens",
        device="cpu", dtype=torch.float64, lazy_encoder=True, lazy_decoder=False,
    )  # fmt: skip
    assert replacement.cfg.dtype == replacement.transcoders[0].W_enc.dtype == torch.float64
    transcoders = tiny_transcoders("gemma2", skip=True)
    same = ReplacementModel.from_pretrained_and_transcoders(str(tmp_path / "tiny"), transcoders)
    assert same.cfg.dtype == torch.float32
    nnsight = ReplacementModel.from_pretrained(  # the same model: interp runs both backends
        str(tmp_path / "tiny"), tiny_transcoders("gemma2", skip=True), backend="nnsight"
    )
    assert torch.equal(nnsight(TOKENS[None]), same(TOKENS[None]))
    with pytest.raises(ValueError, match="backend='nnsite'.*transformerlens"):
        ReplacementModel.from_pretrained(str(tmp_path / "tiny"), transcoders, backend="nnsite")
    assert torch.equal(same.ensure_tokenized([0, 5, 17]), torch.tensor([0, 5, 17]))
    capped = same(TOKENS[None])
    with same.zero_softcap():
        uncapped = same(TOKENS[None])
        assert same.cfg.output_logits_soft_cap == 0.0
    assert same.cfg.output_logits_soft_cap == 3.0
    logits = same.unembed(same.ln_final(same(TOKENS[None], stop_at_layer=2)))
    torch.testing.assert_close(logits, capped)
    torch.testing.assert_close(torch.tanh(uncapped / 3.0) * 3.0, capped)


def test_from_pretrained_loads_by_name_with_device_dtype_and_options(tmp_path) -> None:
    """from_pretrained loads as load_named_model does: a shipped name on the device and dtype
    asked for, a folder with from_pretrained_no_processing's options, an unknown name as an
    UnknownModelError; a shipped model given such options is a TypeError naming them."""
    from interp.shipped.by_name import UnknownModelError, load_named_model

    names = ("shakespeare-char", "shakespeare-char-transcoders")
    replacement = ReplacementModel.from_pretrained(*names, device="cpu", dtype=torch.float64)
    assert replacement.cfg.dtype == replacement.transcoders[0].W_enc.dtype == torch.float64
    assert replacement.cfg.normalization_type == "LN"  # not folded
    folder = interp.load_model("shakespeare-char").save(tmp_path / "copy")
    assert load_named_model(str(folder)).cfg.normalization_type == "LN"
    assert load_named_model(str(folder), fold_ln=True).cfg.normalization_type == "LNPre"
    with pytest.raises(TypeError, match="shipped model.*fold_ln"):
        ReplacementModel.from_pretrained(*names, fold_ln=True)
    with pytest.raises(UnknownModelError, match="shakespeare-char"):
        ReplacementModel.from_pretrained("shakespeare-chr", names[1])
