"""``FrozenBackward`` (the written-out backward pass of the frozen replacement model) gives
the graph that ``torch.autograd`` gives through the linearized forward, in float64, for
every block layout, norm, attention variant and transcoder hook it covers; what it does not
cover falls back to autograd."""

from __future__ import annotations

import pytest
import torch

from interp import HookedTransformer, HookedTransformerConfig
from interp.circuits import (
    CrossLayerTranscoder,
    ReplacementModel,
    TranscoderSet,
    attribute,
    attribution,
    backward,
)
from interp.sae import SAE, SAEConfig

TOKENS = torch.tensor([0, 5, 17, 3, 29, 11, 40, 8])
RMS = dict(normalization_type="RMS", positional_embedding_type="rotary", rotary_dim=8)
LAYOUTS = {  # name: (config fields, transcoder input hook, output hook)
    "gpt2": (dict(act_fn="gelu_new", normalization_type="LN"), "ln2.hook_normalized",
             "hook_mlp_out"),
    "gpt2_mlp_in": (dict(act_fn="gelu_new", normalization_type="LN", use_hook_mlp_in=True),
                    "hook_mlp_in", "hook_mlp_out"),
    "llama_gqa": (dict(RMS, act_fn="silu", gated_mlp=True, n_key_value_heads=2, final_rms=True),
                  "mlp.hook_in", "mlp.hook_out"),
    "llama_normalized": (dict(RMS, act_fn="silu", gated_mlp=True), "ln2.hook_normalized",
                         "hook_mlp_out"),
    "gemma2_resid_mid": (dict(RMS, act_fn="gelu_pytorch_tanh", gated_mlp=True,
                              use_normalization_before_and_after=True, rmsnorm_uses_offset=True,
                              attn_scores_soft_cap=50.0, output_logits_soft_cap=3.0),
                         "hook_resid_mid", "hook_mlp_out"),
    "gemma2_mlp_hooks": (dict(RMS, act_fn="gelu_pytorch_tanh", gated_mlp=True,
                              use_normalization_before_and_after=True, rmsnorm_uses_offset=True),
                         "mlp.hook_in", "mlp.hook_out"),
    "olmo2_post_norms": (dict(RMS, act_fn="silu", gated_mlp=True, use_post_norms_only=True),
                         "mlp.hook_in", "mlp.hook_out"),
    "neox_parallel": (dict(act_fn="gelu", normalization_type="LN", parallel_attn_mlp=True,
                           positional_embedding_type="rotary", rotary_dim=4),
                      "mlp.hook_in", "hook_mlp_out"),
    "ln_pre": (dict(act_fn="gelu_new", normalization_type="LNPre"), "mlp.hook_in", "hook_mlp_out"),
    "rms_pre": (dict(RMS, act_fn="silu", normalization_type="RMSPre"), "mlp.hook_in",
                "mlp.hook_out"),
    "sinks": (dict(RMS, act_fn="silu", gated_mlp=True, use_attn_sinks=True), "mlp.hook_in",
              "mlp.hook_out"),
    "moe": (dict(RMS, act_fn="silu", gated_mlp=True, num_experts=4, experts_per_token=2),
            "mlp.hook_in", "mlp.hook_out"),
}  # fmt: skip


def model_for(layout: str, n_layers: int = 3) -> HookedTransformer:
    torch.manual_seed(0)
    fields = LAYOUTS[layout][0]
    cfg = HookedTransformerConfig(
        n_layers=n_layers, d_model=32, n_heads=4, d_head=8, d_mlp=64, d_vocab=48, n_ctx=16,
        dtype=torch.float64, **fields,
    )  # fmt: skip
    model = HookedTransformer(cfg)
    with torch.no_grad():
        for name, param in model.named_parameters():
            if name.endswith(".w"):
                param.copy_(0.9 + 0.2 * torch.rand_like(param))
            elif name.split(".")[-1].startswith(("b", "_b", "W_sinks")):
                param.copy_(0.1 * torch.randn_like(param))
    return model


def transcoders_for(layout: str, skip: bool, n_layers: int = 3) -> TranscoderSet:
    _, hook_in, hook_out = LAYOUTS[layout]
    saes = []
    for layer in range(n_layers):
        sae = SAE(SAEConfig(
            d_in=32, d_sae=24, architecture="skip_transcoder" if skip else "transcoder",
            hook_name=f"blocks.{layer}.{hook_in}", hook_name_out=f"blocks.{layer}.{hook_out}",
            apply_b_dec_to_input=False, dtype="float64",
        ))  # fmt: skip
        with torch.no_grad():
            sae.W_enc.normal_(0, 0.3)
            sae.W_dec.normal_(0, 0.1)
            sae.b_enc.normal_(-0.4, 0.2)
            if skip:
                sae.W_skip.normal_(0, 0.2)
        saes.append(sae)
    return TranscoderSet.from_saes(saes)


def both_graphs(model: ReplacementModel, monkeypatch: pytest.MonkeyPatch, **kwargs):
    """(FrozenBackward's graph, autograd's graph) of TOKENS."""
    assert backward.unsupported(model) is None
    written_out = attribute(TOKENS, model, batch_size=5, **kwargs)
    with monkeypatch.context() as patch:
        patch.setattr(attribution, "unsupported", lambda model: "the test's choice")
        by_autograd = attribute(TOKENS, model, batch_size=7, **kwargs)
    return written_out, by_autograd


def assert_same_graph(written_out, by_autograd) -> None:
    assert torch.equal(written_out.active_features, by_autograd.active_features)
    assert torch.equal(written_out.selected_features, by_autograd.selected_features)
    a, b = written_out.adjacency_matrix, by_autograd.adjacency_matrix
    assert a.dtype == torch.float64 and b.abs().max() > 0.1
    # float64, sums of a few hundred products a layer: far below 1e-12 of the largest entry
    torch.testing.assert_close(a, b, rtol=0, atol=1e-12 * b.abs().max().item())


@pytest.mark.parametrize("skip", [True, False], ids=["skip", "noskip"])
@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_written_out_backward_equals_autograd(layout, skip, monkeypatch) -> None:
    model = ReplacementModel.from_model(model_for(layout), transcoders_for(layout, skip))
    assert_same_graph(*both_graphs(model, monkeypatch))


def test_partial_graph_equals_autograd(monkeypatch) -> None:
    """max_feature_nodes: the same features visited, in batches of mixed layers and positions."""
    model = ReplacementModel.from_model(model_for("llama_gqa"), transcoders_for("llama_gqa", True))
    written_out, by_autograd = both_graphs(model, monkeypatch, max_feature_nodes=9)
    assert len(written_out.selected_features) == 9
    assert_same_graph(written_out, by_autograd)


@pytest.mark.parametrize("skip", [True, False], ids=["skip", "noskip"])
def test_cross_layer_transcoder_equals_autograd(skip, monkeypatch) -> None:
    clt = CrossLayerTranscoder(3, 24, 32, jumprelu=True, skip_connection=skip, dtype=torch.float64)
    clt.feature_input_hook, clt.feature_output_hook = "mlp.hook_in", "mlp.hook_out"
    with torch.no_grad():
        clt.W_enc.normal_(0, 0.3)
        clt.b_enc.normal_(-0.4, 0.2)
        clt.threshold.uniform_(0.05, 0.2)
        for decoder in clt.W_dec:
            decoder.normal_(0, 0.1)
        if skip:
            clt.W_skip.normal_(0, 0.2)
    model = ReplacementModel.from_model(model_for("gemma2_mlp_hooks"), clt)
    assert_same_graph(*both_graphs(model, monkeypatch))


def test_what_it_does_not_cover_runs_by_autograd() -> None:
    """Per-head attention inputs and hooks the user attached: autograd, and the same graph
    as the model without them (the hook reads only)."""
    split = model_for("gpt2")
    split.cfg.use_split_qkv_input = True
    for block in split.blocks:
        block.sync_opt_in_hooks()
    tcs = transcoders_for("gpt2", True)
    replacement = ReplacementModel.from_model(split, tcs)
    assert "use_split_qkv_input" in backward.unsupported(replacement)
    plain = ReplacementModel.from_model(model_for("gpt2"), tcs)
    expected = attribute(TOKENS, plain).adjacency_matrix
    by_autograd = attribute(TOKENS, replacement).adjacency_matrix
    torch.testing.assert_close(by_autograd, expected, rtol=0, atol=1e-12 * expected.abs().max())

    seen = []
    plain.model.blocks[1].hook_resid_pre.add_hook(lambda act, hook: seen.append(1))
    assert "hooks attached" in backward.unsupported(plain)
    hooked = attribute(TOKENS, plain).adjacency_matrix
    assert seen
    torch.testing.assert_close(hooked, expected, rtol=0, atol=1e-12 * expected.abs().max())
    plain.model.reset_hooks()
    assert backward.unsupported(plain) is None


def test_a_spliced_sae_runs_by_autograd(monkeypatch) -> None:
    """An SAE spliced into the model (no error term) changes the gradient path, which only
    autograd follows: the written-out backward would give another graph."""
    from interp.sae import HookedSAETransformer

    base = model_for("gpt2")
    model = HookedSAETransformer(base.cfg)
    model.load_state_dict(base.state_dict())
    replacement = ReplacementModel.from_model(model, transcoders_for("gpt2", True))
    sae = SAE(SAEConfig(d_in=32, d_sae=16, hook_name="blocks.1.hook_resid_pre", dtype="float64"))
    with torch.no_grad():
        sae.W_enc.normal_(0, 0.3)
        sae.W_dec.normal_(0, 0.3)
    model.add_sae(sae)
    assert "SAEs spliced" in backward.unsupported(replacement)
    through_sae = attribute(TOKENS, replacement).adjacency_matrix
    monkeypatch.setattr(attribution, "unsupported", lambda model: None)
    past_sae = attribute(TOKENS, replacement).adjacency_matrix
    assert (through_sae - past_sae).abs().max() > 1e-3 * through_sae.abs().max()
    model.reset_saes()
    assert backward.unsupported(replacement) is None


def _family_checkpoints() -> dict:
    """Every family case of the parity tests: name -> a function saving its checkpoint."""
    from tests.loading import (
        test_families2_parity,
        test_families_gpt_oss_parity,
        test_families_moe_parity,
        test_families_parity,
    )

    saves = {}
    for module in (test_families_parity, test_families2_parity, test_families_moe_parity):
        for case in module.CASES:
            saves[case] = lambda folder, module=module, case=case: module.saved(folder, case)
    for case in test_families_gpt_oss_parity.CASES:
        saves[case] = lambda folder, case=case: test_families_gpt_oss_parity.make(
            case
        ).save_pretrained(folder)
    return saves


FAMILY_CHECKPOINTS = _family_checkpoints()


@pytest.mark.parametrize("case", sorted(FAMILY_CHECKPOINTS))
def test_every_family_checkpoint_equals_autograd(case, tmp_path, monkeypatch) -> None:
    """Each architecture as loaded from a Hugging Face checkpoint (its norms, blocks and
    attention as interp builds them), with skip transcoders on its MLPs, in float64."""
    FAMILY_CHECKPOINTS[case](tmp_path)
    model = HookedTransformer.from_pretrained_no_processing(
        tmp_path, tokenizer=None, dtype=torch.float64
    )
    cfg = model.cfg
    torch.manual_seed(1)
    saes = []
    for layer in range(cfg.n_layers):
        sae = SAE(SAEConfig(
            d_in=cfg.d_model, d_sae=32, architecture="skip_transcoder",
            hook_name=f"blocks.{layer}.mlp.hook_in", hook_name_out=f"blocks.{layer}.mlp.hook_out",
            apply_b_dec_to_input=False, dtype="float64",
        ))  # fmt: skip
        with torch.no_grad():
            sae.W_enc.normal_(0, 1.5 / cfg.d_model**0.5)
            sae.W_dec.normal_(0, 0.3)
            sae.W_skip.normal_(0, 1 / cfg.d_model**0.5)
        saes.append(sae)
    replacement = ReplacementModel.from_model(model, TranscoderSet.from_saes(saes))
    tokens = torch.arange(1, 9) % cfg.d_vocab
    written_out = attribute(tokens, replacement, batch_size=16)
    with monkeypatch.context() as patch:
        patch.setattr(attribution, "unsupported", lambda model: "the test's choice")
        by_autograd = attribute(tokens, replacement, batch_size=16)
    assert len(written_out.active_features) > 0
    assert_same_graph(written_out, by_autograd)
