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
    >>> import tempfile
    >>> folder = tempfile.mkdtemp()
    >>> CrossLayerTranscoder(n_layers=3, d_transcoder=8, d_model=4).to_safetensors(folder)
    >>> clt = load_cross_layer_transcoder(folder, "hook_resid_mid", "hook_mlp_out")
    >>> clt.decoder_vectors(0, torch.tensor([3]), 2).shape   # feature 3 of layer 0, into 2
    torch.Size([1, 4])
"""

from __future__ import annotations

from pathlib import Path

import torch
from jaxtyping import Float
from torch import Tensor, nn

from interp.sae.formats import SAEFormatError
from interp.sae.formats.files import read_safetensors
from interp.utils.devices import get_default_device


class CrossLayerTranscoder(nn.Module):
    """A CLT with circuit-tracer's parameters and constructor (see the module docstring).

    ``activation_function``: ``"relu"`` or ``"jump_relu"`` (or ``jumprelu=True``).
    ``lazy_encoder`` / ``lazy_decoder`` (with ``clt_path``, the folder of its files): that
    weight stays on disk and is read on each access, one layer's file at a time.
    """

    def __init__(
        self,
        n_layers: int,
        d_transcoder: int,
        d_model: int,
        activation_function: str = "relu",
        skip_connection: bool = False,
        lazy_decoder: bool = False,
        lazy_encoder: bool = False,
        feature_input_hook: str = "hook_resid_mid",
        feature_output_hook: str = "hook_mlp_out",
        scan: str | list[str] | None = None,
        device: torch.device | str | None = None,
        dtype: torch.dtype = torch.float32,
        clt_path: str | Path | None = None,
        *,
        jumprelu: bool | None = None,
        model_name: str | None = None,
    ) -> None:
        super().__init__()
        if jumprelu is not None:
            activation_function = "jump_relu" if jumprelu else "relu"
        if activation_function not in ("relu", "jump_relu"):
            raise ValueError(
                f"activation_function={activation_function!r}; use 'relu' or 'jump_relu'."
            )
        if (lazy_encoder or lazy_decoder) and clt_path is None:
            raise ValueError(
                "lazy_encoder / lazy_decoder read the weights from the CLT's files on each "
                "access: pass clt_path (the folder of W_enc_{i} / W_dec_{i}.safetensors)."
            )
        self.d_model = d_model
        self.lazy_encoder, self.lazy_decoder = lazy_encoder, lazy_decoder
        self.clt_path = None if clt_path is None else str(clt_path)
        kind = {"dtype": dtype, "device": device or get_default_device()}
        if not lazy_encoder:
            self.W_enc = nn.Parameter(torch.zeros(n_layers, d_transcoder, d_model, **kind))
        self.b_enc = nn.Parameter(torch.zeros(n_layers, d_transcoder, **kind))
        self.b_dec = nn.Parameter(torch.zeros(n_layers, d_model, **kind))
        self.W_dec = (
            None
            if lazy_decoder
            else nn.ParameterList(
                nn.Parameter(torch.zeros(d_transcoder, n_layers - i, d_model, **kind))
                for i in range(n_layers)
            )
        )
        self.threshold = (
            nn.Parameter(torch.zeros(n_layers, d_transcoder, **kind))
            if activation_function == "jump_relu"
            else None
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

    def __getattr__(self, name: str) -> object:
        """A lazy ``W_enc`` (``[n_layers, d_transcoder, d_model]``), read from disk."""
        if name == "W_enc" and self.__dict__.get("lazy_encoder"):
            return torch.stack([self._get_encoder_weights(i) for i in range(self.n_layers)])
        return super().__getattr__(name)

    @property
    def n_layers(self) -> int:
        return self.b_enc.shape[0]

    @property
    def d_transcoder(self) -> int:
        return self.b_enc.shape[1]

    @property
    def device(self) -> torch.device:
        return self.b_enc.device

    @property
    def dtype(self) -> torch.dtype:
        return self.b_enc.dtype

    @property
    def widths(self) -> list[tuple[int, int]]:
        """(input, output) width of each layer."""
        return [(self.d_model, self.b_dec.shape[1])] * self.n_layers

    @property
    def skip_connection(self) -> bool:
        return self.W_skip is not None

    def _read(self, stem: str, layer: int, rows: object = None) -> Tensor:
        from safetensors import safe_open

        path = Path(self.clt_path) / f"{stem}_{layer}.safetensors"
        with safe_open(str(path), framework="pt", device=str(self.device)) as f:
            key = f"{stem}_{layer}"
            tensor = f.get_tensor(key) if rows is None else f.get_slice(key)[rows]
        return tensor.to(self.dtype)

    def _get_encoder_weights(self, layer_id: int) -> Float[Tensor, "d_tc d_model"]:
        """Layer ``layer_id``'s encoder rows (read from its file when lazy)."""
        if self.lazy_encoder:
            return self._read("W_enc", layer_id)
        return self.W_enc[layer_id]

    def _get_decoder_vectors(self, layer_id: int, feat_ids: object = None) -> Tensor:
        """Decoder rows ``[n, n_layers - layer_id, d_model]`` of layer ``layer_id``'s
        features ``feat_ids`` (all without), read from its file when lazy."""
        if not self.lazy_decoder:
            return self.W_dec[layer_id] if feat_ids is None else self.W_dec[layer_id][feat_ids]
        if isinstance(feat_ids, Tensor):
            feat_ids = feat_ids.cpu()
        return self._read("W_dec", layer_id, slice(None) if feat_ids is None else feat_ids)

    # ----------------------------------------------------------------------- maths
    def apply_activation_function(self, layer_id: int, pre: Tensor) -> Tensor:
        """Layer ``layer_id``'s activation function (ReLU, or ``x * (x > threshold)``)."""
        if self.threshold is None:
            return torch.relu(pre)
        return pre * (pre > self.threshold[layer_id])

    def encode_layer(
        self, x: Float[Tensor, "... d_model"], layer_id: int, apply_activation_function: bool = True
    ) -> Float[Tensor, "... d_tc"]:
        W_enc = self._get_encoder_weights(layer_id)
        pre = x.to(W_enc.dtype) @ W_enc.T + self.b_enc[layer_id]
        return self.apply_activation_function(layer_id, pre) if apply_activation_function else pre

    def encode(self, layer: int | Tensor, x: Tensor | None = None) -> Tensor:
        """``encode(layer, x)``: layer ``layer``'s activations ``[..., d_tc]``;
        ``encode(inputs)`` (circuit-tracer's): every layer's, ``inputs [n_layers, ...,
        d_model]`` -> ``[n_layers, ..., d_tc]``."""
        if x is None:
            return torch.stack([self.encode_layer(inputs, i) for i, inputs in enumerate(layer)])
        return self.encode_layer(x, layer)

    def encoder_vectors(self, layer: int, features: Tensor) -> Float[Tensor, "n d_model"]:
        return self._get_encoder_weights(layer)[features]

    def writes_to(self, layer: int) -> range:
        """The layers a feature of ``layer`` writes to."""
        return range(layer, self.n_layers)

    def decoder_vectors(
        self, layer: int, features: Tensor, target_layer: int
    ) -> Float[Tensor, "n d_model"]:
        return self._get_decoder_vectors(layer, features)[..., target_layer - layer, :]

    def decoder_bias(self, layer: int) -> Float[Tensor, " d_model"]:
        return self.b_dec[layer]

    def skip(self, layer: int, x: Float[Tensor, "... d_model"]) -> Float[Tensor, "... d_model"]:
        if self.W_skip is None:
            return torch.zeros_like(x)
        return x.to(self.W_skip.dtype) @ self.skip_matrix(layer)

    def compute_skip(self, layer_id: int, inputs: Tensor) -> Tensor:
        if self.W_skip is None:
            raise ValueError("This CLT has no skip connection (W_skip).")
        return self.skip(layer_id, inputs)

    def skip_matrix(self, layer: int) -> Float[Tensor, "d_model d_model"] | None:
        """``M`` with ``skip(layer, x) == x @ M`` (None without a skip connection)."""
        return None if self.W_skip is None else self.W_skip[layer]

    def encode_sparse(
        self, x: Float[Tensor, "n_layers pos d_model"], zero_positions: slice = slice(0, 1)
    ) -> tuple[Tensor, Tensor]:
        """(sparse activations ``[n_layers, pos, d_tc]`` with ``zero_positions`` zeroed, the
        encoder rows of the active features in the sparse tensor's order)."""
        layers, encoders = [], []
        for layer in range(self.n_layers):
            acts = self.encode_layer(x[layer], layer)
            acts[zero_positions] = 0
            sparse = acts.to_sparse()
            layers.append(sparse)
            encoders.append(self._get_encoder_weights(layer)[sparse.indices()[1]])
        return torch.stack(layers).coalesce(), torch.cat(encoders)

    def select_decoder_vectors(self, features: Tensor) -> tuple[Tensor, ...]:
        """For sparse ``features [n_layers, pos, d_tc]``, one row per (active feature, layer
        it writes to): (positions, target layers, feature ids, activation-scaled decoder
        rows, the active feature's index in the sparse tensor)."""
        features = features.coalesce() if features.is_sparse else features.to_sparse()
        layers, positions, ids = features.indices()
        values = features.values()
        out: list[list[Tensor]] = [[], [], [], [], []]
        for layer in layers.unique().tolist():
            mask = layers == layer
            n_targets = self.n_layers - layer
            rows = self._get_decoder_vectors(layer, ids[mask]).to(values.device)
            out[0].append(positions[mask].repeat_interleave(n_targets))
            out[1].append(torch.arange(layer, self.n_layers, device=values.device).repeat(
                int(mask.sum())
            ))  # fmt: skip
            out[2].append(ids[mask].repeat_interleave(n_targets))
            out[3].append((rows * values[mask, None, None]).reshape(-1, self.d_model))
            out[4].append(torch.where(mask)[0].repeat_interleave(n_targets))
        return tuple(torch.cat(parts) for parts in out)

    def compute_reconstruction(
        self,
        pos_ids: Tensor,
        layer_ids: Tensor,
        decoder_vectors: Tensor,
        input_acts: Tensor | None = None,
        n_pos: int | None = None,
    ) -> Float[Tensor, "n_layers pos d_model"]:
        """Sum the decoder rows into each (layer, position), plus ``b_dec`` and the skip path."""
        n_pos = n_pos or int(pos_ids.max()) + 1
        flat = torch.zeros(self.n_layers * n_pos, self.d_model, dtype=decoder_vectors.dtype)
        flat = flat.to(decoder_vectors.device).index_add_(
            0, layer_ids * n_pos + pos_ids, decoder_vectors
        )
        out = flat.reshape(self.n_layers, n_pos, self.d_model) + self.b_dec[:, None]
        if self.W_skip is not None:
            if input_acts is None:
                raise ValueError("This CLT has a skip connection: pass input_acts.")
            out = out + input_acts.to(self.W_skip.dtype) @ self.W_skip
        return out

    def decode(self, features: Tensor, input_acts: Tensor | None = None) -> Tensor:
        """Every layer's output ``[n_layers, pos, d_model]`` from ``features``."""
        positions, layers, _, vectors, _ = self.select_decoder_vectors(features)
        return self.compute_reconstruction(
            positions, layers, vectors, input_acts, n_pos=features.shape[1]
        )

    def forward(self, x: Float[Tensor, "n_layers pos d_model"]) -> Tensor:
        return self.decode(self.encode(x), x)

    def compute_attribution_components(
        self, inputs: Float[Tensor, "n_layers pos d_model"], zero_positions: slice = slice(0, 1)
    ) -> dict[str, Tensor]:
        """As ``TranscoderSet.compute_attribution_components``: one decoder row per active
        feature and layer it writes to."""
        matrix, encoders = self.encode_sparse(inputs, zero_positions)
        positions, layers, _, decoders, mapping = self.select_decoder_vectors(matrix)
        reconstruction = self.compute_reconstruction(
            positions, layers, decoders, inputs, n_pos=inputs.shape[1]
        )
        return {
            "activation_matrix": matrix,
            "reconstruction": reconstruction,
            "encoder_vecs": encoders,
            "decoder_vecs": decoders,
            "encoder_to_decoder_map": mapping,
            "decoder_locations": torch.stack([layers, positions]),
        }

    def to_safetensors(self, save_path: str | Path) -> None:
        """circuit-tracer's files: ``W_enc_{i}`` (``W_enc_i``, ``b_enc_i``, ``b_dec_i``,
        ``threshold_i``) and ``W_dec_{i}`` (``W_dec_i``) for each layer."""
        from safetensors.torch import save_file

        folder = Path(save_path)
        folder.mkdir(parents=True, exist_ok=True)
        for i in range(self.n_layers):
            enc = {f"W_enc_{i}": self._get_encoder_weights(i), f"b_enc_{i}": self.b_enc[i]}
            enc[f"b_dec_{i}"] = self.b_dec[i]
            if self.threshold is not None:
                enc[f"threshold_{i}"] = self.threshold[i]
            dec = {f"W_dec_{i}": self._get_decoder_vectors(i)}
            for name, tensors in ((f"W_enc_{i}", enc), (f"W_dec_{i}", dec)):
                tensors = {k: v.detach().cpu().contiguous() for k, v in tensors.items()}
                save_file(tensors, str(folder / f"{name}.safetensors"))


def load_cross_layer_transcoder(
    folder: str | Path,
    feature_input_hook: str = "hook_resid_mid",
    feature_output_hook: str = "hook_mlp_out",
    scan: str | list[str] | None = None,
    dtype: torch.dtype = torch.float32,
    device: torch.device | str | None = None,
    lazy_encoder: bool = False,
    lazy_decoder: bool = False,
    model_name: str | None = None,
) -> CrossLayerTranscoder:
    """Read circuit-tracer's CLT files (``W_enc_{i}`` / ``W_dec_{i}``) from ``folder``; a
    lazy weight is left in its files (read on each access); ``model_name`` is the model it
    was trained on (its ``config.yaml``'s)."""
    folder = Path(folder)
    n_layers = len(list(folder.glob("W_enc_*.safetensors")))
    if n_layers == 0:
        raise SAEFormatError(f"{folder}: no W_enc_{{i}}.safetensors files (a CLT folder).")
    first = read_safetensors(folder / "W_enc_0.safetensors")
    d_transcoder, d_model = first["W_enc_0"].shape
    clt = CrossLayerTranscoder(
        n_layers, d_transcoder, d_model, jumprelu="threshold_0" in first,
        feature_input_hook=feature_input_hook, feature_output_hook=feature_output_hook,
        scan=scan, dtype=dtype, device=device, clt_path=folder,
        lazy_encoder=lazy_encoder, lazy_decoder=lazy_decoder, model_name=model_name,
    )  # fmt: skip
    with torch.no_grad():
        for i in range(n_layers):
            enc = read_safetensors(folder / f"W_enc_{i}.safetensors")
            pairs = [(clt.b_enc[i], enc, f"b_enc_{i}"), (clt.b_dec[i], enc, f"b_dec_{i}")]
            if not lazy_encoder:
                pairs.append((clt.W_enc[i], enc, f"W_enc_{i}"))
            if not lazy_decoder:
                dec = read_safetensors(folder / f"W_dec_{i}.safetensors")
                pairs.append((clt.W_dec[i], dec, f"W_dec_{i}"))
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
