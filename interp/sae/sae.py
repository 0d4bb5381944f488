"""The sparse autoencoder: SAELens's architectures, parameter names and hook points.

One ``SAE`` class covers the inference forms in use, chosen by ``cfg.architecture``
(SAELens's names): ``standard`` (ReLU), ``jumprelu`` (``threshold``), ``topk`` (``k``),
``gated`` (``b_gate``, ``r_mag``, ``b_mag``) and the transcoders ``transcoder``,
``skip_transcoder`` (``W_skip``), ``jumprelu_transcoder``, ``jumprelu_skip_transcoder``,
``topk_transcoder`` and ``topk_skip_transcoder`` (sparsify's), which read one hook and
write another (``cfg.hook_name_out``). Tensors use SAELens's ``x @ W_enc`` convention:
``W_enc [d_in, d_sae]``, ``b_enc [d_sae]``, ``W_dec [d_sae, d_out]``, ``b_dec [d_out]``.

    x' = norm(x) - b_dec * apply_b_dec_to_input;  h = x' W_enc + b_enc
    standard: relu(h)                 jumprelu: relu(h) * 1[h > threshold]
    topk:     relu of the k largest h (h * ||W_dec|| with rescale_acts_by_decoder_norm)
    gated:    1[x' W_enc + b_gate > 0] * relu(x' (W_enc * exp(r_mag)) + b_mag)
    decode:   denorm(f W_dec + b_dec)  skip transcoders add x W_skip^T
"""

from __future__ import annotations

import re
import types
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from jaxtyping import Float
from torch import Tensor, nn

from interp.hooks import HookedRootModule, HookPoint
from interp.utils.dtypes import dtype_name, parse_dtype

# architecture -> (activation, is_transcoder, has_skip)
ARCHITECTURES: dict[str, tuple[str, bool, bool]] = {
    "standard": ("relu", False, False),
    "jumprelu": ("jumprelu", False, False),
    "topk": ("topk", False, False),
    "gated": ("gated", False, False),
    "transcoder": ("relu", True, False),
    "skip_transcoder": ("relu", True, True),
    "jumprelu_transcoder": ("jumprelu", True, False),
    "jumprelu_skip_transcoder": ("jumprelu", True, True),
    "topk_transcoder": ("topk", True, False),
    "topk_skip_transcoder": ("topk", True, True),
}
NORMALIZATIONS = ("none", "expected_average_only_in", "constant_norm_rescale", "layer_norm")
_LAYER = re.compile(r"^blocks\.(\d+)\.")


@dataclass
class SAEConfig:
    """What an SAE is and where it reads (SAELens 6.x field names; ``metadata`` keeps the rest).

    ``norm_scaling_factor`` (``expected_average_only_in``): inputs were scaled by it in
    training; loaders fold it into the weights, so at run time the normalisation is a no-op
    as in SAELens.
    """

    d_in: int
    d_sae: int
    architecture: str = "standard"
    hook_name: str = ""
    hook_name_out: str | None = None  # transcoders: the hook their output replaces
    d_out: int | None = None  # transcoders: the output width (default d_in)
    hook_head_index: int | None = None
    k: int | None = None  # topk
    rescale_acts_by_decoder_norm: bool = False  # topk
    apply_b_dec_to_input: bool = True
    normalize_activations: str = "none"
    reshape_activations: str = "none"  # "hook_z": flatten [.., n_heads, d_head]
    dtype: str = "float32"
    device: str = "cpu"
    model_name: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)  # prepend_bos, context_size, ...

    def __post_init__(self) -> None:
        if self.architecture not in ARCHITECTURES:
            raise ValueError(
                f"Unknown SAE architecture {self.architecture!r}; supported: "
                f"{sorted(ARCHITECTURES)}."
            )
        if self.normalize_activations not in NORMALIZATIONS:
            raise ValueError(
                f"normalize_activations={self.normalize_activations!r} is not supported; "
                f"use one of {list(NORMALIZATIONS)}."
            )
        if self.reshape_activations not in ("none", "hook_z"):
            raise ValueError(
                f"reshape_activations={self.reshape_activations!r}; use 'none' or 'hook_z'."
            )
        for name in ("d_in", "d_sae"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
                raise ValueError(f"SAE config {name}={value!r}; it must be a positive int.")
        if self.activation == "topk" and not (isinstance(self.k, int) and 0 < self.k):
            raise ValueError(f"A topk SAE needs k, a positive int (got k={self.k!r}); set cfg k.")
        if self.activation == "topk" and self.k > self.d_sae:
            raise ValueError(f"k={self.k} is larger than d_sae={self.d_sae}.")
        if self.is_transcoder:
            if self.d_out is None:
                self.d_out = self.d_in
            if self.apply_b_dec_to_input:
                raise ValueError(
                    f"apply_b_dec_to_input=True with architecture {self.architecture!r}: a "
                    "transcoder's b_dec lives at its output hook; set it to False."
                )
        elif self.d_out not in (None, self.d_in):
            raise ValueError(
                f"d_out={self.d_out} differs from d_in={self.d_in}, but architecture "
                f"{self.architecture!r} is not a transcoder."
            )

    @property
    def activation(self) -> str:
        """``relu``, ``jumprelu``, ``topk`` or ``gated``."""
        return ARCHITECTURES[self.architecture][0]

    @property
    def is_transcoder(self) -> bool:
        return ARCHITECTURES[self.architecture][1]

    @property
    def has_skip(self) -> bool:
        return ARCHITECTURES[self.architecture][2]

    @property
    def output_width(self) -> int:
        return self.d_out if self.is_transcoder else self.d_in

    @property
    def output_hook(self) -> str:
        """The hook whose activation the SAE's output replaces when spliced."""
        return self.hook_name_out or self.hook_name

    @property
    def hook_layer(self) -> int | None:
        """The block index in ``hook_name`` (``blocks.3.hook_resid_post`` -> 3)."""
        match = _LAYER.match(self.hook_name)
        return int(match.group(1)) if match else None

    @property
    def metadata(self) -> types.SimpleNamespace:
        """SAELens 6.x's ``cfg.metadata`` view (``sae.cfg.metadata.hook_name``)."""
        return types.SimpleNamespace(**self.metadata_dict())

    def metadata_dict(self) -> dict[str, Any]:
        meta = {"model_name": self.model_name, "hook_name": self.hook_name}
        meta["hook_head_index"] = self.hook_head_index
        if self.hook_name_out is not None:
            meta["hook_name_out"] = self.hook_name_out
        return {**self.extra, **meta}

    def to_dict(self) -> dict[str, Any]:
        """SAELens 6.x's ``cfg.json``."""
        out: dict[str, Any] = {
            "architecture": self.architecture,
            "d_in": self.d_in,
            "d_sae": self.d_sae,
            "dtype": self.dtype,
            "device": self.device,
            "apply_b_dec_to_input": self.apply_b_dec_to_input,
            "normalize_activations": self.normalize_activations,
            "reshape_activations": self.reshape_activations,
            "metadata": {"sae_lens_version": "6.0.0", **self.metadata_dict()},
        }
        if self.activation == "topk":
            out["k"] = self.k
            out["rescale_acts_by_decoder_norm"] = self.rescale_acts_by_decoder_norm
        if self.is_transcoder:
            out["d_out"] = self.d_out
        return out


# The dtypes an SAE's weights may have.
_DTYPES = (torch.float32, torch.float64, torch.float16, torch.bfloat16)


def str_to_dtype(name: str | torch.dtype) -> torch.dtype:
    """An SAE's dtype from itself or its name (``interp.utils.dtypes.parse_dtype``)."""
    return parse_dtype(name, "SAE dtype", allowed=_DTYPES)


def dtype_to_str(dtype: torch.dtype) -> str:
    """The name an SAE's config stores for ``dtype`` (``"bfloat16"``)."""
    return dtype_name(dtype)


class SAE(HookedRootModule):
    """A sparse autoencoder (or transcoder) with SAELens's parameters and hook points.

    Hook points: ``hook_sae_input`` (flattened, before normalisation), ``hook_sae_acts_pre``,
    ``hook_sae_acts_post`` (the features), ``hook_sae_recons`` (before denormalisation),
    ``hook_sae_error`` and ``hook_sae_output``.

    Example:
        >>> sae = SAE(SAEConfig(d_in=64, d_sae=512, hook_name="blocks.1.hook_resid_post"))
        >>> resid = torch.randn(2, 5, 64)       # [batch, pos, d_in]
        >>> features = sae.encode(resid)        # [batch, pos, 512]
        >>> recon = sae.decode(features)        # [batch, pos, 64]; sae(resid) does both
        >>> features.shape, recon.shape
        (torch.Size([2, 5, 512]), torch.Size([2, 5, 64]))
    """

    def __init__(self, cfg: SAEConfig | dict[str, Any], use_error_term: bool = False) -> None:
        super().__init__()
        if isinstance(cfg, dict):
            cfg = SAEConfig(**cfg)
        self.cfg = cfg
        self.use_error_term = use_error_term
        kind = {"dtype": str_to_dtype(cfg.dtype), "device": torch.device(cfg.device)}
        d_in, d_sae, d_out = cfg.d_in, cfg.d_sae, cfg.output_width
        self.W_enc = nn.Parameter(torch.empty(d_in, d_sae, **kind))
        self.W_dec = nn.Parameter(torch.empty(d_sae, d_out, **kind))
        self.b_dec = nn.Parameter(torch.zeros(d_out, **kind))
        if cfg.activation == "gated":
            self.b_gate = nn.Parameter(torch.zeros(d_sae, **kind))
            self.r_mag = nn.Parameter(torch.zeros(d_sae, **kind))
            self.b_mag = nn.Parameter(torch.zeros(d_sae, **kind))
        else:
            self.b_enc = nn.Parameter(torch.zeros(d_sae, **kind))
        if cfg.activation == "jumprelu":
            self.threshold = nn.Parameter(torch.zeros(d_sae, **kind))
        if cfg.has_skip:
            self.W_skip = nn.Parameter(torch.zeros(d_out, d_in, **kind))
        nn.init.kaiming_uniform_(self.W_dec)
        if cfg.is_transcoder:
            nn.init.kaiming_uniform_(self.W_enc)
        else:
            with torch.no_grad():
                self.W_enc.copy_(self.W_dec.T)
        self.hook_sae_input = HookPoint()  # [..., d_in]
        self.hook_sae_acts_pre = HookPoint()  # [..., d_sae]
        self.hook_sae_acts_post = HookPoint()  # [..., d_sae]
        self.hook_sae_recons = HookPoint()  # [..., d_out]
        self.hook_sae_error = HookPoint()  # [..., d_out]
        self.hook_sae_output = HookPoint()  # [..., d_out]
        self.d_head: int | None = None  # hook_z SAEs: learnt from the input's last axis
        self._norm_state: tuple[Tensor, ...] | None = None  # the last encode's input norm
        self.setup()

    # ----------------------------------------------------------------- conveniences
    @property
    def dtype(self) -> torch.dtype:
        return self.W_enc.dtype

    @property
    def device(self) -> torch.device:
        return self.W_enc.device

    def to(self, *args: Any, **kwargs: Any) -> SAE:
        """``nn.Module.to``, keeping ``cfg.dtype`` and ``cfg.device`` in step."""
        out = super().to(*args, **kwargs)
        self.cfg.dtype = dtype_to_str(self.W_enc.dtype)
        self.cfg.device = str(self.W_enc.device)
        return out

    def save(self, path: str | Path) -> Path:
        """Write SAELens's folder format (``cfg.json`` + ``sae_weights.safetensors``).

        Example:
            >>> import tempfile
            >>> sae = interp.load_sae("shakespeare-char-resid-l1")
            >>> folder = sae.save(tempfile.mkdtemp())
            >>> torch.equal(SAE.load(folder).W_dec, sae.W_dec)
            True
        """
        from interp.sae.formats import save_saelens

        return save_saelens(self, path)

    @classmethod
    def load(cls, path: str | Path, device: str | torch.device | None = None, **kw: Any) -> SAE:
        """Load a folder in any supported format (SAELens, Gemma Scope 1/2, sparsify, Llama
        Scope), detected from its files; see ``interp.sae.formats.load_sae``."""
        from interp.sae.formats import load_sae

        return load_sae(path, device=device, **kw)

    @classmethod
    def from_pretrained(
        cls,
        release: str,
        sae_id: str | None = None,
        device: str | torch.device | None = None,
        dtype: str | torch.dtype | None = None,
        force_download: bool = False,
        **kw: Any,
    ) -> SAE:
        """A SAELens release's SAE (``SAE.from_pretrained("gpt2-small-res-jb",
        "blocks.8.hook_resid_pre")``, through SAELens's release directory), or
        ``hf://owner/repo[/folder]``, a repository id + folder, a folder, a shipped name; read
        from the Hugging Face cache when it is there (offline). See
        ``interp.sae.loading.pretrained.load_pretrained``.

        Example:
            >>> sae = SAE.from_pretrained(  # needs the hub once  # doctest: +SKIP
            ...     "gemma-scope-2b-pt-res-canonical", "layer_3/width_16k/canonical")
        """
        from interp.sae.loading.pretrained import load_pretrained

        return load_pretrained(release, sae_id, device, dtype, force_download, **kw)

    @classmethod
    def from_pretrained_with_cfg_and_sparsity(
        cls,
        release: str,
        sae_id: str,
        device: str = "cpu",
        dtype: str = "float32",
        force_download: bool = False,
        converter: Any = None,
    ) -> tuple[SAE, dict[str, Any], torch.Tensor | None]:
        """SAELens's ``(sae, cfg_dict, log_sparsity)`` for ``sae_id`` of ``release``."""
        from interp.sae.loading.pretrained import from_pretrained_with_cfg_and_sparsity

        return from_pretrained_with_cfg_and_sparsity(
            release, sae_id, device, dtype, force_download, converter
        )

    # ---------------------------------------------------------------------- forward
    def _hook(self, name: str, x: Tensor, hooked: bool) -> Tensor:
        return getattr(self, name)(x) if hooked else x

    def _normalize_in(self, x: Tensor) -> Tensor:
        mode = self.cfg.normalize_activations
        if mode == "constant_norm_rescale":
            coeff = (self.cfg.d_in**0.5) / x.norm(dim=-1, keepdim=True)
            self._norm_state = (coeff,)
            return x * coeff
        if mode == "layer_norm":
            mu = x.mean(dim=-1, keepdim=True)
            x = x - mu
            std = x.std(dim=-1, keepdim=True)
            self._norm_state = (mu, std)
            return x / (std + 1e-5)
        return x

    def _normalize_out(self, x: Tensor) -> Tensor:
        mode = self.cfg.normalize_activations
        if mode not in ("constant_norm_rescale", "layer_norm"):
            return x
        if self._norm_state is None:
            raise RuntimeError(
                f"decode() of an SAE with normalize_activations={mode!r} needs the input's "
                "norm: call encode() first (or forward())."
            )
        state = self._norm_state
        return x / state[0] if mode == "constant_norm_rescale" else x * state[1] + state[0]

    def process_sae_in(self, x: Tensor, hooked: bool = True) -> Float[Tensor, "... d_in"]:
        """The encoder's input: cast, flattened (hook_z), hooked, normalised, minus b_dec."""
        x = x.to(self.dtype)
        if self.cfg.reshape_activations == "hook_z":
            self.d_head = x.shape[-1]
            x = x.flatten(-2)
        if x.shape[-1] != self.cfg.d_in:
            raise ValueError(
                f"The SAE reads width {self.cfg.d_in} (cfg.d_in) at {self.cfg.hook_name!r}, "
                f"but got an activation of shape {tuple(x.shape)}."
            )
        x = self._hook("hook_sae_input", x, hooked)
        x = self._normalize_in(x)
        if self.cfg.apply_b_dec_to_input:
            x = x - self.b_dec
        return x

    def encode(
        self, x: Float[Tensor, "... d_in"], hooked: bool = True
    ) -> Float[Tensor, "... d_sae"]:
        """Feature activations of ``x`` (``[..., n_heads, d_head]`` for hook_z SAEs)."""
        sae_in = self.process_sae_in(x, hooked)
        activation = self.cfg.activation
        if activation == "gated":
            gate = (sae_in @ self.W_enc + self.b_gate > 0).to(self.dtype)
            magnitude = sae_in @ (self.W_enc * self.r_mag.exp()) + self.b_mag
            magnitude = self._hook("hook_sae_acts_pre", magnitude, hooked)
            return self._hook("hook_sae_acts_post", gate * torch.relu(magnitude), hooked)
        hidden_pre = self._hook("hook_sae_acts_pre", sae_in @ self.W_enc + self.b_enc, hooked)
        if activation == "relu":
            acts = torch.relu(hidden_pre)
        elif activation == "jumprelu":
            acts = torch.relu(hidden_pre) * (hidden_pre > self.threshold).to(hidden_pre.dtype)
        else:  # topk
            if self.cfg.rescale_acts_by_decoder_norm:
                hidden_pre = hidden_pre * self.W_dec.norm(dim=-1)
            values, indices = torch.topk(hidden_pre, k=self.cfg.k, dim=-1, sorted=False)
            acts = torch.zeros_like(hidden_pre).scatter_(-1, indices, values.relu())
        return self._hook("hook_sae_acts_post", acts, hooked)

    def decode(
        self, feature_acts: Float[Tensor, "... d_sae"], hooked: bool = True
    ) -> Float[Tensor, "... d_out"]:
        """The reconstruction ``feature_acts @ W_dec + b_dec`` (denormalised, and unflattened
        to ``[..., n_heads, d_head]`` for hook_z SAEs); no skip connection."""
        if self.cfg.activation == "topk" and self.cfg.rescale_acts_by_decoder_norm:
            feature_acts = feature_acts / self.W_dec.norm(dim=-1)
        recons = self._hook("hook_sae_recons", feature_acts @ self.W_dec + self.b_dec, hooked)
        if self.cfg.is_transcoder:  # as SAELens: a transcoder's output is not denormalised
            return recons
        recons = self._normalize_out(recons)
        if self.cfg.reshape_activations == "hook_z" and self.d_head is not None:
            recons = recons.unflatten(-1, (-1, self.d_head))
        return recons

    def skip(self, x: Float[Tensor, "... d_in"]) -> Float[Tensor, "... d_out"]:
        """A skip transcoder's linear path ``x @ W_skip.T`` (zero for the rest)."""
        if not self.cfg.has_skip:
            return torch.zeros((), dtype=self.dtype, device=self.device)
        return x.to(self.dtype) @ self.W_skip.T

    def reconstruct(self, x: Tensor, hooked: bool = True) -> Tensor:
        """decode(encode(x)), plus the skip path for skip transcoders."""
        out = self.decode(self.encode(x, hooked), hooked)
        return out + self.skip(x) if self.cfg.has_skip else out

    def forward(self, x: Tensor) -> Tensor:
        """The reconstruction; with ``use_error_term``, plus the error ``x - SAE(x)`` computed
        without hooks, so the output equals ``x`` unless a hook changed the features.
        Transcoders return their output-hook prediction (their error needs the output
        hook's activation: splice them with ``HookedSAETransformer.add_sae``)."""
        out = self.reconstruct(x)
        if self.cfg.is_transcoder:
            return out
        if self.use_error_term:
            with torch.no_grad():
                error = self.hook_sae_error(x.to(self.dtype) - self.reconstruct(x, hooked=False))
            out = out + error
        return self.hook_sae_output(out)

    def __repr__(self) -> str:
        c = self.cfg
        return f"SAE({c.architecture}, d_in={c.d_in}, d_sae={c.d_sae}, hook={c.hook_name!r})"
