"""SAELens's ``sae_lens.constants``: dtype names and the file names of an SAE folder.

``DTYPE_MAP`` reads a config's ``dtype`` string (``"float32"`` or ``"torch.float32"``);
``DTYPE_TO_STR`` is the name written back. The file names are those SAELens writes
(``cfg.json`` + ``sae_weights.safetensors`` [+ ``sparsity.safetensors``]) and its
trainer's checkpoint files.

Example:
    >>> from interp.sae.constants import DTYPE_MAP, DTYPE_TO_STR, SAE_WEIGHTS_FILENAME
    >>> DTYPE_MAP["torch.bfloat16"], DTYPE_TO_STR[torch.float16], SAE_WEIGHTS_FILENAME
    (torch.bfloat16, 'float16', 'sae_weights.safetensors')
"""

from __future__ import annotations

import torch

# The dtypes an SAE config may name, with and without the "torch." prefix.
DTYPE_TO_STR: dict[torch.dtype, str] = {
    torch.float32: "float32",
    torch.float64: "float64",
    torch.float16: "float16",
    torch.bfloat16: "bfloat16",
}
DTYPE_MAP: dict[str, torch.dtype] = {name: dtype for dtype, name in DTYPE_TO_STR.items()} | {
    f"torch.{name}": dtype for dtype, name in DTYPE_TO_STR.items()
}

SPARSITY_FILENAME = "sparsity.safetensors"
SAE_WEIGHTS_FILENAME = "sae_weights.safetensors"
SAE_CFG_FILENAME = "cfg.json"
RUNNER_CFG_FILENAME = "runner_cfg.json"
SPARSIFY_WEIGHTS_FILENAME = "sae.safetensors"
TRAINER_STATE_FILENAME = "trainer_state.pt"
ACTIVATIONS_STORE_STATE_FILENAME = "activations_store_state.safetensors"
ACTIVATION_SCALER_CFG_FILENAME = "activation_scaler.json"
