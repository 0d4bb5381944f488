"""Write SAELens 6.45.3's TemporalSAE outputs for tests/sae/test_sae_saelens_temporal.py: the
paths make_temporal_fixtures.py's cases leave out (the base normalisations, hook_z inputs,
an SAE moved to float64).

Run with SAELens installed (a venv with torch 2.13.0 and sae-lens 6.45.3):

    /work/sl-venv/bin/python tests/sae_reference/make_temporal_extra_fixtures.py

For each case in CASES it builds a random float32 ``TemporalSAE`` (d_in 16, d_sae 32; a
random ``b_dec``), optionally ``.to(torch.float64)``, runs an input (``[2, 6, 16]``, or
``[2, 6, 4, 4]`` for hook_z) and saves, in ``temporal_extra/<case>.safetensors``, the state
dict, the input, the novel and predicted codes, ``decode`` of the novel codes (after an
encode, which the norm-keeping normalisations need) and ``forward``; the config's dict
(after ``.to``) is the file's ``cfg`` metadata.

``canrager/`` holds a TemporalSAE folder as canrager/temporalSAEs has them
(``layer_3/temporal/conf.yaml`` + ``latest_ckpt.safetensors``: ``D``, ``E``, ``b``,
``attn_layers.*``) and ``expected.safetensors``: an input and the ``forward`` of the SAE that
SAELens's ``temporal_sae_huggingface_loader`` reads from that folder.
"""

import json
from pathlib import Path

import torch
import yaml
from sae_lens.loading import pretrained_sae_loaders
from sae_lens.saes.temporal_sae import TemporalSAE, TemporalSAEConfig
from safetensors.torch import save_file

HERE = Path(__file__).parent
BASE = {"d_in": 16, "d_sae": 32, "n_heads": 2, "bottleneck_factor": 4, "kval_topk": 6}
CASES = {
    "layer_norm": {"normalize_activations": "layer_norm"},
    "constant_norm_rescale": {"normalize_activations": "constant_norm_rescale"},
    "hook_z": {"reshape_activations": "hook_z", "tied_weights": False},
    "tied_float64": {"to": torch.float64},
}


def main():
    for name, kwargs in CASES.items():
        kwargs = dict(kwargs)
        dtype = kwargs.pop("to", None)
        torch.manual_seed(0)
        sae = TemporalSAE(TemporalSAEConfig(**BASE, **kwargs))
        with torch.no_grad():
            sae.b_dec.normal_()
        if dtype is not None:
            sae = sae.to(dtype)
        shape = (2, 6, 4, 4) if name == "hook_z" else (2, 6, 16)
        x = torch.randn(shape).to(sae.W_dec.dtype)
        with torch.no_grad():
            z_novel, z_pred = sae.encode_with_predictions(x)
            tensors = {
                **{f"state.{key}": value for key, value in sae.state_dict().items()},
                "x": x,
                "z_novel": z_novel,
                "z_pred": z_pred,
                "forward": sae(x),
            }
            sae.encode(x)  # decode undoes the last input's normalisation
            tensors["decode"] = sae.decode(z_novel)
        out = HERE / "temporal_extra" / f"{name}.safetensors"
        save_file(
            {k: v.contiguous() for k, v in tensors.items()},
            out,
            metadata={"cfg": json.dumps(sae.cfg.to_dict())},
        )
        print(f"wrote {out}")
    write_canrager_folder()


def write_canrager_folder():
    """A canrager/temporalSAEs folder, and SAELens's forward of the SAE its loader reads."""
    root = HERE / "temporal_extra" / "canrager"
    folder = root / "layer_3" / "temporal"
    folder.mkdir(parents=True, exist_ok=True)
    conf = {
        "llm": {"dimin": 16},
        "sae": {
            "exp_factor": 2,
            "n_heads": 2,
            "n_attn_layers": 2,
            "bottleneck_factor": 4,
            "sae_diff_type": "topk",
            "kval_topk": 6,
            "tied_weights": False,
            "scaling_factor": 0.5,
        },
        "data": {"dtype": "float32"},
    }
    (folder / "conf.yaml").write_text(yaml.safe_dump(conf))
    torch.manual_seed(1)
    sae = TemporalSAE(
        TemporalSAEConfig(
            d_in=16, d_sae=32, n_heads=2, bottleneck_factor=4, n_attn_layers=2, tied_weights=False
        )
    )
    raw = {key: value for key, value in sae.state_dict().items() if key.startswith("attn_")}
    raw.update(D=sae.W_dec.data, E=sae.W_enc.data, b=torch.randn(16))
    save_file({k: v.contiguous() for k, v in raw.items()}, folder / "latest_ckpt.safetensors")

    def local_file(repo_id, filename, **kwargs):
        return str(root / filename)

    pretrained_sae_loaders.hf_hub_download = local_file
    cfg_dict, state_dict, _ = pretrained_sae_loaders.temporal_sae_huggingface_loader(
        "canrager/temporalSAEs", "layer_3/temporal"
    )
    fields = TemporalSAEConfig.__dataclass_fields__
    loaded = TemporalSAE(TemporalSAEConfig(**{k: v for k, v in cfg_dict.items() if k in fields}))
    loaded.load_state_dict(state_dict)
    x = torch.randn(2, 6, 16)
    with torch.no_grad():
        expected = {"x": x, "forward": loaded(x), "z_novel": loaded.encode(x)}
    save_file(expected, root / "expected.safetensors", metadata={"cfg": json.dumps(cfg_dict)})
    print(f"wrote {root}")


if __name__ == "__main__":
    main()
