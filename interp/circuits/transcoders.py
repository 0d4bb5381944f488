"""A transcoder set: one transcoder (an ``interp.sae.SAE``) a layer, each reading the same
hook of its block and writing the same output hook, as circuit-tracer's ``TranscoderSet``.

Hooks are named relative to the block: any hook point of a block (``ln2.hook_normalized``,
``hook_resid_mid``, ``hook_mlp_out``), or circuit-tracer's ``mlp.hook_in`` / ``mlp.hook_out``
(the MLP module's input and output; for Gemma's sandwich norms, before ``ln2_post``).

circuit-tracer's folder: ``config.yaml`` (``model_kind: transcoder_set``,
``feature_input_hook``, ``feature_output_hook``, ``scan``) and ``layer_{i}.safetensors``
holding ``W_enc`` / ``W_dec`` ``[d_transcoder, d_model]``, ``b_enc``, ``b_dec``, optional
``activation_function.threshold`` (JumpReLU) and ``W_skip`` ``[d_model, d_model]``.

Where circuit-tracer (on TransformerLens 3) differs: LayerNorm's ``hook_normalized`` is
after its weight and bias here (TransformerLens 2.x) but before them there, so a set that
reads ``ln2.hook_normalized`` of a LayerNorm model sees other inputs (RMSNorm's is before
the weight in both); JumpReLU here is ``relu(x) * (x > threshold)`` and TopK keeps the
ReLU of the top k, so thresholds below zero or negative top-k values differ.

Example:
    >>> transcoders = load_transcoders("path/to/transcoder_set")      # config.yaml + layers
    >>> transcoders = TranscoderSet.from_saes([SAE.load(f"tc/layer_{i}") for i in range(6)])
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from pathlib import Path

import torch
import yaml
from jaxtyping import Float
from torch import Tensor, nn

from interp.circuits.cross_layer import CrossLayerTranscoder
from interp.circuits.cross_layer import load_cross_layer_transcoder as load_clt
from interp.sae import SAE, SAEConfig
from interp.sae.formats import SAEFormatError, load_sae
from interp.sae.formats.files import read_safetensors

_BLOCK_HOOK = re.compile(r"^blocks\.(\d+)\.(.+)$")


class TranscoderSet(nn.Module):
    """Per-layer transcoders ``transcoders[layer]`` with their block-relative hooks."""

    def __init__(
        self,
        transcoders: Sequence[SAE],
        feature_input_hook: str,
        feature_output_hook: str,
        scan: str | list[str] | None = None,
    ) -> None:
        super().__init__()
        if not transcoders:
            raise ValueError("A transcoder set needs at least one transcoder; got none.")
        for layer, transcoder in enumerate(transcoders):
            if not transcoder.cfg.is_transcoder:
                raise ValueError(
                    f"Layer {layer}'s SAE has architecture {transcoder.cfg.architecture!r}, "
                    "not a transcoder (it must read one hook and write another)."
                )
            if transcoder.cfg.activation not in ("relu", "jumprelu", "topk"):
                raise ValueError(f"Layer {layer}: activation {transcoder.cfg.activation!r}.")
        widths = {t.cfg.d_sae for t in transcoders}
        if len(widths) != 1:
            raise ValueError(f"The transcoders have different widths {sorted(widths)}.")
        skips = {t.cfg.has_skip for t in transcoders}
        if len(skips) != 1:
            raise ValueError("Some transcoders have a skip connection (W_skip) and some not.")
        self.transcoders = nn.ModuleList(transcoders)
        self.feature_input_hook = feature_input_hook
        self.feature_output_hook = feature_output_hook
        self.scan = scan

    @classmethod
    def from_saes(cls, saes: Sequence[SAE], scan: str | list[str] | None = None) -> TranscoderSet:
        """A set from SAELens-style transcoders whose ``hook_name`` / ``hook_name_out`` are
        ``blocks.{layer}.<hook>``, one for each layer 0..n-1 (in any order)."""
        by_layer: dict[int, SAE] = {}
        relative: set[tuple[str, str]] = set()
        for sae in saes:
            hook_in = _BLOCK_HOOK.match(sae.cfg.hook_name)
            hook_out = _BLOCK_HOOK.match(sae.cfg.output_hook)
            if hook_in is None or hook_out is None or hook_in.group(1) != hook_out.group(1):
                raise ValueError(
                    f"Transcoder hooks {sae.cfg.hook_name!r} -> {sae.cfg.output_hook!r}: both "
                    "must be inside the same block (blocks.<layer>.<hook>)."
                )
            layer = int(hook_in.group(1))
            if layer in by_layer:
                raise ValueError(f"Two transcoders for layer {layer}.")
            by_layer[layer] = sae
            relative.add((hook_in.group(2), hook_out.group(2)))
        if sorted(by_layer) != list(range(len(by_layer))):
            raise ValueError(f"Transcoders for layers {sorted(by_layer)}; need 0..n-1, one each.")
        if len(relative) != 1:
            raise ValueError(f"The transcoders read and write different hooks: {relative}.")
        hook_in, hook_out = relative.pop()
        return cls([by_layer[i] for i in range(len(by_layer))], hook_in, hook_out, scan)

    # ------------------------------------------------------------------- properties
    def __len__(self) -> int:
        return len(self.transcoders)

    def __getitem__(self, layer: int) -> SAE:
        return self.transcoders[layer]

    def __iter__(self) -> Iterator[SAE]:
        return iter(self.transcoders)

    @property
    def n_layers(self) -> int:
        return len(self.transcoders)

    @property
    def d_transcoder(self) -> int:
        return self.transcoders[0].cfg.d_sae

    @property
    def skip_connection(self) -> bool:
        return self.transcoders[0].cfg.has_skip

    # ----------------------------------------------------------------------- maths
    def encode(self, layer: int, x: Float[Tensor, "... d_model"]) -> Float[Tensor, "... d_tc"]:
        """Feature activations of layer ``layer``'s transcoder."""
        return self.transcoders[layer].encode(x, hooked=False)

    def encoder_vectors(self, layer: int, features: Tensor) -> Float[Tensor, "n d_model"]:
        """The rows that read each feature's pre-activation from the input."""
        return self.transcoders[layer].W_enc.T[features]

    @property
    def widths(self) -> list[tuple[int, int]]:
        """(input, output) width of each layer's transcoder."""
        return [(t.cfg.d_in, t.cfg.output_width) for t in self.transcoders]

    def writes_to(self, layer: int) -> range:
        """The layers a feature of ``layer`` writes to: its own."""
        return range(layer, layer + 1)

    def decoder_vectors(
        self, layer: int, features: Tensor, target_layer: int | None = None
    ) -> Float[Tensor, "n d_model"]:
        return self.transcoders[layer].W_dec[features]

    def decoder_bias(self, layer: int) -> Float[Tensor, " d_model"]:
        return self.transcoders[layer].b_dec

    def skip(self, layer: int, x: Float[Tensor, "... d_model"]) -> Float[Tensor, "... d_model"]:
        """``x @ W_skip.T`` (zero without a skip connection)."""
        if not self.skip_connection:
            return torch.zeros_like(x)
        return self.transcoders[layer].skip(x)

    def save(self, folder: str | Path) -> Path:
        """Write circuit-tracer's folder (``config.yaml`` + ``layer_{i}.safetensors``)."""
        from safetensors.torch import save_file

        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        for layer, tc in enumerate(self.transcoders):
            state = {"W_enc": tc.W_enc.T, "W_dec": tc.W_dec, "b_enc": tc.b_enc, "b_dec": tc.b_dec}
            if tc.cfg.activation == "jumprelu":
                state["activation_function.threshold"] = tc.threshold
            if tc.cfg.has_skip:
                state["W_skip"] = tc.W_skip
            state = {key: value.detach().cpu().contiguous() for key, value in state.items()}
            save_file(state, str(folder / f"layer_{layer}.safetensors"))
        config = {"model_kind": "transcoder_set", "feature_input_hook": self.feature_input_hook}
        config["feature_output_hook"] = self.feature_output_hook
        config["scan"] = self.scan
        (folder / "config.yaml").write_text(yaml.safe_dump(config))
        return folder


def _layer_transcoder(
    path: Path, layer: int, hook_in: str, hook_out: str, dtype: torch.dtype
) -> SAE:
    tensors = read_safetensors(path)
    missing = {"W_enc", "W_dec", "b_enc", "b_dec"} - set(tensors)
    if missing:
        raise SAEFormatError(f"{path}: missing tensors {sorted(missing)}.")
    d_transcoder, d_model = tensors["W_enc"].shape
    jumprelu = "activation_function.threshold" in tensors
    skip = "W_skip" in tensors
    architecture = ("jumprelu_" if jumprelu else "") + ("skip_" if skip else "") + "transcoder"
    cfg = SAEConfig(
        d_in=d_model,
        d_sae=d_transcoder,
        d_out=tensors["W_dec"].shape[1],
        architecture=architecture,
        hook_name=f"blocks.{layer}.{hook_in}",
        hook_name_out=f"blocks.{layer}.{hook_out}",
        apply_b_dec_to_input=False,
        dtype=str(dtype).removeprefix("torch."),
    )
    sae = SAE(cfg)
    state = {"W_enc": tensors["W_enc"].T, "W_dec": tensors["W_dec"]}
    state.update(b_enc=tensors["b_enc"], b_dec=tensors["b_dec"])
    if jumprelu:
        state["threshold"] = tensors["activation_function.threshold"]
    if skip:
        state["W_skip"] = tensors["W_skip"]
    expected = {name: tuple(param.shape) for name, param in sae.named_parameters()}
    for name, value in state.items():
        if tuple(value.shape) != expected[name]:
            raise SAEFormatError(
                f"{path}: {name} has shape {tuple(value.shape)}, expected {expected[name]}."
            )
    with torch.no_grad():
        for name, value in state.items():
            getattr(sae, name).copy_(value.to(dtype))
    return sae


def load_transcoders(
    path: str | Path | Sequence[str | Path | SAE], dtype: torch.dtype = torch.float32
) -> TranscoderSet | CrossLayerTranscoder:
    """A transcoder set from circuit-tracer's folder (``config.yaml`` + ``layer_{i}``
    files; ``model_kind: cross_layer_transcoder`` reads a CLT), or from a list of SAE
    folders / ``SAE`` objects (SAELens, Gemma Scope 2, ...)
    with ``blocks.{layer}.`` hook names."""
    if not isinstance(path, (str, Path)):
        saes = [item if isinstance(item, SAE) else load_sae(item, dtype=dtype) for item in path]
        return TranscoderSet.from_saes(saes)
    folder = Path(path)
    config_path = folder / "config.yaml"
    if not config_path.is_file():
        raise FileNotFoundError(
            f"{folder}: no config.yaml; expected circuit-tracer's transcoder folder "
            "(config.yaml + layer_{i}.safetensors), or pass a list of SAE folders."
        )
    config = yaml.safe_load(config_path.read_text()) or {}
    kind = config.get("model_kind")
    if kind not in ("transcoder_set", "cross_layer_transcoder"):
        raise ValueError(
            f"{config_path}: model_kind {kind!r}; expected 'transcoder_set' (per-layer "
            "transcoders) or 'cross_layer_transcoder'."
        )
    for key in ("feature_input_hook", "feature_output_hook"):
        if key not in config:
            raise SAEFormatError(f"{config_path}: missing {key!r}.")
    if kind == "cross_layer_transcoder":
        hooks = (config["feature_input_hook"], config["feature_output_hook"])
        scan = config.get("scan", str(folder))
        return load_clt(folder, *hooks, scan=scan, dtype=dtype)
    files = {int(p.stem.split("_")[1]): p for p in folder.glob("layer_*.safetensors")}
    if not files or sorted(files) != list(range(len(files))):
        raise SAEFormatError(f"{folder}: layer files for layers {sorted(files)}; need 0..n-1.")
    hooks = (config["feature_input_hook"], config["feature_output_hook"])
    transcoders = [_layer_transcoder(files[i], i, *hooks, dtype) for i in range(len(files))]
    return TranscoderSet(transcoders, *hooks, scan=config.get("scan", str(folder)))
