"""A transcoder set: one transcoder (an ``interp.sae.SAE``) a layer, each reading the same
hook of its block and writing the same output hook, as circuit-tracer's ``TranscoderSet``.

Hooks are named relative to the block: any hook point of a block (``ln2.hook_normalized``,
``hook_resid_mid``, ``hook_mlp_out``), or circuit-tracer's ``mlp.hook_in`` / ``mlp.hook_out``
(the MLP module's input and output; for Gemma's sandwich norms, before ``ln2_post``).

circuit-tracer's folder: ``config.yaml`` (``model_kind: transcoder_set``,
``feature_input_hook``, ``feature_output_hook``, ``scan``, ``model_name``: the model it was
trained on) and ``layer_{i}.safetensors``
holding ``W_enc`` / ``W_dec`` ``[d_transcoder, d_model]``, ``b_enc``, ``b_dec``, optional
``activation_function.threshold`` (JumpReLU) and ``W_skip`` ``[d_model, d_model]``.

A set reading ``ln2.hook_normalized`` reads what circuit-tracer (on TransformerLens 3)
reads there: the normalised input before the norm's weight (and a LayerNorm's bias), although
interp's LayerNorm hook point is after them, as in TransformerLens 2.x
(``ReplacementModel.transcoder_io`` feeds it). Where circuit-tracer differs: JumpReLU here is
``relu(x) * (x > threshold)`` and TopK keeps the ReLU of the top k, so thresholds below zero
or negative top-k values differ.

A set shipped with interp loads by name (``list_transcoders()``), a hub repository by
``hf://owner/repo[/subfolder][@revision]`` (offline once cached).

Example:
    >>> import tempfile
    >>> transcoders = load_transcoders("shakespeare-char-transcoders")  # shipped, offline
    >>> folder = transcoders.save(tempfile.mkdtemp())
    >>> transcoders = load_transcoders(folder)                        # config.yaml + layers
    >>> transcoders = TranscoderSet.from_saes([transcoders[i] for i in range(4)])
    >>> len(transcoders)
    4
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterator, Mapping, Sequence
from importlib import resources
from pathlib import Path
from typing import Any, NamedTuple
from urllib.parse import parse_qs

import torch
import yaml
from jaxtyping import Float
from torch import Tensor, nn

from interp.circuits.cross_layer import CrossLayerTranscoder
from interp.circuits.cross_layer import load_cross_layer_transcoder as load_clt
from interp.sae import SAE, SAEConfig
from interp.sae.formats import SAEFormatError, load_sae
from interp.sae.formats.files import read_safetensors
from interp.sae.model_match import same_model

_BLOCK_HOOK = re.compile(r"^blocks\.(\d+)\.(.+)$")


class TranscoderSet(nn.Module):
    """Per-layer transcoders ``transcoders[layer]`` with their block-relative hooks.

    ``model_name`` is the model they were trained on (default: the one their configs name),
    which ``ReplacementModel`` checks the model against (``interp.sae.model_match``).
    """

    def __init__(
        self,
        transcoders: Sequence[SAE] | Mapping[int, Any],
        feature_input_hook: str,
        feature_output_hook: str,
        scan: str | list[str] | None = None,
        model_name: str | None = None,
    ) -> None:
        """``transcoders``: one ``SAE`` transcoder a layer, in order, or circuit-tracer's
        ``{layer: SingleLayerTranscoder}`` (layers 0..n-1; each is held as its ``to_sae``)."""
        super().__init__()
        if not transcoders:
            raise ValueError("A transcoder set needs at least one transcoder; got none.")
        if isinstance(transcoders, Mapping):
            if sorted(transcoders) != list(range(len(transcoders))):
                raise ValueError(
                    f"Transcoders for layers {sorted(transcoders)}; need one for each layer 0..n-1."
                )
            transcoders = [transcoders[layer] for layer in range(len(transcoders))]
        transcoders = [
            tc.to_sae(feature_input_hook, feature_output_hook) if hasattr(tc, "to_sae") else tc
            for tc in transcoders
        ]
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
        self.model_name = model_name or _common_model_name(transcoders)

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
    def encode(self, layer: int | Tensor, x: Tensor | None = None) -> Tensor:
        """``encode(layer, x)``: layer ``layer``'s feature activations ``[..., d_tc]``;
        ``encode(inputs)`` (circuit-tracer's): every layer's, ``inputs [n_layers, ...,
        d_model]`` -> ``[n_layers, ..., d_tc]``."""
        if x is None:
            return torch.stack([self.encode(i, inputs) for i, inputs in enumerate(layer)])
        check_thresholds(self.transcoders[layer], layer)
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

    def skip_matrix(self, layer: int) -> Float[Tensor, "d_model d_model"] | None:
        """``M`` with ``skip(layer, x) == x @ M`` (None without a skip connection)."""
        return self.transcoders[layer].W_skip.T if self.skip_connection else None

    # ------------------------------------------------- circuit-tracer's method names
    def encode_layer(
        self, x: Tensor, layer_id: int, apply_activation_function: bool = True
    ) -> Float[Tensor, "... d_tc"]:
        """Layer ``layer_id``'s activations (pre-activations without the function)."""
        if apply_activation_function:
            return self.encode(layer_id, x)
        sae = self.transcoders[layer_id]
        return sae.process_sae_in(x, hooked=False) @ sae.W_enc + sae.b_enc

    def apply_activation_function(self, layer_id: int, features: Tensor) -> Tensor:
        """Layer ``layer_id``'s activation function applied to pre-activations."""
        sae = self.transcoders[layer_id]
        if sae.cfg.activation == "relu":
            return torch.relu(features)
        if sae.cfg.activation == "jumprelu":
            return torch.relu(features) * (features > sae.threshold).to(features.dtype)
        values, indices = torch.topk(features, k=sae.cfg.k, dim=-1, sorted=False)
        return torch.zeros_like(features).scatter_(-1, indices, values.relu())

    def compute_skip(self, layer_id: int, inputs: Tensor) -> Tensor:
        if not self.skip_connection:
            raise ValueError("These transcoders have no skip connection (W_skip).")
        return self.skip(layer_id, inputs)

    def _get_decoder_vectors(self, layer_id: int, features: Tensor | None = None) -> Tensor:
        W_dec = self.transcoders[layer_id].W_dec
        return W_dec if features is None else W_dec[features]

    def decode(self, acts: Tensor, input_acts: Tensor | None = None) -> Tensor:
        """Every layer's output ``[n_layers, ..., d_model]`` from its activations ``acts``
        (skip path from ``input_acts``, needed when the transcoders have one)."""
        if self.skip_connection and input_acts is None:
            raise ValueError("These transcoders have a skip connection: pass input_acts.")
        outs = []
        for layer, sae in enumerate(self.transcoders):
            out = sae.decode(acts[layer], hooked=False)
            outs.append(out + sae.skip(input_acts[layer]) if self.skip_connection else out)
        return torch.stack(outs)

    def select_decoder_vectors(self, features: Tensor) -> tuple[Tensor, ...]:
        """For sparse ``features [n_layers, pos, d_tc]``: (positions, layers, feature ids,
        activation-scaled decoder rows, encoder index of each row), in the tensor's order."""
        features = features.coalesce() if features.is_sparse else features.to_sparse()
        layers, positions, ids = features.indices()
        values = features.values()
        vectors = torch.zeros(len(values), self.widths[0][1], dtype=values.dtype)
        vectors = vectors.to(values.device)
        for layer in layers.unique().tolist():
            mask = layers == layer
            vectors[mask] = self._get_decoder_vectors(layer, ids[mask]) * values[mask, None]
        return positions, layers, ids, vectors, torch.arange(len(values), device=values.device)

    def compute_attribution_components(
        self, mlp_inputs: Float[Tensor, "n_layers pos d_model"], zero_positions: slice = slice(0, 1)
    ) -> dict[str, Tensor]:
        """circuit-tracer's summary of one prompt's transcoders: ``activation_matrix``
        (sparse ``[n_layers, pos, d_tc]``, ``zero_positions`` zeroed), ``reconstruction``
        ``[n_layers, pos, d_model]``, ``encoder_vecs`` / ``decoder_vecs`` (scaled by the
        activation) of the active features, ``encoder_to_decoder_map`` and
        ``decoder_locations`` (layer, position of each decoder row)."""
        acts = self.encode(mlp_inputs)
        acts[:, zero_positions] = 0
        matrix = acts.to_sparse().coalesce()
        positions, layers, ids, decoders, mapping = self.select_decoder_vectors(matrix)
        encoders = torch.cat(
            [self.encoder_vectors(i, ids[layers == i]) for i in range(self.n_layers)]
        )
        reconstruction = self.decode(acts, mlp_inputs)
        return {
            "activation_matrix": matrix,
            "reconstruction": reconstruction,
            "encoder_vecs": encoders,
            "decoder_vecs": decoders,
            "encoder_to_decoder_map": mapping,
            "decoder_locations": torch.stack([layers, positions]),
        }

    def to_safetensors(self, save_dir: str | Path) -> None:
        """circuit-tracer's ``layer_{i}.safetensors`` files (no config: see ``save``)."""
        self._write_layers(Path(save_dir))

    def _write_layers(self, folder: Path) -> None:
        from safetensors.torch import save_file

        folder.mkdir(parents=True, exist_ok=True)
        for layer, tc in enumerate(self.transcoders):
            state = {"W_enc": tc.W_enc.T, "W_dec": tc.W_dec, "b_enc": tc.b_enc, "b_dec": tc.b_dec}
            if tc.cfg.activation == "jumprelu":
                state["activation_function.threshold"] = tc.threshold
            if tc.cfg.has_skip:
                state["W_skip"] = tc.W_skip
            state = {key: value.detach().cpu().contiguous() for key, value in state.items()}
            save_file(state, str(folder / f"layer_{layer}.safetensors"))

    def save(self, folder: str | Path) -> Path:
        """Write circuit-tracer's folder (``config.yaml`` + ``layer_{i}.safetensors``)."""
        folder = Path(folder)
        self._write_layers(folder)
        config = {"model_kind": "transcoder_set", "feature_input_hook": self.feature_input_hook}
        config["feature_output_hook"] = self.feature_output_hook
        config["scan"] = self.scan
        if self.model_name is not None:  # circuit-tracer's key: the model they were trained on
            config["model_name"] = self.model_name
        (folder / "config.yaml").write_text(yaml.safe_dump(config))
        return folder


def _common_model_name(transcoders: Sequence[SAE]) -> str | None:
    """The model the transcoders' configs name (None when none does); a ``ValueError`` when
    they name different models."""
    names = [t.cfg.model_name for t in transcoders if t.cfg.model_name]
    if any(not same_model(name, names[0]) for name in names):
        raise ValueError(
            f"The transcoders were trained on different models {sorted(set(names))}; a set "
            "holds one model's transcoders."
        )
    return names[0] if names else None


def check_thresholds(transcoder: SAE, layer: int) -> None:
    """Refuse a JumpReLU with negative thresholds: circuit-tracer keeps the negative
    pre-activations above them (``x * (x > threshold)``), interp's transcoders are ReLU'd
    (``relu(x) * (x > threshold)``), so the graphs would differ. Checked where the
    transcoder encodes, since a threshold may change after the set is built."""
    threshold = getattr(transcoder, "threshold", None)
    if transcoder.cfg.activation == "jumprelu" and threshold is not None and (threshold < 0).any():
        raise ValueError(
            f"Layer {layer}'s JumpReLU has negative thresholds: circuit-tracer keeps the "
            "negative pre-activations above them, interp's transcoders (ReLU'd) do not, so the "
            "graphs would differ. Clamp the thresholds at 0 if that is what you mean."
        )


def _layer_transcoder(
    path: Path,
    layer: int,
    hook_in: str,
    hook_out: str,
    dtype: torch.dtype,
    model_name: str | None = None,
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
        model_name=model_name,
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


def _shipped_folder() -> Path:
    return Path(str(resources.files("interp.shipped"))) / "transcoders"


def list_transcoders() -> list[str]:
    """The names of the transcoder sets shipped with interp, sorted.

    Example:
        >>> list_transcoders()
        ['shakespeare-char-transcoders']
    """
    folder = _shipped_folder()
    if not folder.is_dir():
        return []
    return sorted(entry.name for entry in folder.iterdir() if (entry / "config.yaml").is_file())


class HubRef(NamedTuple):
    """A transcoder repository on the Hugging Face hub: its id, a folder in it, a revision."""

    repo_id: str
    subfolder: str | None
    revision: str | None

    @classmethod
    def parse(cls, ref: str) -> HubRef:
        """``hf://owner/repo[/subfolder][@revision]`` (or circuit-tracer's
        ``?revision=...``), or a plain ``owner/repo[/subfolder][@revision]``.

        Example:
            >>> HubRef.parse("hf://mntss/clt-gemma-2-2b-426k@main")
            HubRef(repo_id='mntss/clt-gemma-2-2b-426k', subfolder=None, revision='main')
        """
        text = ref.removeprefix("hf://")
        text, _, query = text.partition("?")
        text, _, revision = text.partition("@")
        if query:
            revision = parse_qs(query).get("revision", [revision])[0]
        parts = [part for part in text.split("/") if part]
        if len(parts) < 2:
            raise ValueError(
                f"{ref!r} is not a hub repository: expected hf://owner/repo[/subfolder][@revision]."
            )
        return cls("/".join(parts[:2]), "/".join(parts[2:]) or None, revision or None)

    @property
    def scan(self) -> str:
        """circuit-tracer's ``scan`` for this reference (``repo//subfolder@revision``)."""
        where = self.repo_id + (f"//{self.subfolder}" if self.subfolder else "")
        return f"{where}@{self.revision}" if self.revision else where


# circuit-tracer's names for its first transcoder repositories
_LEGACY_HUB_NAMES = {
    "gemma": "mwhanna/gemma-scope-transcoders",
    "llama": "mntss/transcoder-Llama-3.2-1B",
}
_REPO_ID = re.compile(r"^[\w.-]+/[\w.-]+(/[^@?]*)?([@?].*)?$")
_FILES = ("config.yaml", "layer_*.safetensors", "W_enc_*.safetensors", "W_dec_*.safetensors")


def _hub_file(uri: str) -> Path:
    """The local copy of one file ``hf://owner/repo/path/to/file[@revision]``."""
    from huggingface_hub import hf_hub_download

    ref = HubRef.parse(uri)
    if ref.subfolder is None:
        raise ValueError(f"{uri!r} names no file in the repository.")
    return Path(hf_hub_download(ref.repo_id, ref.subfolder, revision=ref.revision))


def hub_folder(ref: HubRef) -> Path:
    """The local snapshot of ``ref``'s transcoder files (``config.yaml``, ``layer_*`` or a
    CLT's ``W_enc_*`` / ``W_dec_*``): from the cache when it has them (so offline once
    cached, and always with ``HF_HUB_OFFLINE=1``), else downloaded."""
    from huggingface_hub import snapshot_download
    from huggingface_hub.utils import LocalEntryNotFoundError

    prefix = f"{ref.subfolder.strip('/')}/" if ref.subfolder else ""
    kwargs = {"revision": ref.revision, "allow_patterns": [prefix + name for name in _FILES]}
    try:
        folder = Path(snapshot_download(ref.repo_id, **kwargs, local_files_only=True)) / prefix
        if (folder / "config.yaml").is_file():
            return folder
    except LocalEntryNotFoundError:  # not cached: download below
        pass
    try:
        return Path(snapshot_download(ref.repo_id, **kwargs)) / prefix
    except Exception as error:
        raise FileNotFoundError(
            f"Transcoders {ref.scan!r}: not in the Hugging Face cache and not downloadable "
            f"({type(error).__name__}: {error}). Connect once to cache them (unset "
            "HF_HUB_OFFLINE if set), or pass a local folder."
        ) from error


def load_transcoders(
    path: str | Path | Sequence[str | Path | SAE], dtype: torch.dtype = torch.float32
) -> TranscoderSet | CrossLayerTranscoder:
    """A transcoder set from circuit-tracer's folder (``config.yaml`` + ``layer_{i}``
    files; ``model_kind: cross_layer_transcoder`` reads a CLT), or from a list of SAE
    folders / ``SAE`` objects (SAELens, Gemma Scope 2, ...)
    with ``blocks.{layer}.`` hook names.

    ``path`` may also name a set shipped with interp (``list_transcoders()``), or a hub
    repository holding that folder, as circuit-tracer takes it: ``hf://owner/repo
    [/subfolder][@revision]`` or plain ``owner/repo[/subfolder][@revision]`` (read from
    the Hugging Face cache once downloaded, so offline after the first time).

    Example:
        >>> transcoders = load_transcoders("shakespeare-char-transcoders")  # shipped with interp
        >>> len(transcoders)
        4
        >>> hub = "hf://mntss/transcoder-Llama-3.2-1B"       # cached after one download
        >>> transcoders = load_transcoders(hub)  # needs the hub  # doctest: +SKIP
    """
    if not isinstance(path, (str, Path)):
        saes = [item if isinstance(item, SAE) else load_sae(item, dtype=dtype) for item in path]
        return TranscoderSet.from_saes(saes)
    text = str(path)
    if isinstance(path, str) and not Path(path).exists():
        if text in list_transcoders():
            return _load_folder(_shipped_folder() / text, dtype)
        text = _LEGACY_HUB_NAMES.get(text, text)
        if text.startswith("hf://") or _REPO_ID.match(text):
            ref = HubRef.parse(text)
            return _load_folder(hub_folder(ref), dtype, scan=ref.scan)
        close = difflib.get_close_matches(text, list_transcoders(), n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise FileNotFoundError(
            f"{text!r} is not a folder, nor a shipped transcoder set{hint} "
            f"{list_transcoders()}, nor a hub repository (hf://owner/repo[/subfolder])."
        )
    return _load_folder(Path(path), dtype)


def _load_folder(
    folder: Path, dtype: torch.dtype, scan: str | None = None
) -> TranscoderSet | CrossLayerTranscoder:
    """circuit-tracer's folder; ``scan`` (a hub reference's) overrides its config's."""
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
    hooks = (config["feature_input_hook"], config["feature_output_hook"])
    scan = scan or config.get("scan", str(folder))
    model_name = config.get("model_name")  # the model they were trained on, when it says
    if model_name is not None and not isinstance(model_name, str):
        raise SAEFormatError(f"{config_path}: model_name {model_name!r} is not a model's name.")
    if kind == "cross_layer_transcoder":
        return load_clt(folder, *hooks, scan=scan, dtype=dtype, model_name=model_name)
    files = _layer_files(folder, config, config_path)
    transcoders = [
        _layer_transcoder(files[i], i, *hooks, dtype, model_name) for i in range(len(files))
    ]
    return TranscoderSet(transcoders, *hooks, scan=scan, model_name=model_name)


def _layer_files(folder: Path, config: dict, config_path: Path) -> dict[int, Path]:
    """Layer -> file: the config's ``transcoders`` list (``hf://`` URIs or paths, as
    circuit-tracer's), else the folder's ``layer_{i}.safetensors``."""
    if "transcoders" in config:
        entries = list(config["transcoders"])
        if not all(str(entry).endswith(".safetensors") for entry in entries):
            raise SAEFormatError(
                f"{config_path}: its 'transcoders' list holds files other than circuit-tracer's "
                "layer .safetensors (e.g. Gemma Scope's params.npz); load those with "
                "load_transcoders([SAE folder, ...]) (interp.sae reads their formats)."
            )
        paths = [_hub_file(e) if e.startswith("hf://") else folder / e for e in entries]
        return dict(enumerate(paths))
    files = {int(p.stem.split("_")[1]): p for p in folder.glob("layer_*.safetensors")}
    if not files or sorted(files) != list(range(len(files))):
        raise SAEFormatError(f"{folder}: layer files for layers {sorted(files)}; need 0..n-1.")
    return files
