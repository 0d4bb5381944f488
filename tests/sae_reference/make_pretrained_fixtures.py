"""Write what SAELens 6.45.3 makes of the fake hub cache in fake_hub.py, for
tests/sae/test_sae_pretrained_releases.py to compare against.

Run in SAELens's environment (offline: the fake cache is all it reads):

    python3 -m venv /work/sl-venv
    /work/sl-venv/bin/pip install torch==2.13.0 sae-lens==6.45.3
    /work/sl-venv/bin/python tests/sae_reference/make_pretrained_fixtures.py

It also stores a few release lookups of SAELens's directory and ``handle_pre_6_0_config``
on a few pre-6.0 configs. For each case of ``fake_hub.CASES`` it stores SAELens's
``SAE.from_pretrained_with_cfg_and_sparsity`` config dict and ``load_sae_config_from_huggingface``
config dict (``pretrained/expected.json``), and the SAE's state dict, log sparsity and
``encode`` of ``fake_hub.probe_input()`` (``pretrained/expected.safetensors``, keys
``<case>.<name>``); for ``fake_hub.CONFIG_ONLY`` the config dicts alone. SAELens reads Gemma
Scope 2 shapes with an HTTP range request; here that one function reads the cached file instead.
"""

import json
import os
import sys
import tempfile
from dataclasses import asdict
from pathlib import Path

HERE = Path(__file__).parent
CACHE = Path(tempfile.mkdtemp()) / "hub"
os.environ["HF_HUB_CACHE"] = str(CACHE)
os.environ["HF_HUB_OFFLINE"] = "1"
sys.path.insert(0, str(HERE))

import fake_hub  # noqa: E402
import sae_lens  # noqa: E402
import torch  # noqa: E402
from huggingface_hub import hf_hub_download  # noqa: E402
from sae_lens import SAE  # noqa: E402
from sae_lens.loading import pretrained_sae_loaders  # noqa: E402
from sae_lens.loading.pretrained_sae_loaders import handle_pre_6_0_config  # noqa: E402
from sae_lens.loading.pretrained_saes_directory import (  # noqa: E402
    get_pretrained_saes_directory,
)
from safetensors import safe_open  # noqa: E402
from safetensors.torch import save_file  # noqa: E402

DIRECTORY_RELEASES = ["gpt2-small-res-jb", "llama_scope_lxr_8x", "gemma-scope-2-270m-pt-res"]
PRE_6_CONFIGS = [
    {
        "d_in": 8,
        "d_sae": 16,
        "hook_point": "blocks.0.hook_resid_pre",
        "normalize_activations": True,
    },
    {"d_in": 8, "d_sae": 16, "hook_point": "blocks.1.attn.hook_z", "hook_point_head_index": 3},
    {
        "d_in": 8,
        "d_sae": 16,
        "hook_name": "blocks.2.hook_mlp_out",
        "activation_fn_str": "topk",
        "activation_fn_kwargs": {"k": 4},
        "model_name": "gpt2",
        "context_size": 64,
        "dtype": "float32",
        "lr": 0.001,
    },
    {"d_in": 8, "d_sae": 16, "hook_name": "x", "normalize_activations": None, "device": "mps"},
]


def _local_shapes(repo_id: str, filename: str) -> dict[str, list[int]]:
    with safe_open(hf_hub_download(repo_id, filename), framework="pt") as handle:
        return {key: list(handle.get_slice(key).get_shape()) for key in handle.keys()}  # noqa: SIM118


def main() -> None:
    pretrained_sae_loaders.get_safetensors_tensor_shapes = _local_shapes
    config_from_hf = pretrained_sae_loaders.load_sae_config_from_huggingface
    fake_hub.build_fake_hub(CACHE)
    configs: dict[str, dict] = {"_sae_lens_version": sae_lens.__version__}
    tensors: dict[str, torch.Tensor] = {}
    x = fake_hub.probe_input()
    for case, (release, sae_id) in fake_hub.CASES.items():
        sae, cfg_dict, log_sparsity = SAE.from_pretrained_with_cfg_and_sparsity(release, sae_id)
        configs[case] = {
            "from_pretrained": cfg_dict,
            "load_sae_config_from_huggingface": config_from_hf(release, sae_id),
            "class": type(sae).__name__,
        }
        for name, value in sae.state_dict().items():
            tensors[f"{case}.{name}"] = value.detach().contiguous()
        if log_sparsity is not None:
            tensors[f"{case}.log_sparsity"] = log_sparsity.contiguous()
        if sae.cfg.reshape_activations != "hook_z":
            with torch.no_grad():
                tensors[f"{case}.encode"] = sae.encode(x).contiguous()
    for case, (release, sae_id) in fake_hub.CONFIG_ONLY.items():
        configs[case] = {"load_sae_config_from_huggingface": config_from_hf(release, sae_id)}
    directory = get_pretrained_saes_directory()
    configs["_directory"] = {
        "n_releases": len(directory),
        "lookups": {release: asdict(directory[release]) for release in DIRECTORY_RELEASES},
    }
    configs["_handle_pre_6_0_config"] = [
        [raw, handle_pre_6_0_config(dict(raw))] for raw in PRE_6_CONFIGS
    ]
    out = HERE / "pretrained"
    out.mkdir(exist_ok=True)
    (out / "expected.json").write_text(json.dumps(configs, indent=1, sort_keys=True) + "\n")
    save_file(tensors, str(out / "expected.safetensors"))
    print(f"{out}: {len(configs) - 1} cases, {len(tensors)} tensors")


if __name__ == "__main__":
    main()
