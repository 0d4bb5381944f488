"""Hook points and the root module that finds, adds, removes and caches through them.

A ``HookPoint`` is an identity module with a name. A hook function ``fn(activation, hook)``
attached to it may read the activation or return a tensor of the same shape to replace it.
Hooks added by ``hooks()``, ``run_with_hooks`` and ``run_with_cache`` are removed when they
finish, even when the forward pass raises; permanent hooks stay until ``reset_hooks``.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Literal

import torch
from torch import Tensor, nn

from interp.caching import ActivationKeeper, PositionSlice

HookFn = Callable[..., Tensor | None]
NamesFilter = None | str | Sequence[str] | Callable[[str], bool]
Direction = Literal["fwd", "bwd"]
_LAYER_IN_NAME = re.compile(r"^blocks\.(\d+)\.")


@dataclass(eq=False)
class Hook:
    """One hook function attached to one hook point; ``remove()`` detaches it."""

    hook_point: HookPoint
    fn: HookFn
    direction: Direction
    is_permanent: bool

    def remove(self) -> None:
        hooks = self.hook_point.hooks_of(self.direction)
        if self in hooks:
            hooks.remove(self)


class HookPoint(nn.Module):
    """An identity module at a named point of the forward pass.

    Example:
        >>> hook_point = model.hook_dict["blocks.0.hook_resid_pre"]
        >>> hook_point.add_hook(lambda resid, hook: resid * 0)   # zero-ablate it
    """

    def __init__(self) -> None:
        super().__init__()
        self.name: str | None = None
        self.fwd_hooks: list[Hook] = []
        self.bwd_hooks: list[Hook] = []

    def hooks_of(self, direction: Direction) -> list[Hook]:
        if direction not in ("fwd", "bwd"):
            raise ValueError(f"Hook direction must be 'fwd' or 'bwd', got {direction!r}.")
        return self.fwd_hooks if direction == "fwd" else self.bwd_hooks

    @property
    def has_hooks(self) -> bool:
        return bool(self.fwd_hooks or self.bwd_hooks)

    @property
    def only_read(self) -> bool:
        """No hook here can change the activation or wants its gradient: every one is a
        forward hook marked ``reads_only`` (as caching hooks are), so a fused kernel may
        compute what follows without waiting for them."""
        return not self.bwd_hooks and all(
            getattr(h.fn, "reads_only", False) for h in self.fwd_hooks
        )

    def layer(self) -> int:
        """The block index in this hook's name (``blocks.3.attn.hook_z`` -> 3)."""
        match = _LAYER_IN_NAME.match(self.name or "")
        if match is None:
            raise ValueError(f"Hook point {self.name!r} is not inside a transformer block.")
        return int(match.group(1))

    def add_hook(
        self,
        fn: HookFn,
        dir: Direction = "fwd",
        is_permanent: bool = False,
        prepend: bool = False,
    ) -> Hook:
        """Attach ``fn(activation, hook)``; it runs before existing hooks if ``prepend``."""
        if not callable(fn):
            raise TypeError(f"A hook must be callable as fn(activation, hook), got {fn!r}.")
        hook = Hook(self, fn, dir, is_permanent)
        hooks = self.hooks_of(dir)
        hooks.insert(0, hook) if prepend else hooks.append(hook)
        return hook

    def remove_hooks(
        self, dir: Direction | Literal["both"] = "both", including_permanent: bool = False
    ) -> None:
        for direction in ("fwd", "bwd") if dir == "both" else (dir,):
            hooks = self.hooks_of(direction)
            hooks[:] = [h for h in hooks if h.is_permanent and not including_permanent]

    def forward(self, activation: Tensor) -> Tensor:
        for hook in self.fwd_hooks:
            replacement = hook.fn(activation, hook=self)
            if replacement is not None:
                activation = self._checked(replacement, activation, hook)
        if self.bwd_hooks and activation.requires_grad:
            activation.register_hook(self._run_backward_hooks)
        return activation

    def _run_backward_hooks(self, grad: Tensor) -> Tensor:
        for hook in list(self.bwd_hooks):
            replacement = hook.fn(grad, hook=self)
            if replacement is not None:
                grad = self._checked(replacement, grad, hook)
        return grad

    def _checked(self, replacement: Any, original: Tensor, hook: Hook) -> Tensor:
        fn_name = getattr(hook.fn, "__name__", repr(hook.fn))
        if not isinstance(replacement, Tensor):
            raise TypeError(
                f"Hook {fn_name!r} on {self.name} returned {type(replacement).__name__}; "
                "return a tensor of the activation's shape, or None to leave it unchanged."
            )
        if replacement.shape != original.shape:
            raise ValueError(
                f"Hook {fn_name!r} on {self.name} returned shape {tuple(replacement.shape)}, "
                f"but the activation has shape {tuple(original.shape)}; return a tensor of the "
                "same shape, or None to leave it unchanged."
            )
        return replacement

    def __repr__(self) -> str:
        return f"HookPoint({self.name!r})"


class HookedRootModule(nn.Module):
    """A module whose ``HookPoint`` submodules are found once, by name, in ``setup()``."""

    hook_dict: dict[str, HookPoint]

    def setup(self) -> None:
        """Name every hook point after its module path; call at the end of ``__init__``."""
        self.hook_dict = {}
        for name, module in self.named_modules():
            if isinstance(module, HookPoint):
                module.name = name
                self.hook_dict[name] = module

    def hook_points(self) -> list[HookPoint]:
        return list(self.hook_dict.values())

    # ----------------------------------------------------------------- name resolution
    def hook_names(self, names_filter: NamesFilter) -> list[str]:
        """The hook names a filter selects: None (all), a name, a list of names, or a predicate.

        Unknown names raise a ``KeyError`` that lists the closest valid names.
        """
        if names_filter is None:
            return list(self.hook_dict)
        if callable(names_filter):
            return [name for name in self.hook_dict if names_filter(name)]
        names = [names_filter] if isinstance(names_filter, str) else list(names_filter)
        for name in names:
            self.check_hook_name(name)
        return names

    def check_hook_name(self, name: str) -> None:
        """Raise a ``KeyError`` listing the closest valid names unless ``name`` is a hook point."""
        if not isinstance(name, str):
            raise TypeError(f"A hook name must be a string, got {name!r}.")
        if name not in self.hook_dict:
            close = difflib.get_close_matches(name, self.hook_dict, n=5, cutoff=0.5)
            hint = f" Closest valid names: {close}." if close else ""
            raise KeyError(
                f"No hook point named {name!r}.{hint} "
                "See model.hook_dict (or `interp hooks`) for every name."
            )

    # ---------------------------------------------------------------- adding / removing
    def add_hook(
        self,
        name: str | Callable[[str], bool],
        hook: HookFn,
        dir: Direction = "fwd",
        is_permanent: bool = False,
        prepend: bool = False,
    ) -> list[Hook]:
        """Attach ``hook`` at a named point, or at every point whose name passes a predicate."""
        names = self.hook_names(name if callable(name) else [name])
        return [self.hook_dict[n].add_hook(hook, dir, is_permanent, prepend) for n in names]

    def add_perma_hook(self, name: str | Callable[[str], bool], hook: HookFn, dir="fwd"):
        return self.add_hook(name, hook, dir=dir, is_permanent=True)

    def reset_hooks(
        self, direction: Literal["fwd", "bwd", "both"] = "both", including_permanent: bool = False
    ) -> None:
        """Remove every hook (permanent ones too if ``including_permanent``)."""
        for hook_point in self.hook_dict.values():
            hook_point.remove_hooks(direction, including_permanent)

    @contextmanager
    def hooks(
        self,
        fwd_hooks: Sequence[tuple[str | Callable[[str], bool], HookFn]] = (),
        bwd_hooks: Sequence[tuple[str | Callable[[str], bool], HookFn]] = (),
    ) -> Iterator[HookedRootModule]:
        """Attach hooks for the body of a ``with`` block, then remove exactly those.

        Contexts nest; every name is checked before any hook is attached.

        Example:
            >>> with model.hooks(fwd_hooks=[("blocks.0.attn.hook_z", lambda z, hook: z * 0)]):
            ...     ablated_logits = model(tokens)
        """
        for name, _ in (*fwd_hooks, *bwd_hooks):
            if not callable(name):
                self.check_hook_name(name)
        added: list[Hook] = []
        try:
            for direction, pairs in (("fwd", fwd_hooks), ("bwd", bwd_hooks)):
                for name, fn in pairs:
                    added += self.add_hook(name, fn, dir=direction)
            yield self
        finally:
            for hook in added:
                hook.remove()

    def run_with_hooks(
        self,
        *model_args: Any,
        fwd_hooks: Sequence[tuple[str | Callable[[str], bool], HookFn]] = (),
        bwd_hooks: Sequence[tuple[str | Callable[[str], bool], HookFn]] = (),
        **model_kwargs: Any,
    ) -> Any:
        """Run the forward pass with temporary hooks; backward hooks need ``.backward()``
        inside a ``hooks()`` context instead, since these are removed on return.

        Example:
            >>> logits = model.run_with_hooks(tokens, fwd_hooks=[("hook_embed", fn)])
        """
        with self.hooks(fwd_hooks, bwd_hooks):
            return self(*model_args, **model_kwargs)

    # ----------------------------------------------------------------------- caching
    def get_caching_hooks(
        self,
        names_filter: NamesFilter = None,
        incl_bwd: bool = False,
        device: torch.device | str | None = None,
        dtype: torch.dtype | None = None,
        remove_batch_dim: bool = False,
        pos_slice: PositionSlice = None,
    ) -> tuple[dict[str, Tensor], list[tuple[str, HookFn]], list[tuple[str, HookFn]]]:
        """Hooks that store activations (and gradients, as ``name + "_grad"``) in a dict.

        The storage options are ``run_with_cache``'s (see ``interp.caching.ActivationKeeper``).
        With ``device="cpu"`` on a GPU the copies do not block: call
        ``torch.cuda.synchronize()`` before reading the dict (``run_with_cache`` does).

        Example:
            >>> store, fwd_hooks, _ = model.get_caching_hooks("blocks.0.hook_resid_post")
            >>> with model.hooks(fwd_hooks=fwd_hooks):
            ...     model(tokens)
        """
        keeper = ActivationKeeper(device, dtype, remove_batch_dim, pos_slice)
        store: dict[str, Tensor] = {}
        names = self.hook_names(names_filter)

        def save(key: str) -> HookFn:
            def save_hook(activation: Tensor, hook: HookPoint) -> None:
                store[key] = keeper.keep(activation, hook.name)

            save_hook.reads_only = True
            return save_hook

        fwd = [(name, save(name)) for name in names]
        bwd = [(name, save(name + "_grad")) for name in names] if incl_bwd else []
        return store, fwd, bwd

    def run_with_cache(
        self,
        *model_args: Any,
        names_filter: NamesFilter = None,
        device: torch.device | str | None = None,
        dtype: torch.dtype | None = None,
        remove_batch_dim: bool = False,
        pos_slice: PositionSlice = None,
        incl_bwd: bool = False,
        return_cache_object: bool = True,
        **model_kwargs: Any,
    ) -> tuple[Any, Any]:
        """Run the forward pass and keep the activations that ``names_filter`` selects.

        The cache holds the activations themselves (detached, not copied), on their device
        and in their dtype, unless asked otherwise:

        - ``device``: move each activation there as it is produced; ``"cpu"`` on a GPU copies
          through pinned memory without blocking, and synchronises before returning;
        - ``dtype``: store in this floating type (e.g. ``torch.bfloat16`` halves the memory);
        - ``pos_slice``: keep only these positions (an int, which drops the position axis,
          a slice, or a list of positions); attention scores and patterns are sliced along
          their query axis and keep every key;
        - ``remove_batch_dim``: drop the batch axis of a batch of one.

        With ``incl_bwd`` the output (a scalar, e.g. ``return_type="loss"``) is
        backpropagated and gradients kept as ``name + "_grad"``.

        Example:
            >>> logits, cache = model.run_with_cache(tokens, names_filter=lambda n: "pattern" in n)
            >>> cache["pattern", 0].shape   # [batch, head, query_pos, key_pos]
            >>> _, last = model.run_with_cache(tokens, pos_slice=-1, dtype=torch.float16)
            >>> last["resid_post", 0].shape   # [batch, d_model]
        """
        from interp.cache import ActivationCache

        store, fwd, bwd = self.get_caching_hooks(
            names_filter, incl_bwd, device, dtype, remove_batch_dim, pos_slice
        )
        with self.hooks(fwd, bwd):
            model_out = self(*model_args, **model_kwargs)
            if incl_bwd:
                if not (isinstance(model_out, Tensor) and model_out.numel() == 1):
                    raise ValueError(
                        "incl_bwd=True backpropagates the model output, which must be a scalar; "
                        "pass return_type='loss'."
                    )
                model_out.backward()
        if device is not None and torch.cuda.is_available():
            torch.cuda.synchronize()  # the non-blocking copies to pinned memory have landed
        if not return_cache_object:
            return model_out, store
        return model_out, ActivationCache(store, self, has_batch_dim=not remove_batch_dim)
