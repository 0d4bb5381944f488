"""circuit-tracer's ``transcoder.single_layer_transcoder``: one layer's transcoder in its
layout (``W_enc`` / ``W_dec`` ``[d_transcoder, d_model]``, ``W_skip`` ``[d_model, d_model]``),
its loaders, and ``TranscoderSet`` (interp's one class, which takes these too).

``lazy_encoder`` / ``lazy_decoder``: the weight stays in its ``.safetensors`` file and is
read from it on each access (``transcoder.W_dec``, or only the rows asked for by
``_get_decoder_vectors``); it is then not a parameter of the module.

A ``TranscoderSet`` built from these holds each layer as an ``interp.sae.SAE`` (the class
our attribution, interventions and backward pass read; ``SingleLayerTranscoder.to_sae``),
sharing the weights' memory with the transcoder where they are in memory.

Example:
    >>> import tempfile
    >>> from interp.circuits import load_transcoders
    >>> folder = load_transcoders("shakespeare-char-transcoders").save(tempfile.mkdtemp())
    >>> tc = load_relu_transcoder(folder / "layer_3.safetensors", layer=3, lazy_decoder=True)
    >>> x = torch.randn(5, 128)                   # [..., d_model]
    >>> acts = tc.encode(x)                       # [..., d_transcoder]
    >>> out = tc.decode(acts, x)                  # [..., d_model], skip path included
    >>> out.shape
    torch.Size([5, 128])
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Literal

import torch
from safetensors import safe_open
from safetensors.torch import save_file
from torch import Tensor, nn
from torch.nn import functional as F

from interp.circuits.transcoder.activation_functions import JumpReLU, TopK
from interp.circuits.transcoders import TranscoderSet
from interp.sae import SAE, SAEConfig
from interp.utils.devices import get_default_device

__all__ = [
    "SingleLayerTranscoder",
    "TranscoderSet",
    "load_relu_transcoder",
    "load_transcoder",
    "load_transcoder_set",
]

_LAZY = {"W_enc": "lazy_encoder", "W_dec": "lazy_decoder"}


class SingleLayerTranscoder(nn.Module):
    """A per-layer transcoder: ``activation_function(x @ W_enc.T + b_enc) @ W_dec + b_dec``
    (+ ``x @ W_skip.T`` with ``skip_connection``), circuit-tracer's parameters."""

    def __init__(
        self,
        d_model: int,
        d_transcoder: int,
        activation_function: Callable[[Tensor], Tensor],
        layer_idx: int,
        skip_connection: bool = False,
        transcoder_path: str | Path | None = None,
        lazy_encoder: bool = False,
        lazy_decoder: bool = False,
        device: torch.device | str | None = None,
        dtype: torch.dtype = torch.float32,
    ) -> None:
        super().__init__()
        if (lazy_encoder or lazy_decoder) and transcoder_path is None:
            raise ValueError(
                "lazy_encoder / lazy_decoder read the weights from transcoder_path on each "
                "access: pass transcoder_path (a .safetensors file), or set both to False."
            )
        kind = {"device": device or get_default_device(), "dtype": dtype}
        self.d_model, self.d_transcoder, self.layer_idx = d_model, d_transcoder, layer_idx
        self.transcoder_path = None if transcoder_path is None else str(transcoder_path)
        self.lazy_encoder, self.lazy_decoder = lazy_encoder, lazy_decoder
        if not lazy_encoder:
            self.W_enc = nn.Parameter(torch.zeros(d_transcoder, d_model, **kind))
        if not lazy_decoder:
            self.W_dec = nn.Parameter(torch.zeros(d_transcoder, d_model, **kind))
        self.b_enc = nn.Parameter(torch.zeros(d_transcoder, **kind))
        self.b_dec = nn.Parameter(torch.zeros(d_model, **kind))
        self.W_skip = (
            nn.Parameter(torch.zeros(d_model, d_model, **kind)) if skip_connection else None
        )
        self.activation_function = activation_function

    @property
    def device(self) -> torch.device:
        return self.b_enc.device

    @property
    def dtype(self) -> torch.dtype:
        return self.b_enc.dtype

    def __getattr__(self, name: str) -> Any:
        """A lazy ``W_enc`` / ``W_dec``: read whole from the file (not kept)."""
        if name in _LAZY and self.__dict__.get(_LAZY[name]):
            return self._read(name)
        return super().__getattr__(name)

    def _read(self, key: str, rows: Any = None) -> Tensor:
        with safe_open(self.transcoder_path, framework="pt", device=str(self.device)) as f:
            tensor = f.get_tensor(key) if rows is None else f.get_slice(key)[rows]
        return tensor.to(self.dtype)

    def _get_decoder_vectors(self, feat_ids: Tensor | Any = None) -> Tensor:
        """Rows ``feat_ids`` of ``W_dec`` (all without), read from the file when lazy."""
        if not self.lazy_decoder:
            return self.W_dec if feat_ids is None else self.W_dec[feat_ids]
        if isinstance(feat_ids, Tensor):
            feat_ids = feat_ids.cpu()
        return self._read("W_dec", slice(None) if feat_ids is None else feat_ids)

    # ----------------------------------------------------------------------- maths
    def encode(self, input_acts: Tensor, apply_activation_function: bool = True) -> Tensor:
        W_enc = self.W_enc
        pre = F.linear(input_acts.to(W_enc.dtype), W_enc, self.b_enc)
        return self.activation_function(pre) if apply_activation_function else pre

    def compute_skip(self, input_acts: Tensor) -> Tensor:
        if self.W_skip is None:
            raise ValueError("This transcoder has no skip connection (W_skip).")
        return input_acts.to(self.W_skip.dtype) @ self.W_skip.T

    def decode(self, acts: Tensor, input_acts: Tensor | None = None) -> Tensor:
        out = acts @ self.W_dec + self.b_dec
        if self.W_skip is None:
            return out
        if input_acts is None:
            raise ValueError("This transcoder has a skip connection: pass input_acts to decode.")
        return out + self.compute_skip(input_acts)

    def forward(self, input_acts: Tensor) -> Tensor:
        return self.decode(self.encode(input_acts), input_acts)

    def encode_sparse(
        self, input_acts: Tensor, zero_positions: slice = slice(0, 1)
    ) -> tuple[Tensor, Tensor]:
        """(sparse activations ``[pos, d_transcoder]`` with ``zero_positions`` zeroed, the
        encoder rows of the active features in the sparse tensor's order)."""
        W_enc = self.W_enc
        acts = self.activation_function(F.linear(input_acts.to(W_enc.dtype), W_enc, self.b_enc))
        acts[zero_positions] = 0
        sparse = acts.to_sparse()
        return sparse, W_enc[sparse.indices()[1]]

    def decode_sparse(
        self, sparse_acts: Tensor, input_acts: Tensor | None = None
    ) -> tuple[Tensor, Tensor]:
        """(reconstruction ``[pos, d_model]``, each active feature's decoder row times its
        activation)."""
        positions, features = sparse_acts.indices()
        scaled = self._get_decoder_vectors(features) * sparse_acts.values()[:, None]
        out = torch.zeros(sparse_acts.shape[0], self.d_model, dtype=scaled.dtype)
        out = out.to(scaled.device).index_add_(0, positions, scaled) + self.b_dec
        if self.W_skip is not None:
            if input_acts is None:
                raise ValueError("This transcoder has a skip connection: pass input_acts.")
            out = out + self.compute_skip(input_acts)
        return out, scaled

    # ---------------------------------------------------------------------- files
    def state_for_file(self) -> dict[str, Tensor]:
        """circuit-tracer's tensors (``activation_function.threshold`` for a JumpReLU)."""
        state = {"W_enc": self.W_enc, "W_dec": self.W_dec, "b_enc": self.b_enc}
        state["b_dec"] = self.b_dec
        if isinstance(self.activation_function, JumpReLU):
            state["activation_function.threshold"] = self.activation_function.threshold
        if self.W_skip is not None:
            state["W_skip"] = self.W_skip
        return {key: value.detach().cpu().contiguous() for key, value in state.items()}

    def to_safetensors(self, save_path: str | Path) -> None:
        """Write circuit-tracer's ``layer_{i}.safetensors`` (which lazy loading reads)."""
        save_file(self.state_for_file(), str(save_path))

    def to_sae(self, hook_in: str, hook_out: str) -> SAE:
        """This transcoder as an ``interp.sae.SAE`` reading ``blocks.{layer}.{hook_in}`` and
        writing ``blocks.{layer}.{hook_out}``; weights in memory are shared, lazy ones read.

        The SAE's JumpReLU and TopK are ReLU'd (``relu(x) * (x > threshold)``, the ReLU of
        the top k): the same features unless a threshold or a kept value is negative."""
        act = self.activation_function
        if isinstance(act, JumpReLU):
            prefix, k = "jumprelu_", None
        elif isinstance(act, TopK):
            prefix, k = "topk_", act.k
        elif act in (F.relu, torch.relu) or isinstance(act, nn.ReLU):
            prefix, k = "", None
        else:
            raise ValueError(
                f"Layer {self.layer_idx}: activation function {act!r}; a transcoder set takes "
                "ReLU, JumpReLU or TopK (interp.circuits.transcoder.activation_functions)."
            )
        skip = "skip_" if self.W_skip is not None else ""
        cfg = SAEConfig(
            d_in=self.d_model, d_sae=self.d_transcoder, architecture=f"{prefix}{skip}transcoder",
            hook_name=f"blocks.{self.layer_idx}.{hook_in}",
            hook_name_out=f"blocks.{self.layer_idx}.{hook_out}",
            **({} if k is None else {"k": k}),  # only the topk configs have k
            apply_b_dec_to_input=False, dtype=str(self.dtype).removeprefix("torch."),
            device=str(self.device),
        )  # fmt: skip
        sae = SAE(cfg)
        shared = {"W_enc": self.W_enc.T, "W_dec": self.W_dec, "b_enc": self.b_enc}
        shared["b_dec"] = self.b_dec
        if isinstance(act, JumpReLU):
            threshold = act.threshold  # a scalar is copied out to one a feature
            shared["threshold"] = (
                threshold if threshold.ndim else threshold.expand(self.d_transcoder).clone()
            )
        if self.W_skip is not None:
            shared["W_skip"] = self.W_skip
        for name, value in shared.items():
            setattr(sae, name, nn.Parameter(value.detach(), requires_grad=value.requires_grad))
        # circuit-tracer's items have an activation_function; the SAE's is a view of its own
        # (a JumpReLU holding the SAE's threshold), kept out of its modules and state dict.
        # Negative thresholds are refused where the set encodes (transcoders.check_thresholds).
        if isinstance(act, JumpReLU):
            view = JumpReLU(0.0, act.bandwidth)
            view.threshold = sae.threshold
        else:
            view = TopK(k) if isinstance(act, TopK) else act
        object.__setattr__(sae, "activation_function", view)
        return sae


def load_relu_transcoder(
    path: str | Path,
    layer: int,
    device: torch.device | str | None = None,
    dtype: torch.dtype = torch.float32,
    lazy_encoder: bool = True,
    lazy_decoder: bool = True,
) -> SingleLayerTranscoder:
    """Read circuit-tracer's ``layer_{i}.safetensors`` (``W_enc``, ``W_dec``, ``b_enc``,
    ``b_dec``, optional ``activation_function.threshold`` (JumpReLU, else ReLU) and
    ``W_skip``); a lazy weight stays in the file."""
    device = device or get_default_device()
    with safe_open(str(path), framework="pt", device=str(device)) as f:
        keys = set(f.keys())
        missing = {"W_enc", "W_dec", "b_enc", "b_dec"} - keys
        if missing:
            raise ValueError(
                f"{path}: missing tensors {sorted(missing)}; expected circuit-tracer's "
                "transcoder file (W_enc, W_dec, b_enc, b_dec)."
            )
        lazy = {"W_enc": lazy_encoder, "W_dec": lazy_decoder}
        state = {key: f.get_tensor(key).to(dtype) for key in keys if not lazy.get(key)}
    threshold = state.pop("activation_function.threshold", None)
    activation = F.relu if threshold is None else JumpReLU(threshold, 0.1)
    d_transcoder, d_model = state["b_enc"].shape[0], state["b_dec"].shape[0]
    transcoder = SingleLayerTranscoder(
        d_model, d_transcoder, activation, layer, skip_connection="W_skip" in state,
        transcoder_path=path, lazy_encoder=lazy_encoder, lazy_decoder=lazy_decoder,
        device=device, dtype=dtype,
    )  # fmt: skip
    for key, value in state.items():
        setattr(transcoder, key, nn.Parameter(value))
    return transcoder


load_transcoder = load_relu_transcoder  # the name in the list; one loader


def load_transcoder_set(
    transcoder_paths: Mapping[int, str | Path],
    scan: str | list[str] | None,
    feature_input_hook: str,
    feature_output_hook: str,
    device: torch.device | str | None = None,
    dtype: torch.dtype = torch.float32,
    special_load_fn: Literal["gemma-scope", "gemma-scope-2", None] = None,
    lazy_encoder: bool = True,
    lazy_decoder: bool = True,
) -> TranscoderSet:
    """A ``TranscoderSet`` from ``{layer: layer_{i}.safetensors}`` (layers 0..n-1).

    The set's maths reads every weight, so lazy ones are read once here (the flags are
    accepted for circuit-tracer's scripts). Gemma Scope's files load with
    ``load_transcoders([SAE folder, ...])`` instead (``interp.sae`` reads their formats)."""
    if special_load_fn is not None:
        raise ValueError(
            f"special_load_fn={special_load_fn!r}: load Gemma Scope transcoders with "
            "interp.circuits.load_transcoders([...their SAE folders...]) (interp.sae reads "
            "their formats), or pass special_load_fn=None for circuit-tracer's files."
        )
    transcoders = {
        layer: load_relu_transcoder(
            path,
            layer,
            device=device,
            dtype=dtype,
            lazy_encoder=lazy_encoder,
            lazy_decoder=lazy_decoder,
        )  # fmt: skip
        for layer, path in transcoder_paths.items()
    }
    return TranscoderSet(transcoders, feature_input_hook, feature_output_hook, scan=scan)
