"""Reading every public SAE layout into one ``SAE``, and writing SAELens's.

The layout is detected from the files in the folder:

- ``cfg.json`` + ``sae_weights.safetensors``: SAELens (6.x ``metadata``, or pre-6.0 flat);
- ``params.npz``: Gemma Scope 1 (JumpReLU; hook from the path: ``-res``/``-mlp``/``-att``
  and ``layer_N``);
- ``params.safetensors`` [+ ``config.json``]: Gemma Scope 2 (``w_enc``..., HF hook paths);
- ``cfg.json`` + ``sae.safetensors``: EleutherAI sparsify (TopK; the folder is an HF module);
- ``hyperparams.json`` + ``checkpoints/final.safetensors``: Llama Scope (input-norm scaling).

Hugging Face module paths become our hook names (``layers.3`` -> ``blocks.3.hook_resid_post``).
Every tensor is checked for its name, shape and finite values; errors name the file.

One module a format family (``saelens``, ``gemma_scope``, ``sparsify``, ``llama_scope``);
``load`` detects the format and dispatches; ``files``, ``hf_hooks`` and ``build`` are what
the readers share. Every name is importable from here.

Example:
    >>> from pathlib import Path
    >>> import tempfile, numpy as np
    >>> folder = Path(tempfile.mkdtemp(),
    ...               "gemma-scope-2b-pt-res/layer_3/width_16k/average_l0_59")
    >>> folder.mkdir(parents=True)   # a tiny stand-in for the hub's folder: d_in 8, d_sae 32
    >>> np.savez(folder / "params.npz", W_enc=np.zeros((8, 32), "f4"),
    ...          W_dec=np.zeros((32, 8), "f4"), b_enc=np.zeros(32, "f4"),
    ...          b_dec=np.zeros(8, "f4"), threshold=np.zeros(32, "f4"))
    >>> sae = load_sae_folder(folder)   # the format and the hook read from the files and the path
    >>> sae.cfg.architecture, sae.cfg.hook_name, sae.cfg.model_name
    ('jumprelu', 'blocks.3.hook_resid_post', 'gemma-2-2b')
"""

from interp.sae.formats.build import fold_input_scale
from interp.sae.formats.files import SAEFormatError
from interp.sae.formats.gemma_scope import load_gemma_scope_1, load_gemma_scope_2
from interp.sae.formats.hf_hooks import hf_module_to_hook
from interp.sae.formats.llama_scope import load_llama_scope
from interp.sae.formats.load import LOADERS, detect_format, load_from_hub, load_sae_folder
from interp.sae.formats.saelens import SAELENS_CFG, SAELENS_WEIGHTS, load_saelens, save_saelens
from interp.sae.formats.sparsify import load_sparsify

# The name this had before interp.load_sae (shipped names too) took it; circuits' transcoder
# loader still imports it.
load_sae = load_sae_folder

__all__ = [
    "LOADERS",
    "SAELENS_CFG",
    "SAELENS_WEIGHTS",
    "SAEFormatError",
    "detect_format",
    "fold_input_scale",
    "hf_module_to_hook",
    "load_from_hub",
    "load_gemma_scope_1",
    "load_gemma_scope_2",
    "load_llama_scope",
    "load_sae",
    "load_sae_folder",
    "load_saelens",
    "load_sparsify",
    "save_saelens",
]
