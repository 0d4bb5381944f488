"""Reference numbers for ``tests/circuits/test_circuits_ct_api.py``, written by circuit-tracer
0.5.0's own module-level API (its transcoder classes and loaders, ``AttributionTargets``, the
influence functions), on small random weights written here too (``api/``).

Run it in circuit-tracer's environment (see make_fixtures.py), from outside the project::

    cd /tmp && /work/ct-venv/bin/python \
        /work/main/tests/circuit_tracer_reference/make_api_fixtures.py

It is deterministic (seeded) and writes only into ``api/``: ``layer_{0,1}.safetensors`` (a
JumpReLU skip transcoder set, circuit-tracer's layout), ``clt/`` (a JumpReLU CLT's
``W_enc_{i}`` / ``W_dec_{i}`` files) and ``expected.pt`` (inputs and circuit-tracer's outputs).
"""

from __future__ import annotations

from pathlib import Path

import torch
from safetensors.torch import save_file

OUT = Path(__file__).resolve().parent / "api"
N_LAYERS, D_MODEL, D_TC, N_POS, D_VOCAB = 2, 8, 16, 5, 12


def write_weights(generator: torch.Generator) -> None:
    def randn(*shape: int, scale: float = 1.0) -> torch.Tensor:
        return torch.randn(*shape, generator=generator) * scale

    for layer in range(N_LAYERS):
        state = {
            "W_enc": randn(D_TC, D_MODEL, scale=0.5), "W_dec": randn(D_TC, D_MODEL, scale=0.3),
            "b_enc": randn(D_TC, scale=0.3), "b_dec": randn(D_MODEL, scale=0.1),
            "W_skip": randn(D_MODEL, D_MODEL, scale=0.2),
            "activation_function.threshold": torch.rand(D_TC, generator=generator) * 0.3,
        }  # fmt: skip
        save_file(state, str(OUT / f"layer_{layer}.safetensors"))
    (OUT / "clt").mkdir(exist_ok=True)
    for i in range(N_LAYERS):
        enc = {
            f"W_enc_{i}": randn(D_TC, D_MODEL, scale=0.5), f"b_enc_{i}": randn(D_TC, scale=0.3),
            f"b_dec_{i}": randn(D_MODEL, scale=0.1),
            f"threshold_{i}": torch.rand(D_TC, generator=generator) * 0.3,
        }  # fmt: skip
        save_file(enc, str(OUT / "clt" / f"W_enc_{i}.safetensors"))
        dec = {f"W_dec_{i}": randn(D_TC, N_LAYERS - i, D_MODEL, scale=0.3)}
        save_file(dec, str(OUT / "clt" / f"W_dec_{i}.safetensors"))


def main() -> None:
    from circuit_tracer.attribution.targets import AttributionTargets, CustomTarget
    from circuit_tracer.graph import compute_edge_influence, compute_node_influence
    from circuit_tracer.transcoder.activation_functions import JumpReLU, TopK
    from circuit_tracer.transcoder.cross_layer_transcoder import load_clt
    from circuit_tracer.transcoder.single_layer_transcoder import load_transcoder_set

    OUT.mkdir(exist_ok=True)
    generator = torch.Generator().manual_seed(30)
    write_weights(generator)
    cpu = torch.device("cpu")
    inputs = torch.randn(N_LAYERS, N_POS, D_MODEL, generator=generator)
    expected: dict[str, object] = {"inputs": inputs}

    paths = {layer: str(OUT / f"layer_{layer}.safetensors") for layer in range(N_LAYERS)}
    tcs = load_transcoder_set(
        paths, "api", "hook_resid_mid", "hook_mlp_out", device=cpu, lazy_decoder=True
    )
    parts = tcs.compute_attribution_components(inputs, zero_positions=slice(0, 1))
    expected["set"] = {
        key: value.to_dense() if value.is_sparse else value for key, value in parts.items()
    }
    expected["set_forward"] = torch.stack([tc(inputs[i]) for i, tc in enumerate(tcs)])
    expected["set_encode"] = tcs.encode(inputs)
    expected["set_pre"] = tcs.encode_layer(inputs[1], 1, apply_activation_function=False)
    sparse, encoders = tcs[1].encode_sparse(inputs[1])
    recon, scaled = tcs[1].decode_sparse(sparse, inputs[1])
    expected["slt_sparse"] = {
        "acts": sparse.to_dense(),
        "encoders": encoders,
        "recon": recon,
        "scaled": scaled,
    }

    clt = load_clt(str(OUT / "clt"), device=cpu, dtype=torch.float32, lazy_decoder=True)
    parts = clt.compute_attribution_components(inputs, zero_positions=slice(0, 1))
    expected["clt"] = {
        key: value.to_dense() if value.is_sparse else value for key, value in parts.items()
    }
    expected["clt_forward"] = clt(inputs)
    expected["clt_select"] = clt.select_decoder_vectors(clt.encode(inputs).to_sparse())

    x = torch.randn(3, D_TC, generator=generator)
    threshold = torch.rand(D_TC, generator=generator) * 0.5
    expected["activations"] = {"x": x, "threshold": threshold}
    expected["activations"].update(jumprelu=JumpReLU(threshold, 0.1)(x), topk=TopK(4)(x))

    matrix = torch.randn(9, 9, generator=generator).tril(-1)
    matrix[:, -2:] = 0  # the last two nodes are the logits: nothing reads them
    weights = torch.zeros(9)
    weights[-2:] = torch.tensor([0.7, 0.3])
    expected["influence"] = {"matrix": matrix, "weights": weights}
    expected["influence"]["node"] = compute_node_influence(matrix, weights)
    expected["influence"]["edge"] = compute_edge_influence(matrix, weights)

    class Tokenizer:  # token i is "t{i}"
        vocab_size = D_VOCAB

        def encode(self, text, add_special_tokens=False):
            return [int(text[1:])] if text[1:].isdigit() else [0, 1]

        def decode(self, token_id):
            return f"t{token_id}"

    logits = torch.randn(D_VOCAB, generator=generator)
    unembed = torch.randn(D_MODEL, D_VOCAB, generator=generator)
    custom = [CustomTarget("a-b", 0.6, torch.randn(D_MODEL, generator=generator))]
    targets = {}
    for name, spec in [("salient", None), ("tensor", torch.tensor([3, 7])),
                       ("strings", ["t2", "t9"]), ("custom", custom)]:  # fmt: skip
        found = AttributionTargets(spec, logits, unembed, Tokenizer(), max_n_logits=4,
                                   desired_logit_prob=0.6)  # fmt: skip
        targets[name] = {
            "targets": [tuple(t) for t in found.logit_targets],
            "probabilities": found.logit_probabilities,
            "vectors": found.logit_vectors,
            "token_ids": found.token_ids,
        }
    plain = [tuple(target) for target in custom]  # readable without circuit-tracer
    expected["targets"] = {"logits": logits, "unembed": unembed, "custom_spec": plain, **targets}
    torch.save(expected, OUT / "expected.pt")
    print("wrote", sorted(p.name for p in OUT.iterdir()))


if __name__ == "__main__":
    main()
