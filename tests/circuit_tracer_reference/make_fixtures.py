"""Reference attribution graphs written by circuit-tracer 0.5.0 (TransformerLens backend),
for ``tests/circuits/test_circuits_reference.py``.

circuit-tracer pins TransformerLens < 4 and an older transformers, so it runs in its own
environment (torch first, from the local wheel, so pip does not fetch another build)::

    python3 -m venv /work/ct-venv
    /work/ct-venv/bin/pip install torch==2.13.0
    /work/ct-venv/bin/pip install circuit-tracer==0.5.0   # TransformerLens 3.2.1, transformers 4.57
    cd /tmp && /work/ct-venv/bin/python /work/main/tests/circuit_tracer_reference/make_fixtures.py

LayerNorm's ``hook_normalized`` is after its weight and bias in TransformerLens 2.x (and
interp) but before them in 3.x; the GPT-2 case here reads ``hook_resid_mid``, and
``make_norm_fixtures.py`` covers every norm x input hook x skip, ``ln2.hook_normalized``
included.

(run it from outside the project: a folder holding ``interp/tokenizers.py`` on ``sys.path``
would shadow the ``tokenizers`` package). It is deterministic and writes only into this
folder: for each tiny model shape (GPT-2: LayerNorm, learned positions; Llama: RMSNorm,
rotary, grouped-query attention, gated SiLU MLP; Gemma 2: sandwich norms, soft caps) the
config (``<family>/config.json``), random weights in TransformerLens layout
(``<family>/model.safetensors``), per-layer transcoder sets with and without a skip
connection in circuit-tracer's format (``<family>/<skip|noskip>/config.yaml`` +
``layer_{i}.safetensors``), a cross-layer transcoder (``<family>/clt/``: ``W_enc_{i}`` and
``W_dec_{i}`` files), and one graph file a case (``<case>.pt``: tensors, lists and
floats only) with the graph, its prune masks and its scores. ``make_graph_files_fixtures.py``
then writes circuit-tracer's graph JSON files and feature interventions on these models.
"""

from __future__ import annotations

import json
from pathlib import Path

import torch
from circuit_tracer import attribute
from circuit_tracer.graph import compute_graph_scores, prune_graph
from circuit_tracer.replacement_model.replacement_model_transformerlens import (
    TransformerLensReplacementModel,
)
from circuit_tracer.utils.caching import load_transcoders_from_cache
from safetensors.torch import save_file
from transformer_lens import HookedTransformer, HookedTransformerConfig

HERE = Path(__file__).resolve().parent
D_TRANSCODER = 32
PROMPT = [0, 5, 17, 3, 29, 11, 40, 8]  # token 0 is the special (bos) token: nothing prepended
COMMON = dict(n_layers=2, d_model=32, n_heads=4, d_head=8, d_mlp=64, d_vocab=48, n_ctx=16)
FAMILIES = {
    "gpt2": (
        dict(COMMON, act_fn="gelu_new", normalization_type="LN"),
        ("hook_resid_mid", "hook_mlp_out"),
        "relu",
    ),
    "llama": (
        dict(
            COMMON,
            act_fn="silu",
            normalization_type="RMS",
            positional_embedding_type="rotary",
            rotary_dim=8,
            gated_mlp=True,
            n_key_value_heads=2,
            final_rms=True,
        ),
        ("mlp.hook_in", "mlp.hook_out"),
        "jumprelu",
    ),
    "gemma2": (
        dict(
            COMMON,
            act_fn="gelu_pytorch_tanh",
            normalization_type="RMS",
            positional_embedding_type="rotary",
            rotary_dim=8,
            gated_mlp=True,
            use_normalization_before_and_after=True,
            attn_scores_soft_cap=50.0,
            output_logits_soft_cap=3.0,
            final_rms=True,
        ),
        ("ln2.hook_normalized", "hook_mlp_out"),
        "jumprelu",
    ),
}


class StubTokenizer:
    """What circuit-tracer asks of a tokenizer when given token ids: token 0 is special."""

    vocab_size = COMMON["d_vocab"]
    bos_token_id = pad_token_id = eos_token_id = 0
    all_special_ids = [0]
    padding_side = "right"

    def decode(self, ids) -> str:
        return " ".join(str(i) for i in torch.as_tensor(ids).flatten().tolist())


def random_weights(model: HookedTransformer, seed: int) -> dict[str, torch.Tensor]:
    """Every parameter drawn from a seeded normal: norms near 1, matrices ~ 1/sqrt(fan-in)."""
    generator = torch.Generator().manual_seed(seed)
    state = {}
    for name, param in model.named_parameters():
        noise = torch.randn(param.shape, generator=generator)
        if name.split(".")[-1] in ("w",):
            value = 1.0 + 0.1 * noise
        elif name.endswith("W_E") or name.endswith("W_pos"):
            value = noise
        elif param.ndim == 1 or name.split(".")[-1].startswith(("b_", "_b_", "b")):
            value = 0.05 * noise
        else:
            value = noise / COMMON["d_model"] ** 0.5
        state[name] = value.contiguous()
    return state


def write_transcoders(
    folder: Path, activation: str, skip: bool, hooks, seed: int, d_model: int = COMMON["d_model"]
) -> None:
    generator = torch.Generator().manual_seed(seed)
    folder.mkdir(parents=True, exist_ok=True)
    for layer in range(COMMON["n_layers"]):

        def randn(*shape):
            return torch.randn(shape, generator=generator)

        tensors = {
            "W_enc": 0.3 * randn(D_TRANSCODER, d_model),
            "W_dec": 0.1 * randn(D_TRANSCODER, d_model),
            "b_enc": -0.6 + 0.2 * randn(D_TRANSCODER),
            "b_dec": 0.05 * randn(d_model),
        }
        if activation == "jumprelu":
            tensors["activation_function.threshold"] = 0.3 + 0.1 * randn(D_TRANSCODER).abs()
        if skip:
            tensors["W_skip"] = 0.1 * randn(d_model, d_model)
        save_file(
            {k: v.contiguous() for k, v in tensors.items()},
            str(folder / f"layer_{layer}.safetensors"),
        )
    config = (
        "model_kind: transcoder_set\n"
        f"feature_input_hook: {hooks[0]}\nfeature_output_hook: {hooks[1]}\n"
        f"scan: tiny-{folder.parent.name}-{folder.name}\n"
    )
    (folder / "config.yaml").write_text(config)


def write_clt(folder: Path, activation: str, hooks, seed: int) -> None:
    """A cross-layer transcoder in circuit-tracer's files: feature i writes to layers >= i."""
    generator = torch.Generator().manual_seed(seed)
    n_layers, d_model = COMMON["n_layers"], COMMON["d_model"]
    folder.mkdir(parents=True, exist_ok=True)
    for i in range(n_layers):

        def randn(*shape):
            return torch.randn(shape, generator=generator)

        enc = {
            f"W_enc_{i}": 0.3 * randn(D_TRANSCODER, d_model),
            f"b_enc_{i}": -0.6 + 0.2 * randn(D_TRANSCODER),
            f"b_dec_{i}": 0.05 * randn(d_model),
        }
        if activation == "jumprelu":
            enc[f"threshold_{i}"] = 0.3 + 0.1 * randn(D_TRANSCODER).abs()
        save_file(enc, str(folder / f"W_enc_{i}.safetensors"))
        dec = {f"W_dec_{i}": 0.1 * randn(D_TRANSCODER, n_layers - i, d_model)}
        save_file(dec, str(folder / f"W_dec_{i}.safetensors"))
    config = (
        "model_kind: cross_layer_transcoder\n"
        f"feature_input_hook: {hooks[0]}\nfeature_output_hook: {hooks[1]}\n"
        f"scan: tiny-{folder.parent.name}-{folder.name}\n"
    )
    (folder / "config.yaml").write_text(config)


def replacement_model(cfg: dict, state: dict, transcoders) -> TransformerLensReplacementModel:
    model = TransformerLensReplacementModel.from_config(
        HookedTransformerConfig(**cfg, dtype=torch.float32, device="cpu"), transcoders
    )
    renamed = {}
    for name, value in state.items():
        name = name.replace(".mlp.", ".mlp.old_mlp.").replace("unembed.", "unembed.old_unembed.")
        renamed[name] = value
    missing, unexpected = model.load_state_dict(renamed, strict=False)
    assert not unexpected, unexpected
    buffers = ("IGNORE", "mask", "rotary", "transcoders.")
    assert all(any(b in k for b in buffers) for k in missing), missing
    model.tokenizer = StubTokenizer()
    return model


def graph_record(graph, kwargs: dict) -> dict:
    """What a fixture keeps of a graph: its tensors, prune masks (0.8 / 0.98) and scores."""
    node_mask, edge_mask, cumulative = prune_graph(graph, node_threshold=0.8, edge_threshold=0.98)
    replacement, completeness = compute_graph_scores(graph)
    print(
        f"{len(graph.selected_features)}/{len(graph.active_features)} features, "
        f"{graph.adjacency_matrix.shape[0]} nodes, scores {replacement:.4f} {completeness:.4f}"
    )
    return {
        "kwargs": kwargs,
        "input_tokens": graph.input_tokens.cpu(),
        "active_features": graph.active_features.cpu(),
        "activation_values": graph.activation_values.cpu(),
        "selected_features": graph.selected_features.cpu(),
        "adjacency_matrix": graph.adjacency_matrix.cpu(),
        "logit_token_ids": [t.vocab_idx for t in graph.logit_targets],
        "logit_probabilities": graph.logit_probabilities.cpu(),
        "node_mask": node_mask.cpu(),
        "edge_mask": edge_mask.cpu(),
        "cumulative_scores": cumulative.cpu(),
        "replacement_score": replacement,
        "completeness_score": completeness,
    }


def write_case(name: str, model, **kwargs) -> None:
    print(name, end=": ")
    graph = attribute(torch.tensor(PROMPT), model, **kwargs)
    torch.save(graph_record(graph, kwargs), HERE / f"{name}.pt")


def main() -> None:
    torch.set_grad_enabled(True)
    for seed, (family, (cfg, hooks, activation)) in enumerate(FAMILIES.items()):
        folder = HERE / family
        folder.mkdir(exist_ok=True)
        (folder / "config.json").write_text(json.dumps(cfg, indent=2))
        state = random_weights(HookedTransformer(HookedTransformerConfig(**cfg)), seed)
        save_file(state, str(folder / "model.safetensors"))
        for variant in ("skip", "noskip", "clt"):
            if variant == "clt":
                write_clt(folder / variant, activation, hooks, 200 + seed)
            else:
                write_transcoders(
                    folder / variant, activation, variant == "skip", hooks, 100 + seed
                )
            transcoders, _ = load_transcoders_from_cache(
                variant, cache_dir=folder, device=torch.device("cpu"), lazy_decoder=False
            )
            model = replacement_model(cfg, state, transcoders)
            write_case(f"{family}_{variant}", model, batch_size=64)
            if variant != "noskip":
                write_case(f"{family}_{variant}_partial", model, batch_size=4, max_feature_nodes=25)


if __name__ == "__main__":
    main()
