"""Splicing SAEs into a model: SAELens's ``HookedSAETransformer`` and its methods.

``add_sae(sae)`` replaces the hook point at the SAE's hook by an ``_SAEWrapper``
(``interp.sae.sae_wrapper``): the same hook point (its name and hooks), followed by the SAE,
whose output the model continues with; the SAE's hook points are named under it
(``blocks.3.hook_resid_post.hook_sae_acts_post``). ``model._acts_to_saes`` maps each spliced
SAE's input hook to its wrapper, as in SAELens; ``acts_to_saes`` to the SAE. Removing an SAE
puts the original hook point back, with its hooks. Behaviour follows SAELens 6.45.3: an SAE
whose hook the model lacks is skipped with a logged warning, as is resetting a hook without an
SAE; ``use_error_term=None`` takes the SAE's own setting; ``saes()`` puts back on exit the SAEs
that those it adds replaced.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import torch

from interp.hooks import HookPoint
from interp.model import HookedTransformer
from interp.sae.model_match import check_model_match
from interp.sae.sae import SAE
from interp.sae.sae_wrapper import (
    _SAEWrapper,
    add_hook_in_to_mlp,
    get_deep_attr,
    set_deep_attr,
    special_token_ids,
    take_hooks,
)
from interp.sae.splice_checks import MLP_HOOK_IN, closest_hooks, hook_width

logger = logging.getLogger("interp.sae")


class SAESplicingMixin:
    """``add_sae``, ``saes()``, ``reset_saes``, ``run_with_saes``, ``run_with_cache_with_saes``
    and ``run_with_hooks_with_saes`` for a ``HookedRootModule`` (SAELens's names)."""

    @property
    def _acts_to_saes(self) -> dict[str, _SAEWrapper]:
        """The spliced SAEs' wrappers by the hook they read (SAELens's private dict)."""
        return self.__dict__.setdefault("_sae_wrappers", {})

    @property
    def acts_to_saes(self) -> dict[str, SAE]:
        """The spliced SAEs by the hook they read."""
        return {name: wrapper.sae for name, wrapper in self._acts_to_saes.items()}

    # ------------------------------------------------------------------ checks
    def _find_hook(self, name: str | None, what: str) -> str | None:
        """The hook point ``name`` is here (SAELens's ``mlp.hook_in`` is the opt-in
        ``hook_mlp_in`` on a model without it); None, with a logged warning, if there is none."""
        if name and name not in self.hook_dict and MLP_HOOK_IN.match(name or ""):
            mlp_in = f"blocks.{MLP_HOOK_IN.match(name).group(1)}.hook_mlp_in"
            probe = mlp_in.replace(".hook_mlp_in", ".hook_mlp_out")
            if hasattr(self, "set_use_hook_mlp_in") and probe in self.hook_dict:
                return mlp_in  # turned on by add_sae once every check has passed
        if name in self.hook_dict or name in self._acts_to_saes:
            return name
        hint = ", ".join(closest_hooks(self, name or "")) or "see model.hook_dict"
        output = "output " if what == "output" else ""
        logger.warning(
            f"No hook found for {output}{name}. Skipping. Check model.hook_dict for "
            f"available hooks (closest: {hint})."
        )
        return None

    def _check_width(self, sae: SAE, hook: str, width: int, field: str) -> None:
        expected = hook_width(self, hook)
        if expected is not None and expected != width:
            raise ValueError(
                f"{sae!r} has {field}={width}, but {hook!r} is {expected} wide in this model "
                f"({getattr(self.cfg, 'model_name', 'model')}); load the SAE trained on this "
                "model and hook."
            )

    def _check_sae(self, sae: SAE, input_hook: str, output_hook: str) -> None:
        if sae.cfg.is_transcoder and not sae.cfg.hook_name_out:
            raise ValueError(
                f"{sae!r} is a transcoder without cfg.hook_name_out, the hook its output "
                "replaces; set it (e.g. 'blocks.0.hook_mlp_out')."
            )
        self._check_width(sae, input_hook, sae.cfg.d_in, "d_in")
        self._check_width(sae, output_hook, sae.cfg.output_width, "d_out")
        device = getattr(self, "device", None)
        if isinstance(device, torch.device) and sae.device.type != device.type:
            raise ValueError(
                f"{sae!r} is on {sae.device}, the model on {device}; move it first: "
                f"sae.to({str(device)!r})."
            )

    # ------------------------------------------------------------------ splicing
    def add_sae(
        self,
        sae: SAE,
        use_error_term: bool | None = None,
        exclude_special_tokens: bool | list[int] = False,
        allow_model_mismatch: bool = False,
    ) -> None:
        """Splice ``sae`` at its hook (replacing any SAE there) until ``reset_saes``.

        ``use_error_term=True`` adds back what the SAE fails to reconstruct, so the model's
        output is unchanged until a hook edits the features; None uses
        ``sae.use_error_term``. ``exclude_special_tokens`` (True: the tokenizer's BOS, EOS,
        PAD, SEP; or a list of ids) bypasses the SAE at those tokens. A hook the model lacks
        is skipped with a logged warning (as SAELens). An SAE whose config names another
        model is a ``ModelMismatchError`` unless ``allow_model_mismatch=True``; a width or
        device that does not fit is a ``ValueError``, before the model changes.

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
        input_hook = self._find_hook(sae.cfg.hook_name, "input")
        if input_hook is None:
            return
        output_hook = input_hook
        if sae.cfg.hook_name_out:
            output_hook = self._find_hook(sae.cfg.hook_name_out, "output")
            if output_hook is None:
                return
        self._check_sae(sae, input_hook, output_hook)
        if input_hook.endswith(".hook_mlp_in") and input_hook not in self.hook_dict:
            self.set_use_hook_mlp_in(True)  # the MLP's input, after ln2
        for name, wrapper in list(self._acts_to_saes.items()):
            spliced = wrapper._splice
            if {spliced["input"], spliced["output"]} & {input_hook, output_hook}:
                self._remove_wrapper(name)
        if input_hook.endswith("hook_z") and hasattr(sae, "turn_on_forward_pass_hook_z_reshaping"):
            if not getattr(sae, "hook_z_reshaping_mode", True):
                sae.turn_on_forward_pass_hook_z_reshaping()  # [.., heads, d_head] in and out
        use = sae.use_error_term if use_error_term is None else use_error_term
        wrapper = _SAEWrapper(sae, use, exclude_special_tokens)
        self._splice_wrapper(wrapper, input_hook, output_hook)

    def _splice_wrapper(self, wrapper: _SAEWrapper, input_hook: str, output_hook: str) -> None:
        original = get_deep_attr(self, output_hook)
        take_hooks(wrapper, original)
        set_deep_attr(self, output_hook, wrapper)
        capture = None
        if input_hook != output_hook:  # a transcoder: keep its input for the output hook
            point = get_deep_attr(self, input_hook)
            capture = point.add_hook(
                lambda act, hook: wrapper.capture_input(act), is_permanent=True
            )
        wrapper._splice.update(
            input=input_hook, output=output_hook, original=original, capture=capture
        )
        self._acts_to_saes[input_hook] = wrapper
        self.setup()

    def _remove_wrapper(self, act_name: str) -> _SAEWrapper:
        wrapper = self._acts_to_saes.pop(act_name)
        spliced = wrapper._splice
        if spliced["capture"] is not None:
            spliced["capture"].remove()
        take_hooks(spliced["original"], wrapper)
        set_deep_attr(self, spliced["output"], spliced["original"])
        wrapper.sae.setup()  # its hook points' names are its own again
        return wrapper

    def _reset_sae(self, act_name: str, prev_wrapper: _SAEWrapper | None = None) -> None:
        """Remove the SAE reading ``act_name`` (a logged warning if none); then splice
        ``prev_wrapper``'s SAE with its settings, if given (SAELens's private method)."""
        if act_name not in self._acts_to_saes:
            logger.warning(f"No SAE is attached to {act_name}. There's nothing to reset.")
            return
        self._remove_wrapper(act_name)
        self.setup()
        if prev_wrapper is not None:
            self.add_sae(
                prev_wrapper.sae,
                use_error_term=prev_wrapper.use_error_term,
                exclude_special_tokens=prev_wrapper.exclude_special_tokens,
                allow_model_mismatch=True,  # it was spliced before
            )

    def reset_saes(
        self,
        act_names: str | Sequence[str] | None = None,
        prev_saes: Sequence[SAE | None] | None = None,
    ) -> None:
        """Remove the SAEs reading these hooks (every SAE by default); a hook without one
        is a logged warning. ``prev_saes`` (one per name, or None) are spliced back after.

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
        names = list(self._acts_to_saes) if act_names is None else list(act_names)
        if prev_saes is not None and len(prev_saes) != len(names):
            raise ValueError(
                f"reset_saes got {len(prev_saes)} prev_saes for {len(names)} act_names; "
                "give one (or None) per name."
            )
        for index, name in enumerate(names):
            prev = None if prev_saes is None else prev_saes[index]
            self._reset_sae(name, None if prev is None else _SAEWrapper(prev))
        self.setup()

    @contextmanager
    def saes(
        self,
        saes: SAE | Sequence[SAE] = (),
        reset_saes_end: bool = True,
        use_error_term: bool | None = None,
        exclude_special_tokens: bool | list[int] = False,
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
        to_restore: list[tuple[str, _SAEWrapper | None]] = []
        try:
            for sae in saes:
                act_name = sae.cfg.hook_name
                to_restore.append((act_name, self._acts_to_saes.get(act_name)))
                self.add_sae(sae, use_error_term, exclude_special_tokens, allow_model_mismatch)
            yield self
        finally:
            if reset_saes_end:
                for act_name, prev_wrapper in to_restore:
                    if act_name in self._acts_to_saes or prev_wrapper is not None:
                        self._reset_sae(act_name, prev_wrapper)
                self.setup()

    # ------------------------------------------------------------------ special tokens
    def _exclusion_mask(self, tokens: torch.Tensor, exclude: bool | list[int]) -> torch.Tensor:
        """``[batch, pos]``, True at the tokens whose positions bypass the SAE."""
        if isinstance(exclude, list):
            ids = exclude
        elif getattr(self, "tokenizer", None) is None:
            logger.warning(
                "exclude_special_tokens=True but no tokenizer is attached to the model. "
                "Pass a list of token IDs to exclude_special_tokens instead."
            )
            ids = []
        else:
            ids = special_token_ids(self.tokenizer)
        mask = torch.zeros(tokens.shape, dtype=torch.bool, device=tokens.device)
        for token_id in ids:
            mask |= tokens == token_id
        return mask

    @contextmanager
    def _token_masks(self, input: Any, kwargs: dict[str, Any]) -> Iterator[None]:
        """Set the exclusion masks of the wrappers that need one for one forward pass."""
        wrappers = [w for w in self._acts_to_saes.values() if w.exclude_special_tokens]
        if wrappers:
            tokens = input
            if not isinstance(input, torch.Tensor):
                tokens = self.to_tokens(
                    input,
                    prepend_bos=kwargs.get("prepend_bos"),
                    padding_side=kwargs.get("padding_side"),
                )
            for wrapper in wrappers:
                wrapper.set_token_mask(self._exclusion_mask(tokens, wrapper.exclude_special_tokens))
        try:
            yield
        finally:
            for wrapper in wrappers:
                wrapper.set_token_mask(None)

    # ------------------------------------------------------------------ running
    def run_with_saes(
        self,
        *model_args: Any,
        saes: SAE | Sequence[SAE] = (),
        reset_saes_end: bool = True,
        use_error_term: bool | None = None,
        exclude_special_tokens: bool | list[int] = False,
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
        with self.saes(
            saes, reset_saes_end, use_error_term, exclude_special_tokens, allow_model_mismatch
        ):
            return self(*model_args, **model_kwargs)

    def run_with_cache_with_saes(
        self,
        *model_args: Any,
        saes: SAE | Sequence[SAE] = (),
        reset_saes_end: bool = True,
        use_error_term: bool | None = None,
        exclude_special_tokens: bool | list[int] = False,
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
        with self.saes(
            saes, reset_saes_end, use_error_term, exclude_special_tokens, allow_model_mismatch
        ):
            return self.run_with_cache(*model_args, **kwargs)

    def run_with_hooks_with_saes(
        self,
        *model_args: Any,
        saes: SAE | Sequence[SAE] = (),
        reset_saes_end: bool = True,
        exclude_special_tokens: bool | list[int] = False,
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
        with self.saes(
            saes,
            reset_saes_end,
            exclude_special_tokens=exclude_special_tokens,
            allow_model_mismatch=allow_model_mismatch,
        ):
            return self.run_with_hooks(
                *model_args,
                fwd_hooks=fwd_hooks,
                bwd_hooks=bwd_hooks,
                reset_hooks_end=reset_hooks_end,
                clear_contexts=clear_contexts,
                **model_kwargs,
            )


class HookedSAETransformer(SAESplicingMixin, HookedTransformer):
    """A ``HookedTransformer`` that SAEs can be spliced into (SAELens's class), with SAELens's
    ``mlp.hook_in`` on each MLP's input.

    Example:
        >>> model = HookedSAETransformer.from_model(interp.load_model("shakespeare-char"))
        >>> sae = interp.load_sae("shakespeare-char-resid-l1")   # or SAE.load(folder)
        >>> logits = model.run_with_saes(model.to_tokens("ROMEO:"), saes=[sae])
        >>> logits.shape   # [batch, pos, d_vocab]
        torch.Size([1, 6, 65])

    ``HookedSAETransformer.from_pretrained(name_or_folder)`` loads one directly.
    """

    def __init__(self, *model_args: Any, **model_kwargs: Any) -> None:
        super().__init__(*model_args, **model_kwargs)
        self._add_mlp_hook_ins()

    def _add_mlp_hook_ins(self) -> None:
        for block in getattr(self, "blocks", ()):
            mlp = getattr(block, "mlp", None)
            if mlp is not None:
                add_hook_in_to_mlp(mlp)
        self.setup()

    def forward(self, input: Any, *args: Any, **kwargs: Any) -> Any:
        with self._token_masks(input, kwargs):
            return super().forward(input, *args, **kwargs)

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
        model._add_mlp_hook_ins()
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


__all__ = [
    "HookPoint",
    "HookedSAETransformer",
    "SAESplicingMixin",
    "_SAEWrapper",
    "get_deep_attr",
    "set_deep_attr",
]
