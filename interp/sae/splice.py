"""Splicing SAEs into a model, with SAELens's ``HookedSAETransformer`` vocabulary.

While an SAE is spliced at ``blocks.3.hook_resid_post``, that hook point is replaced by an
``SAEHookPoint``: the same hook (its name, its hooks, which still see the model's
activation), followed by the SAE, whose output the model continues with. The SAE's hook
points become its children, so they are named under it and cached, patched and hooked
like any other: ``blocks.3.hook_resid_post.hook_sae_acts_post``. A transcoder reads its
input hook (``cfg.hook_name``) and replaces its output hook (``cfg.hook_name_out``), where
its hook points live. Removing the SAE puts the original hook point back, with its hooks.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor, nn

from interp.hooks import HookedRootModule, HookPoint
from interp.model import HookedTransformer
from interp.sae.model_match import check_model_match
from interp.sae.sae import SAE

# SAELens's HookedSAETransformer adds ``mlp.hook_in``; ours is the block's opt-in hook_mlp_in.
_MLP_HOOK_IN = re.compile(r"^blocks\.(\d+)\.mlp\.hook_in$")


@dataclass(eq=False)
class Splice:
    """One spliced SAE: where it reads and writes, and the hook points it stands in for."""

    sae: SAE
    use_error_term: bool
    input_hook: str
    output_hook: str
    originals: dict[str, HookPoint]
    captured: Tensor | None = None  # a transcoder's input, between its two hooks


class SAEHookPoint(HookPoint):
    """A hook point with an SAE spliced in: its hooks run, then (at the output hook) the SAE.

    At a transcoder's input hook it only keeps the activation for the output hook.
    """

    def __init__(self, splice: Splice, original: HookPoint, at_output: bool) -> None:
        super().__init__()
        self.__dict__["splice"] = splice  # not a submodule: the SAE's weights stay its own
        self.at_output = at_output
        if at_output:
            for name, point in splice.sae.hook_dict.items():
                self.add_module(name, point)
        take_hooks(self, original)

    def forward(self, activation: Tensor) -> Tensor:
        activation = super().forward(activation)  # this hook's own hooks
        splice = self.splice
        if not self.at_output:
            splice.captured = activation
            return activation
        sae = splice.sae
        sae_in = activation if splice.input_hook == splice.output_hook else splice.captured
        splice.captured = None
        if sae_in is None:
            raise RuntimeError(
                f"The transcoder spliced at {splice.output_hook!r} reads {splice.input_hook!r}, "
                "which did not run first in this forward pass."
            )
        out = sae.reconstruct(sae_in)
        if splice.use_error_term:
            with torch.no_grad():
                error = activation.to(sae.dtype) - sae.reconstruct(sae_in, hooked=False)
                error = sae.hook_sae_error(error)
            out = out + error
        return sae.hook_sae_output(out).to(activation.dtype)


def take_hooks(new: HookPoint, old: HookPoint) -> None:
    """Move ``old``'s hooks and ``ctx`` to ``new`` (each hook's ``remove()`` follows)."""
    new.fwd_hooks, new.bwd_hooks, new.ctx = old.fwd_hooks, old.bwd_hooks, old.ctx
    old.fwd_hooks, old.bwd_hooks, old.ctx = [], [], {}
    for hook in (*new.fwd_hooks, *new.bwd_hooks):
        hook.hook_point = new


def module_at(root: nn.Module, path: str) -> nn.Module:
    return root.get_submodule(path)


def set_module_at(root: nn.Module, path: str, module: nn.Module) -> None:
    parent, _, name = path.rpartition(".")
    setattr(root.get_submodule(parent) if parent else root, name, module)


def hook_width(model: HookedRootModule, name: str) -> int | None:
    """The last-axis width an SAE reads at hook ``name`` (heads flattened for ``hook_z``);
    None where the hook is not one whose width the config gives."""
    cfg = getattr(model, "cfg", None)
    if cfg is None:
        return None
    last = name.rsplit(".", 1)[-1]
    if last in ("hook_z", "hook_q", "hook_rot_q"):
        return cfg.n_heads * cfg.d_head
    if last in ("hook_k", "hook_v", "hook_rot_k"):
        return (getattr(cfg, "n_key_value_heads", None) or cfg.n_heads) * cfg.d_head
    if last in ("hook_pre", "hook_post", "hook_pre_linear") and ".mlp." in name:
        return cfg.d_mlp
    d_model_hooks = (
        "hook_embed",
        "hook_pos_embed",
        "hook_resid_pre",
        "hook_resid_mid",
        "hook_resid_post",
        "hook_attn_out",
        "hook_mlp_out",
        "hook_mlp_in",
        "hook_attn_in",
        "hook_normalized",
    )
    return cfg.d_model if last in d_model_hooks else None


class SAESplicingMixin:
    """``add_sae``, ``saes()``, ``reset_saes``, ``run_with_saes``, ``run_with_cache_with_saes``
    and ``run_with_hooks_with_saes`` for a ``HookedRootModule`` (SAELens's names)."""

    @property
    def _splices(self) -> dict[str, Splice]:
        return self.__dict__.setdefault("_sae_splices", {})

    @property
    def acts_to_saes(self) -> dict[str, SAE]:
        """The spliced SAEs by the hook they read."""
        return {name: splice.sae for name, splice in self._splices.items()}

    def _resolve_hook(self, name: str, what: str, sae: SAE) -> str:
        """The hook point ``name`` names here (SAELens's ``mlp.hook_in`` is our opt-in
        ``hook_mlp_in``), or a ``KeyError`` listing the closest names."""
        if not name:
            raise ValueError(f"{sae!r} has no {what} (cfg.hook_name); set it to a hook name.")
        match = _MLP_HOOK_IN.match(name)
        if match:
            name = f"blocks.{match.group(1)}.hook_mlp_in"
        if name.endswith(".hook_mlp_in") and hasattr(self, "set_use_hook_mlp_in"):
            probe = name.replace(".hook_mlp_in", ".hook_mlp_out")
            if probe in self.hook_dict:
                return name  # turned on by add_sae once every check has passed
        try:
            self.check_hook_name(name)
        except KeyError as error:
            raise KeyError(f"{sae!r} reads {what} {name!r}: {error.args[0]}") from None
        return name

    def _check_width(self, sae: SAE, hook: str, width: int, field: str) -> None:
        expected = hook_width(self, hook)
        if expected is not None and expected != width:
            raise ValueError(
                f"{sae!r} has {field}={width}, but {hook!r} is {expected} wide in this model "
                f"({getattr(self.cfg, 'model_name', 'model')}); load the SAE trained on this "
                "model and hook."
            )

    def add_sae(
        self, sae: SAE, use_error_term: bool | None = None, allow_model_mismatch: bool = False
    ) -> None:
        """Splice ``sae`` at its hook (replacing any SAE there) until ``reset_saes``.

        ``use_error_term=True`` adds back what the SAE fails to reconstruct, so the model's
        output is unchanged until a hook edits the features; None uses
        ``sae.use_error_term``. An SAE whose config names another model (``model_name``) is
        a ``ModelMismatchError`` unless ``allow_model_mismatch=True``
        (``interp.sae.model_match``). Everything is checked before the model changes.

        Example:
            >>> model = HookedSAETransformer.from_model(interp.load_model("shakespeare-char"))
            >>> sae = interp.load_sae("shakespeare-char-resid-l1")
            >>> tokens = model.to_tokens("ROMEO:")
            >>> model.add_sae(sae)
            >>> logits, cache = model.run_with_cache(tokens)
            >>> cache["blocks.1.hook_resid_post.hook_sae_acts_post"].shape   # [batch, pos, d_sae]
            torch.Size([1, 6, 1024])
            >>> model.reset_saes()
        """
        if not isinstance(sae, SAE):
            raise TypeError(f"add_sae takes an interp.sae.SAE, got {type(sae).__name__}.")
        check_model_match(sae, self, allow_model_mismatch)
        input_hook = self._resolve_hook(sae.cfg.hook_name, "the hook", sae)
        output_hook = input_hook
        if sae.cfg.is_transcoder:
            if not sae.cfg.hook_name_out:
                raise ValueError(
                    f"{sae!r} is a transcoder without cfg.hook_name_out, the hook its output "
                    "replaces; set it (e.g. 'blocks.0.hook_mlp_out')."
                )
            output_hook = self._resolve_hook(sae.cfg.hook_name_out, "the output hook", sae)
        self._check_width(sae, input_hook, sae.cfg.d_in, "d_in")
        self._check_width(sae, output_hook, sae.cfg.output_width, "d_out")
        device = getattr(self, "device", None)
        if isinstance(device, torch.device) and sae.device.type != device.type:
            raise ValueError(
                f"{sae!r} is on {sae.device}, the model on {device}; move it first: "
                f"sae.to({str(device)!r})."
            )
        if input_hook.endswith(".hook_mlp_in") and input_hook not in self.hook_dict:
            self.set_use_hook_mlp_in(True)  # the MLP's input, after ln2
        for name, splice in list(self._splices.items()):
            if {splice.input_hook, splice.output_hook} & {input_hook, output_hook}:
                self._remove_splice(name)
        use = sae.use_error_term if use_error_term is None else use_error_term
        points = {input_hook, output_hook}
        splice = Splice(sae, bool(use), input_hook, output_hook, {})
        for name in points:
            original = module_at(self, name)
            splice.originals[name] = original
            set_module_at(self, name, SAEHookPoint(splice, original, name == output_hook))
        self._splices[input_hook] = splice
        self.setup()

    def _remove_splice(self, input_hook: str) -> Splice:
        splice = self._splices.pop(input_hook)
        for name, original in splice.originals.items():
            take_hooks(original, module_at(self, name))
            set_module_at(self, name, original)
        splice.sae.setup()  # its hook points' names are its own again
        return splice

    def reset_saes(self, act_names: str | Sequence[str] | None = None) -> None:
        """Remove the SAEs reading these hooks (every SAE by default).

        Example:
            >>> model = HookedSAETransformer.from_model(interp.load_model("shakespeare-char"))
            >>> sae = interp.load_sae("shakespeare-char-resid-l1")
            >>> tokens = model.to_tokens("ROMEO:")
            >>> clean = model(tokens)
            >>> model.add_sae(sae)
            >>> model.reset_saes()   # the model is as it was, hooks on its hook points kept
            >>> torch.equal(model(tokens), clean)
            True
        """
        if isinstance(act_names, str):
            act_names = [act_names]
        names = list(self._splices) if act_names is None else list(act_names)
        unknown = [name for name in names if name not in self._splices]
        if unknown:
            raise KeyError(f"No SAE is spliced at {unknown}; spliced: {list(self._splices)}.")
        for name in names:
            self._remove_splice(name)
        self.setup()

    @contextmanager
    def saes(
        self,
        saes: SAE | Sequence[SAE] = (),
        reset_saes_end: bool = True,
        use_error_term: bool | None = None,
        allow_model_mismatch: bool = False,
    ) -> Iterator[Any]:
        """Splice ``saes`` for the body of a ``with`` block; on exit (raising or not) remove
        them and put back the SAEs they replaced. ``allow_model_mismatch`` as ``add_sae``'s.

        Example:
            >>> model = HookedSAETransformer.from_model(interp.load_model("shakespeare-char"))
            >>> sae = interp.load_sae("shakespeare-char-resid-l1")
            >>> tokens = model.to_tokens("ROMEO:")
            >>> ablate_name = "blocks.1.hook_resid_post.hook_sae_acts_post"
            >>> def ablate(acts, hook):   # feature 7 off
            ...     acts[..., 7] = 0
            >>> with model.saes([sae], use_error_term=True):
            ...     logits = model.run_with_hooks(tokens, fwd_hooks=[(ablate_name, ablate)])
            >>> model.acts_to_saes   # spliced only inside the block
            {}
        """
        saes = [saes] if isinstance(saes, SAE) else list(saes)
        before = dict(self._splices)
        try:
            for sae in saes:
                self.add_sae(sae, use_error_term, allow_model_mismatch)
            yield self
        finally:
            if reset_saes_end:
                for name in [n for n, s in self._splices.items() if before.get(n) is not s]:
                    self._remove_splice(name)
                for name, splice in before.items():
                    if name not in self._splices:  # accepted once already
                        self.add_sae(splice.sae, splice.use_error_term, allow_model_mismatch=True)
                self.setup()

    def run_with_saes(
        self,
        *model_args: Any,
        saes: SAE | Sequence[SAE] = (),
        reset_saes_end: bool = True,
        use_error_term: bool | None = None,
        allow_model_mismatch: bool = False,
        **model_kwargs: Any,
    ) -> Any:
        """One forward pass with ``saes`` spliced.

        Example:
            >>> model = HookedSAETransformer.from_model(interp.load_model("shakespeare-char"))
            >>> sae = interp.load_sae("shakespeare-char-resid-l1")
            >>> tokens = model.to_tokens("ROMEO:")
            >>> logits = model.run_with_saes(tokens, saes=[sae])   # the SAE's reconstruction
            >>> logits.shape
            torch.Size([1, 6, 65])
        """
        with self.saes(saes, reset_saes_end, use_error_term, allow_model_mismatch):
            return self(*model_args, **model_kwargs)

    def run_with_cache_with_saes(
        self,
        *model_args: Any,
        saes: SAE | Sequence[SAE] = (),
        reset_saes_end: bool = True,
        use_error_term: bool | None = None,
        allow_model_mismatch: bool = False,
        **kwargs: Any,
    ) -> tuple[Any, Any]:
        """``run_with_cache`` with ``saes`` spliced; the cache holds their hook points too.

        Example:
            >>> model = HookedSAETransformer.from_model(interp.load_model("shakespeare-char"))
            >>> sae = interp.load_sae("shakespeare-char-resid-l1")
            >>> tokens = model.to_tokens("ROMEO:")
            >>> _, cache = model.run_with_cache_with_saes(tokens, saes=[sae])
            >>> acts = cache["blocks.1.hook_resid_post.hook_sae_acts_post"]   # [1, 6, d_sae]
            >>> int((acts[0, -1] > 0).sum())   # TopK: k features on each token
            16
        """
        with self.saes(saes, reset_saes_end, use_error_term, allow_model_mismatch):
            return self.run_with_cache(*model_args, **kwargs)

    def run_with_hooks_with_saes(
        self,
        *model_args: Any,
        saes: SAE | Sequence[SAE] = (),
        reset_saes_end: bool = True,
        fwd_hooks: Sequence[tuple[Any, Any]] = (),
        bwd_hooks: Sequence[tuple[Any, Any]] = (),
        reset_hooks_end: bool = True,
        clear_contexts: bool = False,
        allow_model_mismatch: bool = False,
        **model_kwargs: Any,
    ) -> Any:
        """``run_with_hooks`` with ``saes`` spliced (e.g. to ablate or steer features).

        Example:
            >>> model = HookedSAETransformer.from_model(interp.load_model("shakespeare-char"))
            >>> sae = interp.load_sae("shakespeare-char-resid-l1")
            >>> tokens = model.to_tokens("ROMEO:")
            >>> def ablate(acts, hook):
            ...     acts[..., 7] = 0
            >>> logits = model.run_with_hooks_with_saes(tokens, saes=[sae],
            ...     fwd_hooks=[("blocks.1.hook_resid_post.hook_sae_acts_post", ablate)])
        """
        with self.saes(saes, reset_saes_end, allow_model_mismatch=allow_model_mismatch):
            return self.run_with_hooks(
                *model_args,
                fwd_hooks=fwd_hooks,
                bwd_hooks=bwd_hooks,
                reset_hooks_end=reset_hooks_end,
                clear_contexts=clear_contexts,
                **model_kwargs,
            )


class HookedSAETransformer(SAESplicingMixin, HookedTransformer):
    """A ``HookedTransformer`` that SAEs can be spliced into (SAELens's class name).

    Example:
        >>> model = HookedSAETransformer.from_model(interp.load_model("shakespeare-char"))
        >>> sae = interp.load_sae("shakespeare-char-resid-l1")   # or SAE.load(folder)
        >>> logits = model.run_with_saes(model.to_tokens("ROMEO:"), saes=[sae])
        >>> logits.shape   # [batch, pos, d_vocab]
        torch.Size([1, 6, 65])

    ``HookedSAETransformer.from_pretrained(name_or_folder)`` loads one directly.
    """

    @classmethod
    def from_model(cls, model: HookedTransformer) -> HookedSAETransformer:
        """``model`` itself, now a ``HookedSAETransformer`` (same weights, nothing copied)."""
        if isinstance(model, SAESplicingMixin):
            return model
        if not isinstance(model, HookedTransformer):
            raise TypeError(
                f"from_model takes a HookedTransformer, got {type(model).__name__}; load one "
                "with interp.load_model(...) or HookedTransformer.from_pretrained(...)."
            )
        if type(model) is HookedTransformer:
            model.__class__ = cls
        else:  # a subclass keeps its own behaviour
            model.__class__ = type(f"{type(model).__name__}WithSAEs", (cls, type(model)), {})
        return model

    @classmethod
    def from_pretrained(cls, *args: Any, **kwargs: Any) -> HookedSAETransformer:
        """``HookedTransformer.from_pretrained``, as a ``HookedSAETransformer``."""
        return cls.from_model(HookedTransformer.from_pretrained(*args, **kwargs))

    @classmethod
    def from_pretrained_no_processing(cls, *args: Any, **kwargs: Any) -> HookedSAETransformer:
        """``HookedTransformer.from_pretrained_no_processing``, as a ``HookedSAETransformer``."""
        return cls.from_model(HookedTransformer.from_pretrained_no_processing(*args, **kwargs))

    @classmethod
    def from_nanogpt(cls, *args: Any, **kwargs: Any) -> HookedSAETransformer:
        """``HookedTransformer.from_nanogpt``, as a ``HookedSAETransformer``."""
        return cls.from_model(HookedTransformer.from_nanogpt(*args, **kwargs))
