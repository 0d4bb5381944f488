"""Write SAELens 6.45.3's MatchingPursuitSAE outputs for tests/sae/test_sae_matching_pursuit.py.

Run with SAELens installed (see make_fixtures.py for the venv):

    /tmp/saelens-venv/bin/python tests/sae_reference/make_matching_pursuit_fixtures.py

For each case in CASES it builds a random float32 ``MatchingPursuitSAE`` (d_in 16, d_sae 48,
unit-norm decoder rows as training leaves them, a random ``b_dec``), runs an input
[3, 4, 16] and saves, in ``matching_pursuit/<case>.safetensors``, the state dict, the
input, ``encode``, ``decode`` of the codes and ``forward``; the config's dict is the file's
``cfg`` metadata. The default case is also saved with ``save_model`` into
``matching_pursuit/default_folder/``. ``matching_pursuit/training.safetensors`` holds a
``MatchingPursuitTrainingSAE``'s state and one logging ``training_forward_pass`` on a batch
[6, 16]: its output, features, loss and metrics.
"""

import json
from pathlib import Path

import torch
from sae_lens.saes.matching_pursuit_sae import (
    MatchingPursuitSAE,
    MatchingPursuitSAEConfig,
    MatchingPursuitTrainingSAE,
    MatchingPursuitTrainingSAEConfig,
)
from sae_lens.saes.sae import TrainStepInput
from safetensors.torch import save_file

HERE = Path(__file__).parent / "matching_pursuit"
BASE = {"d_in": 16, "d_sae": 48}
CASES = {
    "default": {},
    "no_early_stop": {
        "residual_threshold": 0.0,
        "stop_on_duplicate_support": False,
        "max_iterations": 5,
    },
    "threshold_only": {"residual_threshold": 0.5, "stop_on_duplicate_support": False},
    "b_dec_not_applied": {"apply_b_dec_to_input": False, "max_iterations": 7},
}


def main():
    for name, kwargs in CASES.items():
        torch.manual_seed(0)
        sae = MatchingPursuitSAE(MatchingPursuitSAEConfig(**BASE, **kwargs))
        with torch.no_grad():
            sae.W_dec.data = sae.W_dec / sae.W_dec.norm(dim=-1, keepdim=True)
            sae.b_dec.normal_(std=0.1)
        x = torch.randn(3, 4, BASE["d_in"])
        with torch.no_grad():
            codes = sae.encode(x)
            tensors = {
                **{f"state.{key}": value for key, value in sae.state_dict().items()},
                "x": x,
                "encode": codes,
                "decode": sae.decode(codes),
                "forward": sae(x),
            }
        out = HERE / f"{name}.safetensors"
        save_file(
            {k: v.contiguous() for k, v in tensors.items()},
            out,
            metadata={"cfg": json.dumps(sae.cfg.to_dict())},
        )
        print(f"wrote {out}")
        if name == "default":
            sae.save_model(HERE / "default_folder")

    write_training()


def write_training():
    torch.manual_seed(1)
    cfg = MatchingPursuitTrainingSAEConfig(**BASE, decoder_init_norm=1.0, residual_threshold=0.3)
    sae = MatchingPursuitTrainingSAE(cfg)
    with torch.no_grad():
        sae.b_dec.normal_(std=0.1)
    sae_in = torch.randn(6, BASE["d_in"])
    out = sae.training_forward_pass(TrainStepInput(sae_in, {}, None, 0, True))
    tensors = {
        **{f"state.{key}": value for key, value in sae.state_dict().items()},
        "sae_in": sae_in,
        "sae_out": out.sae_out,
        "feature_acts": out.feature_acts,
        "loss": out.loss,
        **{f"metric.{key}": torch.as_tensor(value) for key, value in out.metrics.items()},
    }
    save_file(
        {k: v.detach().contiguous() for k, v in tensors.items()},
        HERE / "training.safetensors",
        metadata={"cfg": json.dumps(cfg.to_dict())},
    )


if __name__ == "__main__":
    main()
