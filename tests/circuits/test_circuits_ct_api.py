"""circuit-tracer's module-level names in interp.circuits (its users change one import):
their numbers against circuit-tracer 0.5.0's own (fixtures written by
circuit_tracer_reference/make_api_fixtures.py), and their errors."""

from __future__ import annotations

from pathlib import Path
from unittest import mock

import pytest
import torch
from torch import nn

from interp.circuits.attribution import attribute
from interp.circuits.attribution.targets import AttributionTargets, CustomTarget, LogitTarget
from interp.circuits.graph import compute_edge_influence, compute_node_influence
from interp.circuits.replacement_model import ReplacementModel
from interp.circuits.replacement_model.replacement_model_transformerlens import (
    TransformerLensReplacementModel,
)
from interp.circuits.transcoder import (
    CrossLayerTranscoder,
    JumpReLU,
    SingleLayerTranscoder,
    TopK,
    TranscoderSet,
    load_clt,
    load_relu_transcoder,
    load_transcoder_set,
)
from interp.circuits.utils import get_default_device
from interp.circuits.utils.disk_offload import (
    cleanup_all_offload_files,
    disk_offload_module,
    offload_modules,
)
from interp.circuits.utils.hf_utils import download_hf_uris, load_transcoder_from_hub
from tests.support.hub_cache import COMMIT, hub_cache  # noqa: F401 (a fixture)
from tests.support.tolerances import tolerance

FIXTURES = Path(__file__).parents[1] / "circuit_tracer_reference" / "api"
EXPECTED = torch.load(FIXTURES / "expected.pt", weights_only=True)
INPUTS = EXPECTED["inputs"]  # [n_layers, pos, d_model]
D_MODEL, D_TC = INPUTS.shape[-1], 16
CPU = torch.device("cpu")


def close(actual: torch.Tensor, expected: torch.Tensor, reduction: int = D_MODEL) -> None:
    """Equal to circuit-tracer's up to float32 rounding of sums of ``reduction`` terms."""
    magnitude = expected.abs().max().clamp(min=1.0)
    tol = tolerance(torch.float32, reduction=reduction, depth=2, magnitude=magnitude)
    torch.testing.assert_close(actual.to_dense() if actual.is_sparse else actual, expected, **tol)


def layer_paths() -> dict[int, Path]:
    return {layer: FIXTURES / f"layer_{layer}.safetensors" for layer in range(2)}


# ----------------------------------------------------------------- transcoders
@pytest.mark.parametrize("lazy", [False, True])
def test_transcoder_set_matches_circuit_tracer(lazy: bool) -> None:
    tcs = load_transcoder_set(
        layer_paths(), "api", "hook_resid_mid", "hook_mlp_out", device=CPU,
        lazy_encoder=lazy, lazy_decoder=lazy,
    )  # fmt: skip
    assert isinstance(tcs, TranscoderSet) and tcs.skip_connection and len(tcs) == 2
    parts = tcs.compute_attribution_components(INPUTS, zero_positions=slice(0, 1))
    for key, expected in EXPECTED["set"].items():
        if key in ("encoder_to_decoder_map", "decoder_locations"):
            assert torch.equal(parts[key], expected), key
        else:
            close(parts[key], expected)
    close(tcs.encode(INPUTS), EXPECTED["set_encode"])
    close(tcs.encode_layer(INPUTS[1], 1, apply_activation_function=False), EXPECTED["set_pre"])
    forward = torch.stack([tcs.decode(tcs.encode(INPUTS), INPUTS)[i] for i in range(2)])
    close(forward, EXPECTED["set_forward"])


def test_single_layer_transcoder_matches_circuit_tracer() -> None:
    tc = load_relu_transcoder(layer_paths()[1], 1, device=CPU, lazy_decoder=True)
    assert "W_dec" not in tc._parameters and isinstance(tc.activation_function, JumpReLU)
    sparse, encoders = tc.encode_sparse(INPUTS[1])
    recon, scaled = tc.decode_sparse(sparse, INPUTS[1])
    expected = EXPECTED["slt_sparse"]
    close(sparse, expected["acts"])
    close(encoders, expected["encoders"])
    close(recon, expected["recon"], reduction=D_TC)
    close(scaled, expected["scaled"])
    close(tc(INPUTS[1])[1:], expected["recon"][1:], reduction=D_TC)  # position 0 not zeroed
    close(tc._get_decoder_vectors(torch.tensor([3, 5])), tc.W_dec[[3, 5]])


def test_set_from_single_layer_transcoders_traces_their_weights() -> None:
    """A {layer: SingleLayerTranscoder} set computes with the transcoders' own weights."""
    tcs = {i: load_relu_transcoder(p, i, device=CPU, lazy_encoder=False, lazy_decoder=False)
           for i, p in layer_paths().items()}  # fmt: skip
    made = TranscoderSet(tcs, "hook_resid_mid", "hook_mlp_out")
    for layer, tc in tcs.items():
        close(made.encode(layer, INPUTS[layer]), tc.encode(INPUTS[layer]))
        close(made[layer].reconstruct(INPUTS[layer], hooked=False), tc(INPUTS[layer]), D_TC)
    with torch.no_grad():  # the set shares the transcoders' weights: edits show in both
        tcs[0].W_enc.mul_(2)
    close(made.encode(0, INPUTS[0]), tcs[0].encode(INPUTS[0]))
    scalar = SingleLayerTranscoder(D_MODEL, D_TC, JumpReLU(torch.tensor(0.25)), 0, device=CPU)
    assert torch.equal(TranscoderSet({0: scalar}, "a", "b")[0].threshold, torch.full((D_TC,), 0.25))
    with pytest.raises(ValueError, match=r"layers \[0, 2\]"):
        TranscoderSet({0: tcs[0], 2: tcs[1]}, "hook_resid_mid", "hook_mlp_out")
    relu = SingleLayerTranscoder(D_MODEL, D_TC, torch.sigmoid, 0, device=CPU)
    with pytest.raises(ValueError, match="ReLU, JumpReLU or TopK"):
        TranscoderSet({0: relu}, "hook_resid_mid", "hook_mlp_out")
    negative = load_relu_transcoder(layer_paths()[0], 0, device=CPU, lazy_encoder=False)
    with torch.no_grad():
        negative.activation_function.threshold[3] = -0.1
    negative_set = TranscoderSet({0: negative}, "hook_resid_mid", "hook_mlp_out")
    item = negative_set[0]  # circuit-tracer's activation_function: a view of the SAE's own
    assert isinstance(item.activation_function, JumpReLU)
    assert item.activation_function.threshold is item.threshold
    assert "activation_function.threshold" not in item.state_dict()
    with pytest.raises(ValueError, match="negative thresholds"):  # refused where it encodes
        negative_set.encode(0, INPUTS[0])
    with torch.no_grad():
        item.activation_function.threshold.clamp_(min=0)  # through the view: now encodes
    assert negative_set.encode(0, INPUTS[0]).shape[-1] == D_TC
    with pytest.raises(ValueError, match="transcoder_path"):
        SingleLayerTranscoder(D_MODEL, D_TC, torch.relu, 0, lazy_decoder=True)


@pytest.mark.parametrize("lazy", [False, True])
def test_cross_layer_transcoder_matches_circuit_tracer(lazy: bool) -> None:
    clt = load_clt(FIXTURES / "clt", device=CPU, lazy_encoder=lazy, lazy_decoder=lazy)
    assert isinstance(clt, CrossLayerTranscoder) and clt.threshold is not None
    parts = clt.compute_attribution_components(INPUTS, zero_positions=slice(0, 1))
    for key, expected in EXPECTED["clt"].items():
        if key in ("encoder_to_decoder_map", "decoder_locations"):
            assert torch.equal(parts[key], expected), key
        else:
            close(parts[key], expected, reduction=2 * D_TC)
    close(clt(INPUTS), EXPECTED["clt_forward"], reduction=2 * D_TC)
    selected = clt.select_decoder_vectors(clt.encode(INPUTS).to_sparse())
    for ours, theirs in zip(selected, EXPECTED["clt_select"], strict=True):
        close(ours.to(theirs.dtype), theirs)


def test_cross_layer_transcoder_constructor_arguments() -> None:
    clt = CrossLayerTranscoder(2, D_TC, D_MODEL, "jump_relu", lazy_decoder=False, device=CPU)
    assert clt.threshold is not None and clt.W_dec is not None and clt.d_model == D_MODEL
    with pytest.raises(ValueError, match="'gelu'"):
        CrossLayerTranscoder(2, D_TC, D_MODEL, "gelu")
    with pytest.raises(ValueError, match="clt_path"):
        CrossLayerTranscoder(2, D_TC, D_MODEL, lazy_decoder=True)


def test_activation_functions_match_circuit_tracer() -> None:
    expected = EXPECTED["activations"]
    assert torch.equal(JumpReLU(expected["threshold"], 0.1)(expected["x"]), expected["jumprelu"])
    assert torch.equal(TopK(4)(expected["x"]), expected["topk"])
    with pytest.raises(ValueError, match="positive int k"):
        TopK(0)


# ------------------------------------------------------------ targets, influence
def test_attribution_targets_match_circuit_tracer() -> None:
    reference = EXPECTED["targets"]

    class Tokenizer:
        vocab_size = 12

        def encode(self, text, add_special_tokens=False):
            return [int(text[1:])] if text[1:].isdigit() else [0, 1]

        def decode(self, token_id):
            return f"t{token_id}"

    custom = [CustomTarget(*target) for target in reference["custom_spec"]]
    specs = {"salient": None, "tensor": torch.tensor([3, 7]), "strings": ["t2", "t9"]}
    specs["custom"] = custom
    for name, spec in specs.items():
        found = AttributionTargets(
            spec, reference["logits"], reference["unembed"], Tokenizer(),
            max_n_logits=4, desired_logit_prob=0.6,
        )  # fmt: skip
        expected = reference[name]
        assert [tuple(t) for t in found.logit_targets] == expected["targets"], name
        assert all(isinstance(t, LogitTarget) for t in found.logit_targets)
        close(found.logit_probabilities, expected["probabilities"])
        close(found.logit_vectors, expected["vectors"])
        assert torch.equal(found.token_ids, expected["token_ids"])
    with pytest.raises(ValueError, match="encoded to 2 tokens"):
        AttributionTargets(["two tokens"], reference["logits"], reference["unembed"], Tokenizer())
    with pytest.raises(TypeError, match="prob must be int or float"):
        AttributionTargets([("x", "0.5", torch.zeros(8))], reference["logits"], None, Tokenizer())


def test_influence_functions_match_circuit_tracer() -> None:
    expected = EXPECTED["influence"]
    close(compute_node_influence(expected["matrix"], expected["weights"]), expected["node"], 81)
    close(compute_edge_influence(expected["matrix"], expected["weights"]), expected["edge"], 81)


# ---------------------------------------------------------------- the model
def tiny_config():
    from interp import HookedTransformerConfig

    return HookedTransformerConfig(
        n_layers=2, d_model=D_MODEL, n_ctx=16, d_head=4, n_heads=2, d_mlp=16, d_vocab=50257,
        act_fn="gelu", tokenizer_name="gpt2", normalization_type="LN", d_vocab_out=50257,
    )  # fmt: skip


def test_from_config_and_setup_attribution_agree_with_the_graph() -> None:
    """from_config builds the model; setup_attribution's activations are the graph's."""
    torch.manual_seed(0)
    tcs = {i: load_relu_transcoder(p, i, device=CPU, lazy_encoder=False, lazy_decoder=False)
           for i, p in layer_paths().items()}  # fmt: skip
    transcoders = TranscoderSet(tcs, "hook_resid_mid", "hook_mlp_out")
    model = ReplacementModel.from_config(tiny_config(), transcoders, backend="nnsight")
    assert isinstance(model, TransformerLensReplacementModel) and model.tokenizer is not None
    tokens = torch.tensor([50256, 3, 9, 4, 17, 2])  # starts with a special token
    context = model.setup_attribution(tokens)
    graph = attribute(tokens, model)
    active = context.activation_matrix.coalesce()
    assert torch.equal(active.indices().T, graph.active_features)
    close(active.values(), graph.activation_values)
    assert context.error_vectors.shape == (2, len(tokens), D_MODEL)
    assert torch.equal(context.token_vectors, model.W_E[tokens])
    with pytest.raises(ValueError, match="backend='tl'"):
        ReplacementModel.from_config(tiny_config(), transcoders, backend="tl")


# ------------------------------------------------------------------- utils
def test_disk_offload_round_trip() -> None:
    module = nn.Linear(4, 3)
    before = module.weight.detach().clone()
    reload = disk_offload_module(module)
    assert module.weight.device.type == "meta"
    reload()
    assert torch.equal(module.weight, before)
    handles = offload_modules(nn.ModuleList([nn.Linear(2, 2), nn.Linear(2, 2)]), "disk")
    assert cleanup_all_offload_files() == len(handles) == 2
    with pytest.raises(ValueError, match="'gpu'"):
        offload_modules(module, "gpu")


def test_download_hf_uris_checks_gated_repositories_first() -> None:
    info = mock.MagicMock(gated="auto")
    path = "interp.circuits.utils.hf_utils"
    with (
        mock.patch(f"{path}.hf_api.repo_info", return_value=info),
        mock.patch(f"{path}.get_token", return_value=None),
        mock.patch(f"{path}.hf_hub_download") as download,
    ):
        with pytest.raises(PermissionError, match="gated"):
            download_hf_uris(["hf://org/repo/layer_0.safetensors"])
        download.assert_not_called()
        info.gated = False
        download.return_value = "/cache/layer_0.safetensors"
        uri = "hf://org/repo/sub/layer_0.safetensors?revision=v1"
        assert download_hf_uris([uri]) == {uri: "/cache/layer_0.safetensors"}
        download.assert_called_once_with(
            repo_id="org/repo", filename="sub/layer_0.safetensors", revision="v1", token=None
        )
    with pytest.raises(ValueError, match="names a repository but no file"):
        download_hf_uris(["hf://org/repo"])


def test_load_transcoder_from_hub_reads_the_cache(hub_cache, tmp_path) -> None:  # noqa: F811
    """(transcoders, config) as circuit-tracer returns them: scan and repository fields."""
    config = tmp_path / "config.yaml"
    config.write_text(
        "model_kind: transcoder_set\nfeature_input_hook: hook_resid_mid\n"
        "feature_output_hook: hook_mlp_out\n"
    )
    files = {"config.yaml": config, **{p.name: p for p in layer_paths().values()}}
    (hub_cache.root / "models--owner--api-transcoders" / "snapshots" / COMMIT / "sub").mkdir(
        parents=True
    )
    hub_cache.add("owner/api-transcoders", {f"sub/{name}": p for name, p in files.items()})
    transcoders, found = load_transcoder_from_hub("owner/api-transcoders/sub", device=CPU)
    assert isinstance(transcoders, TranscoderSet) and len(transcoders) == 2
    assert found["scan"] == transcoders.scan == "owner/api-transcoders//sub"
    assert (found["repo_id"], found["subfolder"]) == ("owner/api-transcoders", "sub")
    expected = load_transcoder_set(layer_paths(), "api", "hook_resid_mid", "hook_mlp_out", CPU)
    close(transcoders.encode(INPUTS), expected.encode(INPUTS))


def test_get_default_device() -> None:
    assert get_default_device().type == ("cuda" if torch.cuda.is_available() else "cpu")
