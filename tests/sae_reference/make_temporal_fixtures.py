"""Write SAELens 6.45.3's TemporalSAE outputs for tests/sae/test_sae_temporal.py.

Run with SAELens installed (see make_fixtures.py for the venv):

    /tmp/saelens-venv/bin/python tests/sae_reference/make_temporal_fixtures.py

For each case in CASES it builds a random float32 ``TemporalSAE`` (d_in 16, d_sae 32; a
random ``b_dec`` so its use shows), runs an input [2, 6, 16] and saves, in
``temporal/<case>.safetensors``, the SAE's state dict, the input, ``encode_with_predictions``
(novel and predicted codes), ``decode`` of the novel codes and ``forward``; the config's
dict is the file's ``cfg`` metadata. The untied case is also saved with SAELens's
``save_model`` into ``temporal/untied_folder/``.
"""

import json
from pathlib import Path

import torch
from sae_lens.saes.temporal_sae import TemporalSAE, TemporalSAEConfig
from safetensors.torch import save_file

HERE = Path(__file__).parent
BASE = {"d_in": 16, "d_sae": 32, "n_heads": 2, "bottleneck_factor": 4}
CASES = {
    "tied_topk": {"kval_topk": 5},
    "untied_relu_two_layers": {
        "tied_weights": False,
        "sae_diff_type": "relu",
        "n_attn_layers": 2,
        "apply_b_dec_to_input": False,
    },
    "scalar_rescale": {
        "kval_topk": 8,
        "normalize_activations": "constant_scalar_rescale",
        "activation_normalization_factor": 0.25,
    },
}


def main():
    for name, kwargs in CASES.items():
        torch.manual_seed(0)
        sae = TemporalSAE(TemporalSAEConfig(**BASE, **kwargs))
        with torch.no_grad():
            sae.b_dec.normal_()
        x = torch.randn(2, 6, BASE["d_in"])
        with torch.no_grad():
            z_novel, z_pred = sae.encode_with_predictions(x)
            tensors = {
                **{f"state.{key}": value for key, value in sae.state_dict().items()},
                "x": x,
                "z_novel": z_novel,
                "z_pred": z_pred,
                "decode": sae.decode(z_novel),
                "forward": sae(x),
            }
        out = HERE / "temporal" / f"{name}.safetensors"
        save_file(
            {k: v.contiguous() for k, v in tensors.items()},
            out,
            metadata={"cfg": json.dumps(sae.cfg.to_dict())},
        )
        print(f"wrote {out}")
        if name == "untied_relu_two_layers":
            sae.save_model(HERE / "temporal" / "untied_folder")


if __name__ == "__main__":
    main()
