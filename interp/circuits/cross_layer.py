"""A cross-layer transcoder (CLT): a feature reads the residual stream at its layer ``i`` and
writes to the MLP output of every layer ``j >= i`` (circuit-tracer's
``CrossLayerTranscoder``, its layout and files).

Tensors: ``W_enc [n_layers, d_transcoder, d_model]``, ``b_enc [n_layers, d_transcoder]``,
``b_dec [n_layers, d_model]``, ``W_dec[i] [d_transcoder, n_layers - i, d_model]``, optional
``threshold [n_layers, d_transcoder]`` (JumpReLU: ``x * (x > threshold)``; else ReLU) and
``W_skip [n_layers, d_model, d_model]`` (``x @ W_skip[l]``, no transpose). Files:
``W_enc_{i}.safetensors`` (``W_enc_i``, ``b_enc_i``, ``b_dec_i``, optional ``threshold_i``)
and ``W_dec_{i}.safetensors`` (``W_dec_i``); circuit-tracer's loader reads no skip from disk,
so neither does ``load_cross_layer_transcoder``.

Example:
    >>> clt = load_cross_layer_transcoder("clt_folder", "hook_resid_mid", "hook_mlp_out")
    >>> clt.decoder_vectors(0, torch.tensor([3]), 2)   # feature 3 of layer 0, into layer 2
"""

from __future__ import annotations

from pathlib import Path

import torch
from jaxtyping import Float
from torch import Tensor, nn

from interp.sae.formats import SAEFormatError
from interp.sae.formats.files import read_safetensors


class CrossLayerTranscoder(nn.Module):
    """A CLT with circuit-tracer's parameters (see the module docstring)."""

    def __init__(
        self,
        n_layers: int,
        d_transcoder: int,
        d_model: int,
        jumprelu: bool = False,
        skip_connection: bool = False,
        feature_input_hook: str = "hook_resid_mid",
        feature_output_hook: str = "hook_mlp_out",
        scan: str | list[str] | None = None,
        dtype: torch.dtype = torch.float32,
        model_name: str | None = None,
    ) -> None:
        super().__init__()
        kind = {"dtype": dtype}
        self.W_enc = nn.Parameter(torch.zeros(n_layers, d_transcoder, d_model, **kind))
        self.b_enc = nn.Parameter(torch.zeros(n_layers, d_transcoder, **kind))
        self.b_dec = nn.Parameter(torch.zeros(n_layers, d_model, **kind))
        self.W_dec = nn.ParameterList(
            nn.Parameter(torch.zeros(d_transcoder, n_layers - i, d_model, **kind))
            for i in range(n_layers)
        )
        self.threshold = (
            nn.Parameter(torch.zeros(n_layers, d_transcoder, **kind)) if jumprelu else None
        )
        self.W_skip = (
            nn.Parameter(torch.zeros(n_layers, d_model, d_model, **kind))
            if skip_connection
            else None
        )
        self.feature_input_hook = feature_input_hook
        self.feature_output_hook = feature_output_hook
        self.scan = scan
        self.model_name = model_name  # the model it was trained on (config.yaml's), if known

    @property
    def n_layers(self) -> int:
        return self.W_enc.shape[0]

    @property
    def d_transcoder(self) -> int:
        return self.W_enc.shape[1]

    @property
    def widths(self) -> list[tuple[int, int]]:
        """(input, output) width of each layer."""
        return [(self.W_enc.shape[2], self.b_dec.shape[1])] * self.n_layers

    @property
    def skip_connection(self) -> bool:
        return self.W_skip is not None

    def encode(self, layer: int, x: Float[Tensor, "... d_model"]) -> Float[Tensor, "... d_tc"]:
        pre = x.to(self.W_enc.dtype) @ self.W_enc[layer].T + self.b_enc[layer]
        if self.threshold is None:
            return torch.relu(pre)
        return pre * (pre > self.threshold[layer])

    def encoder_vectors(self, layer: int, features: Tensor) -> Float[Tensor, "n d_model"]:
        return self.W_enc[layer, features]

    def writes_to(self, layer: int) -> range:
        """The layers a feature of ``layer`` writes to."""
        return range(layer, self.n_layers)

    def decoder_vectors(
        self, layer: int, features: Tensor, target_layer: int
    ) -> Float[Tensor, "n d_model"]:
        return self.W_dec[layer][features, target_layer - layer]

    def decoder_bias(self, layer: int) -> Float[Tensor, " d_model"]:
        return self.b_dec[layer]

    def skip(self, layer: int, x: Float[Tensor, "... d_model"]) -> Float[Tensor, "... d_model"]:
        if self.W_skip is None:
            return torch.zeros_like(x)
        return x.to(self.W_skip.dtype) @ self.skip_matrix(layer)

    def skip_matrix(self, layer: int) -> Float[Tensor, "d_model d_model"] | None:
        """``M`` with ``skip(layer, x) == x @ M`` (None without a skip connection)."""
        return None if self.W_skip is None else self.W_skip[layer]


def load_cross_layer_transcoder(
    folder: str | Path,
    feature_input_hook: str = "hook_resid_mid",
    feature_output_hook: str = "hook_mlp_out",
    scan: str | list[str] | None = None,
    dtype: torch.dtype = torch.float32,
    model_name: str | None = None,
) -> CrossLayerTranscoder:
    """Read circuit-tracer's CLT files (``W_enc_{i}`` / ``W_dec_{i}``) from ``folder``;
    ``model_name`` is the model it was trained on (its ``config.yaml``'s)."""
    folder = Path(folder)
    n_layers = len(list(folder.glob("W_enc_*.safetensors")))
    if n_layers == 0:
        raise SAEFormatError(f"{folder}: no W_enc_{{i}}.safetensors files (a CLT folder).")
    first = read_safetensors(folder / "W_enc_0.safetensors")
    d_transcoder, d_model = first["W_enc_0"].shape
    clt = CrossLayerTranscoder(
        n_layers, d_transcoder, d_model, jumprelu="threshold_0" in first,
        feature_input_hook=feature_input_hook, feature_output_hook=feature_output_hook,
        scan=scan, dtype=dtype, model_name=model_name,
    )  # fmt: skip
    with torch.no_grad():
        for i in range(n_layers):
            enc = read_safetensors(folder / f"W_enc_{i}.safetensors")
            dec = read_safetensors(folder / f"W_dec_{i}.safetensors")
            pairs = [(clt.W_enc[i], enc, f"W_enc_{i}"), (clt.b_enc[i], enc, f"b_enc_{i}")]
            pairs += [(clt.b_dec[i], enc, f"b_dec_{i}"), (clt.W_dec[i], dec, f"W_dec_{i}")]
            if clt.threshold is not None:
                pairs.append((clt.threshold[i], enc, f"threshold_{i}"))
            for param, tensors, key in pairs:
                if key not in tensors or tuple(tensors[key].shape) != tuple(param.shape):
                    found = tuple(tensors[key].shape) if key in tensors else "missing"
                    raise SAEFormatError(
                        f"{folder}: {key} is {found}, expected shape {tuple(param.shape)}."
                    )
                param.copy_(tensors[key].to(dtype))
    return clt
