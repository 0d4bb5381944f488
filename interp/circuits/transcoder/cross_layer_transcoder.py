"""circuit-tracer's ``transcoder.cross_layer_transcoder``: ``CrossLayerTranscoder`` (interp's,
``interp.circuits.cross_layer``) and ``load_clt`` with circuit-tracer's arguments.

Example:
    >>> import tempfile
    >>> folder = tempfile.mkdtemp()
    >>> CrossLayerTranscoder(n_layers=2, d_transcoder=8, d_model=4).to_safetensors(folder)
    >>> clt = load_clt(folder, lazy_decoder=True)   # decoders read from disk on use
    >>> clt.n_layers, clt.d_transcoder
    (2, 8)
"""

from __future__ import annotations

from pathlib import Path

import torch

from interp.circuits.cross_layer import CrossLayerTranscoder, load_cross_layer_transcoder

__all__ = ["CrossLayerTranscoder", "load_clt"]


def load_clt(
    clt_path: str | Path,
    feature_input_hook: str = "hook_resid_mid",
    feature_output_hook: str = "hook_mlp_out",
    scan: str | list[str] | None = None,
    device: torch.device | str | None = None,
    dtype: torch.dtype = torch.float32,
    lazy_decoder: bool = True,
    lazy_encoder: bool = False,
) -> CrossLayerTranscoder:
    """circuit-tracer's ``load_clt``: the CLT in ``clt_path`` (``W_enc_{i}`` /
    ``W_dec_{i}.safetensors``), its decoders left on disk by default."""
    return load_cross_layer_transcoder(
        clt_path, feature_input_hook, feature_output_hook, scan=scan, dtype=dtype,
        device=device, lazy_encoder=lazy_encoder, lazy_decoder=lazy_decoder,
    )  # fmt: skip
