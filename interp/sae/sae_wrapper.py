"""The module an SAE is spliced in as: SAELens's ``_SAEWrapper``, and the model surgery around it.

While an SAE is spliced at ``blocks.3.hook_resid_post``, that hook point is replaced by an
``_SAEWrapper``: itself a hook point of the same name (its hooks, which still see the model's
activation, run first), followed by the SAE, whose output the model continues with. The SAE's
hook points become the wrapper's children, so they are named under it and cached, patched and
hooked like any other: ``blocks.3.hook_resid_post.hook_sae_acts_post``. A transcoder reads its
input hook (``cfg.hook_name``, where a permanent hook keeps the activation) and replaces its
output hook (``cfg.hook_name_out``), where the wrapper and its hook points live.

Also here: ``get_deep_attr`` / ``set_deep_attr`` (SAELens's helpers), SAELens's ``mlp.hook_in``
(a hook point on each MLP's input, which ``HookedSAETransformer`` adds) and the special tokens
``exclude_special_tokens=True`` bypasses.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor, nn

from interp.hooks import HookPoint
from interp.sae.sae import SAE

# Tokenizer attributes of the structural special tokens (SAELens's get_special_token_ids).
SPECIAL_TOKEN_ATTRS = (
    "bos_token_id",
    "eos_token_id",
    "pad_token_id",
    "sep_token_id",
    "decoder_start_token_id",
)


class _SAEWrapper(HookPoint):  # noqa: N801 - SAELens's name, which its users import
    """An SAE (or transcoder) spliced at a hook point, with SAELens's error-term semantics.

    ``use_error_term=True`` adds back what the SAE fails to reconstruct (computed without the
    SAE's hooks and without gradient), so the model's output is unchanged until a hook edits the
    features. ``exclude_special_tokens`` (True, or a list of token ids) leaves those positions'
    activations as they were. The SAE is not a submodule (its weights stay its own); its hook
    points are the wrapper's children.

    Example:
        >>> from interp.sae.splice import HookedSAETransformer
        >>> model = HookedSAETransformer.from_model(interp.load_model("shakespeare-char"))
        >>> sae = interp.load_sae("shakespeare-char-resid-l1")
        >>> model.add_sae(sae, use_error_term=True)
        >>> wrapper = model._acts_to_saes["blocks.1.hook_resid_post"]   # SAELens's private dict
        >>> wrapper.sae is sae, wrapper.use_error_term
        (True, True)
        >>> model.reset_saes()
    """

    def __init__(
        self,
        sae: SAE,
        use_error_term: bool = False,
        exclude_special_tokens: bool | list[int] = False,
    ) -> None:
        super().__init__()
        self.__dict__["_sae"] = sae
        for name, point in sae.hook_dict.items():
            self.add_module(name, point)
        self.use_error_term = bool(use_error_term)
        self.exclude_special_tokens = exclude_special_tokens
        self._captured_input: Tensor | None = None
        self._token_mask: Tensor | None = None  # [batch, pos], True = bypass the SAE
        # Where it is spliced (set by add_sae): hooks, the hook point it replaced, the capture.
        self.__dict__["_splice"] = {}

    @property
    def sae(self) -> SAE:
        return self.__dict__["_sae"]

    def capture_input(self, x: Tensor) -> None:
        """Keep a transcoder's input (its input hook's activation) for the output hook."""
        self._captured_input = x

    def set_token_mask(self, mask: Tensor | None) -> None:
        """A boolean ``[batch, pos]`` mask, True where the SAE is bypassed (one forward pass)."""
        self._token_mask = mask

    def forward(self, activation: Tensor) -> Tensor:
        activation = super().forward(activation)  # this hook point's own hooks
        sae = self.sae
        sae_in = self._captured_input if self._captured_input is not None else activation
        try:
            out = sae.reconstruct(sae_in)  # through the SAE's hook points
            mask = self._token_mask
            if mask is not None:  # [batch, pos] -> broadcastable to the activation
                mask = mask.reshape(*mask.shape, *([1] * (activation.dim() - mask.dim())))
            if self.use_error_term:
                with torch.no_grad():
                    clean = sae.reconstruct(sae_in, hooked=False)
                    error = activation.to(clean.dtype) - clean
                    if mask is not None:  # excluded positions bypass the SAE: no error
                        error = torch.where(mask, torch.zeros_like(error), error)
                    error = sae.hook_sae_error(error)
                out = out + error
            if mask is not None:
                out = torch.where(mask, activation.to(out.dtype), out)
            return sae.hook_sae_output(out).to(activation.dtype)
        finally:
            self._captured_input = None

    def __repr__(self) -> str:
        return f"_SAEWrapper({self.sae!r}, use_error_term={self.use_error_term})"


def get_deep_attr(obj: Any, path: str) -> Any:
    """``obj``'s attribute at a dotted path, list indices included
    (``get_deep_attr(model, "blocks.0.attn.hook_z")``)."""
    for part in path.split("."):
        obj = obj[int(part)] if part.isdigit() else getattr(obj, part)
    return obj


def set_deep_attr(obj: Any, path: str, value: Any) -> None:
    """Set ``obj``'s attribute at a dotted path (a hook point, or the wrapper replacing it)."""
    parent, _, last = path.rpartition(".")
    setattr(get_deep_attr(obj, parent) if parent else obj, last, value)


def take_hooks(new: HookPoint, old: HookPoint) -> None:
    """Move ``old``'s hooks and ``ctx`` to ``new`` (each hook's ``remove()`` follows)."""
    new.fwd_hooks, new.bwd_hooks, new.ctx = old.fwd_hooks, old.bwd_hooks, old.ctx
    old.fwd_hooks, old.bwd_hooks, old.ctx = [], [], {}
    for hook in (*new.fwd_hooks, *new.bwd_hooks):
        hook.hook_point = new


_WITH_HOOK_IN: dict[type, type] = {}


def add_hook_in_to_mlp(mlp: nn.Module) -> None:
    """Give ``mlp`` SAELens's ``hook_in``: a hook point on its input (after ``ln2``), so
    ``blocks.N.mlp.hook_in`` can be cached, hooked and have an SAE spliced. Done by a
    subclass of the MLP's class (so a deep copy keeps it); a second call does nothing."""
    if isinstance(getattr(mlp, "hook_in", None), HookPoint):
        return
    base = type(mlp)
    if base not in _WITH_HOOK_IN:

        def forward(self: nn.Module, x: Tensor, *args: Any, **kwargs: Any) -> Any:
            return base.forward(self, self.hook_in(x), *args, **kwargs)

        _WITH_HOOK_IN[base] = type(base.__name__, (base,), {"forward": forward})
    mlp.hook_in = HookPoint()
    mlp.__class__ = _WITH_HOOK_IN[base]


def special_token_ids(tokenizer: Any) -> list[int]:
    """The structural special tokens' ids (BOS, EOS, PAD, SEP, decoder start), not chat
    template tokens (SAELens's ``get_special_token_ids``)."""
    ids = {getattr(tokenizer, attr, None) for attr in SPECIAL_TOKEN_ATTRS}
    return sorted(i for i in ids if isinstance(i, int))
