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

import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import torch
from jaxtyping import Float
from torch import Tensor, nn

from interp.hooks import HookedRootModule, HookPoint
from interp.sae.activations import TopK
from interp.sae.config import ARCHITECTURES, NORMALIZATIONS, SAEConfig, config_class
from interp.sae.folding import FoldingMixin
from interp.sae.metadata import SAEMetadata
from interp.sae.registry import SAE_CLASS_REGISTRY, get_sae_class
from interp.sae.sae_files import SAEFilesMixin
from interp.utils.dtypes import dtype_name, parse_dtype

__all__ = [
    "ARCHITECTURES",
    "NORMALIZATIONS",
    "SAE",
    "SAEConfig",
    "SAEMetadata",
    "dtype_to_str",
    "str_to_dtype",
]

# The dtypes an SAE's weights may have.
_DTYPES = (torch.float32, torch.float64, torch.float16, torch.bfloat16)


def str_to_dtype(name: str | torch.dtype) -> torch.dtype:
    """An SAE's dtype from itself or its name (``interp.utils.dtypes.parse_dtype``)."""
    return parse_dtype(name, "SAE dtype", allowed=_DTYPES)


def dtype_to_str(dtype: torch.dtype) -> str:
    """The name an SAE's config stores for ``dtype`` (``"bfloat16"``)."""
    return dtype_name(dtype)


class SAE(SAEFilesMixin, FoldingMixin, HookedRootModule):
    """A sparse autoencoder (or transcoder) with SAELens's parameters and hook points.

    The base of SAELens's classes (``StandardSAE``, ``TopKSAE``, ``Transcoder``... in
    ``interp.sae.saes``): ``SAE(cfg)`` builds the class registered for
    ``cfg.architecture``, so ``isinstance(SAE(topk_cfg), TopKSAE)``. One implementation
    computes them all.

    Hook points: ``hook_sae_input`` (flattened, before normalisation), ``hook_sae_acts_pre``,
    ``hook_sae_acts_post`` (the features), ``hook_sae_recons`` (before denormalisation),
    ``hook_sae_error`` and ``hook_sae_output``.

    Example:
        >>> sae = SAE(SAEConfig(d_in=64, d_sae=512, hook_name="blocks.1.hook_resid_post"))
        >>> resid = torch.randn(2, 5, 64)       # [batch, pos, d_in]
        >>> features = sae.encode(resid)        # [batch, pos, 512]
        >>> recon = sae.decode(features)        # [batch, pos, 64]; sae(resid) does both
        >>> features.shape, recon.shape, type(sae).__name__
        (torch.Size([2, 5, 512]), torch.Size([2, 5, 64]), 'StandardSAE')
    """

    def __class_getitem__(cls, item: Any) -> type[SAE]:
        """``SAE[StandardSAEConfig]`` in annotations (SAELens's SAE is generic in its config)."""
        return cls

    def __new__(cls, *args: Any, **kwargs: Any) -> SAE:
        if cls is SAE and (args or "cfg" in kwargs):  # the class of the config's architecture
            cfg = args[0] if args else kwargs["cfg"]
            architecture = (
                cfg.get("architecture", "standard") if isinstance(cfg, dict) else (cfg.architecture)
            )
            config_class(architecture)  # a ValueError naming the known architectures
            cls = get_sae_class(architecture)[0]
        return super().__new__(cls)

    def __init__(self, cfg: SAEConfig | dict[str, Any], use_error_term: bool = False) -> None:
        super().__init__()
        if isinstance(cfg, dict):
            cfg = SAEConfig.from_dict(cfg)
        self._check_config_class(cfg)
        self.cfg = cfg
        if cfg.metadata.model_from_pretrained_kwargs:
            warnings.warn(
                "This SAE has non-empty model_from_pretrained_kwargs; load the model with "
                "HookedSAETransformer.from_pretrained_no_processing(..., "
                "**cfg.metadata.model_from_pretrained_kwargs).",
                UserWarning,
                stacklevel=2,
            )
        self._use_error_term = False
        if use_error_term:
            self.use_error_term = True  # SAELens warns: add_sae(sae, use_error_term=True)
        self.activation_fn = self.get_activation_fn()
        self.initialize_weights()
        self.hook_sae_input = HookPoint()  # [..., d_in]
        self.hook_sae_acts_pre = HookPoint()  # [..., d_sae]
        self.hook_sae_acts_post = HookPoint()  # [..., d_sae]
        self.hook_sae_output = HookPoint()  # [..., d_out]
        self.hook_sae_recons = HookPoint()  # [..., d_out]
        self.hook_sae_error = HookPoint()  # [..., d_out]
        self.d_head: int | None = None  # hook_z SAEs: learnt from the input's last axis
        self.hook_z_reshaping_mode = False
        if cfg.reshape_activations == "hook_z":
            self.turn_on_forward_pass_hook_z_reshaping()
        self.setup()

    def _check_config_class(self, cfg: SAEConfig) -> None:
        """A ``ValueError`` unless this class is the one registered for ``cfg``'s
        architecture (training SAEs check the training registry)."""
        own = get_sae_class(cfg.architecture)[0]
        registered = {sae_class for sae_class, _ in SAE_CLASS_REGISTRY.values()}
        if not isinstance(self, own) or (type(self) in registered and type(self) is not own):
            raise ValueError(
                f"{type(self).__name__} cannot take a {cfg.architecture!r} config; use "
                f"{own.__name__} (or SAE(cfg), which picks it)."
            )

    def get_activation_fn(self) -> Callable[[Tensor], Tensor]:
        """ReLU, or ``TopK(cfg.k)`` for the topk architectures (JumpReLU and gated masks
        are applied in ``encode``)."""
        return TopK(self.cfg.k) if self.cfg.activation == "topk" else nn.ReLU()

    def initialize_weights(self) -> None:
        """SAELens's initialisation: Kaiming-uniform ``W_dec`` (and transcoders' ``W_enc``),
        ``W_enc = W_dec.T`` otherwise, zero biases and thresholds."""
        cfg = self.cfg
        kind = {"dtype": str_to_dtype(cfg.dtype), "device": torch.device(cfg.device)}
        d_in, d_sae, d_out = cfg.d_in, cfg.d_sae, cfg.output_width
        self.b_dec = nn.Parameter(torch.zeros(d_out, **kind))
        self.W_dec = nn.Parameter(nn.init.kaiming_uniform_(torch.empty(d_sae, d_out, **kind)))
        if cfg.is_transcoder:
            self.W_enc = nn.Parameter(nn.init.kaiming_uniform_(torch.empty(d_in, d_sae, **kind)))
        else:
            self.W_enc = nn.Parameter(self.W_dec.data.T.clone().contiguous())
        if cfg.activation == "jumprelu" and not cfg.is_transcoder:
            self.threshold = nn.Parameter(torch.zeros(d_sae, **kind))
        if cfg.activation == "gated":
            self.b_gate = nn.Parameter(torch.zeros(d_sae, **kind))
            self.r_mag = nn.Parameter(torch.zeros(d_sae, **kind))
            self.b_mag = nn.Parameter(torch.zeros(d_sae, **kind))
            self.b_enc = None  # as SAELens's GatedSAE
        else:
            self.b_enc = nn.Parameter(torch.zeros(d_sae, **kind))
        if cfg.activation == "jumprelu" and cfg.is_transcoder:
            self.threshold = nn.Parameter(torch.zeros(d_sae, **kind))
        if cfg.has_skip:
            self.W_skip = nn.Parameter(torch.zeros(d_out, d_in, **kind))

    @property
    def use_error_term(self) -> bool:
        """Whether ``forward`` adds back the reconstruction error (SAELens deprecates setting
        it: splice with ``HookedSAETransformer.add_sae(sae, use_error_term=True)``)."""
        return self._use_error_term

    @use_error_term.setter
    def use_error_term(self, value: bool) -> None:
        if value and not self._use_error_term:
            warnings.warn(
                "Setting use_error_term directly on SAE is deprecated. Use "
                "HookedSAETransformer.add_sae(sae, use_error_term=True) instead.",
                DeprecationWarning,
                stacklevel=3,  # the line setting it (through nn.Module.__setattr__)
            )
        self._use_error_term = value

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

    # ---------------------------------------------------------------------- hook_z
    def turn_on_forward_pass_hook_z_reshaping(self) -> None:
        """Read ``[..., n_heads, d_head]`` inputs flattened and give outputs back per head
        (on for ``reshape_activations="hook_z"``; ``HookedSAETransformer`` turns it on for
        SAEs it splices at ``hook_z``)."""
        hook_name = self.cfg.metadata.hook_name
        if hook_name and not hook_name.endswith("_z"):
            raise ValueError(
                f"This method should only be called for hook_z SAEs; this one reads {hook_name!r}."
            )
        self.hook_z_reshaping_mode = True

    def turn_off_forward_pass_hook_z_reshaping(self) -> None:
        self.hook_z_reshaping_mode = False
        self.d_head = None

    def reshape_fn_in(self, x: Tensor) -> Tensor:
        """``[..., n_heads, d_head] -> [..., n_heads * d_head]`` with hook_z reshaping on."""
        if not self.hook_z_reshaping_mode:
            return x
        self.d_head = x.shape[-1]
        return x.flatten(-2)

    def reshape_fn_out(self, x: Tensor, d_head: int | None) -> Tensor:
        """The inverse of ``reshape_fn_in`` (``d_head`` from the last input)."""
        if not self.hook_z_reshaping_mode or d_head is None:
            return x
        return x.unflatten(-1, (-1, d_head))

    # ---------------------------------------------------------------------- forward
    def _hook(self, name: str, x: Tensor, hooked: bool) -> Tensor:
        return getattr(self, name)(x) if hooked else x

    def _normalize_in(self, x: Tensor) -> Tensor:
        """Normalise the input, keeping its scale (``x_norm_coeff``, or ``ln_mu`` and
        ``ln_std``) for the next ``decode`` to undo, as SAELens does."""
        mode = self.cfg.normalize_activations
        if mode == "constant_norm_rescale":
            self.x_norm_coeff = (self.cfg.d_in**0.5) / x.norm(dim=-1, keepdim=True)
            return x * self.x_norm_coeff
        if mode == "layer_norm":
            self.ln_mu = x.mean(dim=-1, keepdim=True)
            x = x - self.ln_mu
            self.ln_std = x.std(dim=-1, keepdim=True)
            return x / (self.ln_std + 1e-5)
        return x

    def _normalize_out(self, x: Tensor) -> Tensor:
        """Undo the last ``_normalize_in`` (its scale is used once, then dropped)."""
        mode = self.cfg.normalize_activations
        if mode not in ("constant_norm_rescale", "layer_norm"):
            return x
        state = ("x_norm_coeff",) if mode == "constant_norm_rescale" else ("ln_mu", "ln_std")
        if not all(name in self.__dict__ for name in state):
            raise RuntimeError(
                f"decode() of an SAE with normalize_activations={mode!r} needs the input's "
                "norm: call encode() first (or forward())."
            )
        if mode == "constant_norm_rescale":
            x = x / self.x_norm_coeff
        else:
            x = x * self.ln_std + self.ln_mu
        for name in state:
            delattr(self, name)
        return x

    run_time_activation_norm_fn_in = _normalize_in  # SAELens's names
    run_time_activation_norm_fn_out = _normalize_out

    def process_sae_in(self, x: Tensor, hooked: bool = True) -> Float[Tensor, "... d_in"]:
        """The encoder's input: cast, flattened (hook_z), hooked, normalised, minus b_dec."""
        x = self.reshape_fn_in(x.to(self.dtype))
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
        if activation == "jumprelu":
            acts = torch.relu(hidden_pre) * (hidden_pre > self.threshold).to(hidden_pre.dtype)
        else:  # relu, or topk: relu of the k largest
            if activation == "topk" and self.cfg.rescale_acts_by_decoder_norm:
                hidden_pre = hidden_pre * self.W_dec.norm(dim=-1)
            acts = self.activation_fn(hidden_pre)
        return self._hook("hook_sae_acts_post", acts, hooked)

    def decode(
        self, feature_acts: Float[Tensor, "... d_sae"], hooked: bool = True
    ) -> Float[Tensor, "... d_out"]:
        """The reconstruction ``feature_acts @ W_dec + b_dec`` (denormalised, and unflattened
        to ``[..., n_heads, d_head]`` for hook_z SAEs); no skip connection."""
        if feature_acts.is_sparse:  # SAELens's TopK(use_sparse_activations=True)
            feature_acts = feature_acts.to_dense()
        if self.cfg.activation == "topk" and self.cfg.rescale_acts_by_decoder_norm:
            feature_acts = feature_acts / self.W_dec.norm(dim=-1)
        recons = self._hook("hook_sae_recons", feature_acts @ self.W_dec + self.b_dec, hooked)
        if self.cfg.is_transcoder:  # as SAELens: a transcoder's output is not denormalised
            return recons
        return self.reshape_fn_out(self._normalize_out(recons), self.d_head)

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


@contextmanager
def _disable_hooks(sae: SAE) -> Iterator[None]:
    """Within the block, the SAE's hook points are identities: hooks on them do not run
    (SAELens's name; ``encode(x, hooked=False)`` is interp's way)."""
    blank = nn.Identity()
    try:
        for name in sae.hook_dict:
            setattr(sae, name, blank)
        yield
    finally:
        for name, hook in sae.hook_dict.items():
            setattr(sae, name, hook)
