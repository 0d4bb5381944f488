"""TransformerLens 2.18's saved state dicts (its attention buffers included) and module names.

Writes into tests/tl218_reference/state_dicts/:

- ``<model>.pt``: ``torch.save(model.state_dict())`` of a tiny random TL model, as a user (or
  ARENA's checkpoints) saves one: the weights plus the buffers TL's attention registers
  (``mask`` [n_ctx, n_ctx] bool, ``IGNORE`` a scalar, and for rotary models ``rotary_sin`` /
  ``rotary_cos`` [n_ctx, rotary_dim]);
- ``state_dicts.json``: each model's config, its state dict's keys with shape and dtype in
  TL's order, every submodule's ``.name`` after ``setup()`` (``mod_dict``), the tokens and
  TL's logits on them (``<model>.logits`` in ``logits.safetensors``).

Models: ``gpt2`` (LayerNorm, learned positions, global attention), ``local_rotary`` (RMSNorm,
rotary, grouped-query heads, a local then a global layer) and ``local_rotary_bf16`` (the
same in bfloat16: TL keeps ``IGNORE`` in float32).

Run from the repository root: /tmp/tl218-venv/bin/python tests/tl218_reference/make_state_dicts.py
"""

from __future__ import annotations

import importlib.metadata
import json
from pathlib import Path

import torch
from safetensors.torch import save_file
from transformer_lens import HookedTransformer, HookedTransformerConfig

HERE = Path(__file__).parent / "state_dicts"
TOKENS = torch.randint(0, 50, (2, 8), generator=torch.Generator().manual_seed(0))

CONFIGS = {
    "gpt2": dict(
        n_layers=2, d_model=16, n_heads=2, d_head=8, d_mlp=32, d_vocab=50, n_ctx=12,
        act_fn="gelu_new", normalization_type="LN", seed=1,
    ),
    "local_rotary": dict(
        n_layers=2, d_model=16, n_heads=2, d_head=8, d_mlp=32, d_vocab=50, n_ctx=12,
        act_fn="silu", gated_mlp=True, normalization_type="RMS",
        positional_embedding_type="rotary", rotary_dim=8, n_key_value_heads=1,
        use_local_attn=True, attn_types=["local", "global"], window_size=3, seed=2,
    ),
}  # fmt: skip


def main() -> None:
    HERE.mkdir(exist_ok=True)
    index = {"transformer_lens": importlib.metadata.version("transformer_lens"), "models": {}}
    logits = {}
    runs = {name: (cfg, torch.float32) for name, cfg in CONFIGS.items()}
    runs["local_rotary_bf16"] = (CONFIGS["local_rotary"], torch.bfloat16)
    for name, (fields, dtype) in runs.items():
        model = HookedTransformer(HookedTransformerConfig(**fields, dtype=dtype)).eval()
        state_dict = model.state_dict()
        torch.save(state_dict, HERE / f"{name}.pt")
        with torch.no_grad():
            logits[f"{name}.logits"] = model(TOKENS).float().contiguous()
        index["models"][name] = {
            "config": fields,
            "dtype": str(dtype).removeprefix("torch."),
            "state_dict": [
                [key, list(tensor.shape), str(tensor.dtype).removeprefix("torch.")]
                for key, tensor in state_dict.items()
            ],
            "module_names": {path: module.name for path, module in model.mod_dict.items()},
        }
    index["tokens"] = TOKENS.tolist()
    save_file(logits, HERE / "logits.safetensors")
    (HERE / "state_dicts.json").write_text(json.dumps(index, indent=1) + "\n")


if __name__ == "__main__":
    main()
