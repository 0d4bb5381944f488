"""HookedRootModule: the root module that finds its hook points once, by name, and adds,
removes and caches through them.

Hooks added by ``hooks()``, ``run_with_hooks`` and ``run_with_cache`` are removed when they
finish, even when the forward pass raises, and only the thread that added them runs them
(each thread's ``hooks()`` nesting depth is its own); permanent hooks stay until
``reset_hooks(including_permanent=True)``.

Example:
    >>> clean_loss = model(tokens, return_type="loss")
    >>> with model.hooks(fwd_hooks=[("blocks.1.attn.hook_z", lambda z, hook: z * 0)]):
    ...     ablated_loss = model(tokens, return_type="loss")   # without the induction head
    >>> bool(ablated_loss > clean_loss)
    True
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any, Literal

import torch
from torch import Tensor, nn

from interp.hooks.caching import ActivationKeeper, PositionSlice
from interp.hooks.hook_point import (
    Direction,
    Hook,
    HookFn,
    HookPoint,
    check_direction,
    check_flag,
    check_level,
)
from interp.hooks.names import HookName, HookNamesMixin, NamesFilter, check_hook_pairs

_BWD_HOOKS_RESET_WARNING = (  # TransformerLens's text, then the fix
    "WARNING: Hooks will be reset at the end of run_with_hooks. This removes the backward "
    "hooks before a backward pass can occur. To run them in a later .backward(), pass "
    "reset_hooks_end=False and call model.reset_hooks() afterwards, or call .backward() "
    "inside `with model.hooks(bwd_hooks=...)`."
)


class HookedRootModule(HookNamesMixin, nn.Module):
    """A module whose ``HookPoint`` submodules are found once, by name, in ``setup()``.

    Not thread-safe in general: weights, permanent hooks, hooks added with ``add_hook`` and
    hook points' ``ctx`` are shared by every thread. Hooks that ``hooks()``,
    ``run_with_hooks`` and ``run_with_cache`` add for their duration are the exception:
    only the thread that added them runs them (or sees them in ``has_hooks``), so threads
    may run different temporary hooks on one model at the same time.
    """

    hook_dict: dict[str, HookPoint]
    mod_dict: dict[str, nn.Module]

    def __init__(self) -> None:
        super().__init__()
        self._context_levels: dict[int, int] = {}  # thread -> hooks() contexts it is inside

    def setup(self) -> None:
        """Name every submodule after its path, as TransformerLens does
        (``model.blocks[0].attn.name == "blocks.0.attn"``), and find the hook points; call
        at the end of ``__init__`` and after replacing a submodule."""
        self.mod_dict = {name: module for name, module in self.named_modules() if name}
        self.hook_dict = {}
        for name, module in self.mod_dict.items():
            module.name = name
            if isinstance(module, HookPoint):
                self.hook_dict[name] = module

    def hook_points(self) -> list[HookPoint]:
        return list(self.hook_dict.values())

    @property
    def context_level(self) -> int:
        """How many ``hooks()`` contexts this thread is inside (settable, as TransformerLens's
        attribute: hooks this thread adds are then tagged with that level)."""
        return self._context_levels.get(threading.get_ident(), 0)

    @context_level.setter
    def context_level(self, level: int) -> None:
        if isinstance(level, bool) or not isinstance(level, int) or level < 0:
            raise ValueError(f"context_level must be an integer >= 0, got {level!r}.")
        if level:
            self._context_levels[threading.get_ident()] = level
        else:
            self._context_levels.pop(threading.get_ident(), None)

    # ---------------------------------------------------------------- adding / removing
    def add_hook(
        self,
        name: HookName,
        hook: HookFn,
        dir: Direction = "fwd",
        is_permanent: bool = False,
        level: int | None = None,
        prepend: bool = False,
    ) -> list[Hook]:
        """Attach ``hook`` at a named point, or at every point whose name passes a predicate.

        It stays (for every thread) until removed: ``reset_hooks()`` or each ``Hook.remove()``.
        """
        if not callable(hook):
            raise TypeError(f"A hook must be callable as fn(activation, hook), got {hook!r}.")
        check_direction(dir)  # before any point: a predicate may match none
        check_level(level)
        return [
            point.add_hook(hook, dir, is_permanent, level, prepend)
            for point in self._points_named(name)
        ]

    def add_perma_hook(self, name: HookName, hook: HookFn, dir: Direction = "fwd") -> list[Hook]:
        return self.add_hook(name, hook, dir=dir, is_permanent=True)

    def remove_all_hook_fns(
        self,
        direction: Direction | Literal["both"] = "both",
        including_permanent: bool = False,
        level: int | None = None,
    ) -> None:
        """Remove this thread's hooks (only those of context ``level`` if given)."""
        check_direction(direction, "direction", allow_both=True)
        check_flag(including_permanent, "including_permanent")
        check_level(level)
        for hook_point in self.hook_dict.values():
            hook_point.remove_hooks(direction, including_permanent, level)

    def clear_contexts(self) -> None:
        for hook_point in self.hook_dict.values():
            hook_point.clear_context()

    def reset_hooks(
        self,
        clear_contexts: bool = True,
        direction: Direction | Literal["both"] = "both",
        including_permanent: bool = False,
        level: int | None = None,
    ) -> None:
        """Remove every hook (permanent ones too if ``including_permanent``) and empty each
        hook point's ``ctx``; another thread's context hooks stay (its context removes them)."""
        check_flag(clear_contexts, "clear_contexts")  # every argument before anything changes
        check_direction(direction, "direction", allow_both=True)
        check_flag(including_permanent, "including_permanent")
        check_level(level)
        if clear_contexts:
            self.clear_contexts()
        self.remove_all_hook_fns(direction, including_permanent, level)

    @contextmanager
    def hooks(
        self,
        fwd_hooks: Sequence[tuple[HookName, HookFn]] = (),
        bwd_hooks: Sequence[tuple[HookName, HookFn]] = (),
        reset_hooks_end: bool = True,
        clear_contexts: bool = False,
    ) -> Iterator[HookedRootModule]:
        """Attach hooks for the body of a ``with`` block, then remove exactly those.

        Contexts nest; every name is checked before any hook is attached. Only this thread's
        passes run these hooks. With ``reset_hooks_end=False`` they stay after the block,
        for every thread, until ``reset_hooks()``; ``clear_contexts`` empties every hook
        point's ``ctx`` when the hooks are removed.

        Example:
            >>> with model.hooks(fwd_hooks=[("blocks.0.attn.hook_z", lambda z, hook: z * 0)]):
            ...     ablated_logits = model(tokens)
            >>> model.hook_dict["blocks.0.attn.hook_z"].fwd_hooks   # removed on leaving
            []
        """
        check_flag(reset_hooks_end, "reset_hooks_end")
        check_flag(clear_contexts, "clear_contexts")
        pairs = [("fwd", *pair) for pair in check_hook_pairs("fwd_hooks", fwd_hooks)]
        pairs += [("bwd", *pair) for pair in check_hook_pairs("bwd_hooks", bwd_hooks)]
        targets = [(direction, self._points_named(name), fn) for direction, name, fn in pairs]
        thread = threading.get_ident()
        level = self.context_level + 1
        self._context_levels[thread] = level
        added: list[Hook] = []
        try:
            for direction, points, fn in targets:
                for point in points:  # hooks that outlive the block are every thread's
                    owner = thread if reset_hooks_end else None
                    added.append(point.attach(Hook(point, fn, direction, False, level, owner)))
            yield self
        finally:
            if reset_hooks_end:
                for hook in added:
                    hook.remove()
                if clear_contexts:
                    self.clear_contexts()
            if level == 1:
                self._context_levels.pop(thread, None)
            else:
                self._context_levels[thread] = level - 1

    def run_with_hooks(
        self,
        *model_args: Any,
        fwd_hooks: Sequence[tuple[HookName, HookFn]] = (),
        bwd_hooks: Sequence[tuple[HookName, HookFn]] = (),
        reset_hooks_end: bool = True,
        clear_contexts: bool = False,
        **model_kwargs: Any,
    ) -> Any:
        """Run the forward pass with temporary hooks.

        Backward hooks are removed on return like the rest (with TransformerLens's warning):
        for a later ``.backward()``, pass ``reset_hooks_end=False`` and call
        ``reset_hooks()`` afterwards, or run the backward inside ``with model.hooks(...)``.

        Example:
            >>> def zero_ablate(z, hook):   # z: [batch, pos, head_index, d_head]
            ...     return z * 0
            >>> fwd_hooks = [("blocks.1.attn.hook_z", zero_ablate)]
            >>> logits = model.run_with_hooks(tokens, fwd_hooks=fwd_hooks)
            >>> logits.shape   # [batch, pos, d_vocab]
            torch.Size([1, 21, 512])
        """
        fwd_hooks = check_hook_pairs("fwd_hooks", fwd_hooks)
        bwd_hooks = check_hook_pairs("bwd_hooks", bwd_hooks)
        if bwd_hooks and reset_hooks_end:
            logging.warning(_BWD_HOOKS_RESET_WARNING)
        with self.hooks(fwd_hooks, bwd_hooks, reset_hooks_end, clear_contexts):
            return self(*model_args, **model_kwargs)

    # ----------------------------------------------------------------------- caching
    def get_caching_hooks(
        self,
        names_filter: NamesFilter = None,
        incl_bwd: bool = False,
        device: torch.device | str | None = None,
        remove_batch_dim: bool = False,
        cache: dict[str, Tensor] | None = None,
        pos_slice: PositionSlice = None,
        dtype: torch.dtype | None = None,
    ) -> tuple[dict[str, Tensor], list[tuple[str, HookFn]], list[tuple[str, HookFn]]]:
        """Hooks that store activations (and gradients, as ``name + "_grad"``) in ``cache``
        (a new dict by default), which is returned with them.

        The storage options are ``run_with_cache``'s (see
        ``interp.hooks.caching.ActivationKeeper``).
        With ``device="cpu"`` on a GPU the copies do not block: call
        ``torch.cuda.synchronize()`` before reading the dict (``run_with_cache`` does).

        Example:
            >>> store, fwd_hooks, _ = model.get_caching_hooks("blocks.0.hook_resid_post")
            >>> with model.hooks(fwd_hooks=fwd_hooks):
            ...     _ = model(tokens)
            >>> store["blocks.0.hook_resid_post"].shape   # [batch, pos, d_model]
            torch.Size([1, 21, 128])
        """
        keeper = ActivationKeeper(device, dtype, remove_batch_dim, pos_slice)
        store: dict[str, Tensor] = {} if cache is None else cache
        names = self.hook_names(names_filter)

        def save(key: str) -> HookFn:
            def save_hook(activation: Tensor, hook: HookPoint) -> None:
                store[key] = keeper.keep(activation, hook.name)

            save_hook.reads_only = True
            return save_hook

        fwd = [(name, save(name)) for name in names]
        bwd = [(name, save(name + "_grad")) for name in names] if incl_bwd else []
        return store, fwd, bwd

    def add_caching_hooks(
        self,
        names_filter: NamesFilter = None,
        incl_bwd: bool = False,
        device: torch.device | str | None = None,
        remove_batch_dim: bool = False,
        cache: dict[str, Tensor] | None = None,
    ) -> dict[str, Tensor]:
        """Attach caching hooks until ``reset_hooks()``; every pass then fills the returned dict.

        Example:
            >>> cache = model.add_caching_hooks("blocks.0.hook_resid_post")
            >>> _ = model(tokens)
            >>> model.reset_hooks()
            >>> list(cache)
            ['blocks.0.hook_resid_post']
        """
        store, fwd, bwd = self.get_caching_hooks(
            names_filter, incl_bwd, device, remove_batch_dim, cache
        )
        for direction, pairs in (("fwd", fwd), ("bwd", bwd)):
            for name, fn in pairs:
                self.add_hook(name, fn, dir=direction)
        return store

    def run_with_cache(
        self,
        *model_args: Any,
        names_filter: NamesFilter = None,
        device: torch.device | str | None = None,
        dtype: torch.dtype | None = None,
        remove_batch_dim: bool = False,
        pos_slice: PositionSlice = None,
        incl_bwd: bool = False,
        reset_hooks_end: bool = True,
        clear_contexts: bool = False,
        return_cache_object: bool = True,
        **model_kwargs: Any,
    ) -> tuple[Any, Any]:
        """Run the forward pass and keep the activations that ``names_filter`` selects.

        The cache holds the activations themselves (detached, not copied), on their device
        and in their dtype, unless asked otherwise:

        - ``device``: move each activation there as it is produced; ``"cpu"`` on a GPU copies
          through pinned memory without blocking, and synchronises before returning;
        - ``dtype``: store in this floating type (e.g. ``torch.bfloat16`` halves the memory);
        - ``pos_slice``: keep only these positions (an int, which keeps the position axis as
          TransformerLens does, a slice or tuple, a list of positions, or a ``Slice``;
          ``Slice(-1)`` drops the axis); attention scores and patterns are sliced along
          their query axis and keep every key;
        - ``remove_batch_dim``: drop the batch axis of a batch of one.

        With ``incl_bwd`` the output (a scalar, e.g. ``return_type="loss"``) is
        backpropagated and gradients kept as ``name + "_grad"``. ``reset_hooks_end`` and
        ``clear_contexts`` are ``hooks()``'s.

        Example:
            >>> logits, cache = model.run_with_cache(tokens, names_filter=lambda n: "pattern" in n)
            >>> cache["pattern", 0].shape   # [batch, head, query_pos, key_pos]
            torch.Size([1, 1, 21, 21])
            >>> _, last = model.run_with_cache(tokens, pos_slice=-1, dtype=torch.float16)
            >>> last["resid_post", 0].shape, last["resid_post", 0].dtype   # [batch, 1, d_model]
            (torch.Size([1, 1, 128]), torch.float16)
        """
        from interp.cache import ActivationCache

        if incl_bwd and not torch.is_grad_enabled():
            raise RuntimeError(
                "run_with_cache(incl_bwd=True) runs a backward pass, but gradients are off here "
                "(torch.no_grad() or torch.inference_mode()); backward hooks need gradients: "
                "call it outside torch.no_grad()."
            )
        store, fwd, bwd = self.get_caching_hooks(
            names_filter, incl_bwd, device, remove_batch_dim, pos_slice=pos_slice, dtype=dtype
        )
        with self.hooks(fwd, bwd, reset_hooks_end, clear_contexts):
            model_out = self(*model_args, **model_kwargs)
            if incl_bwd:
                if not (isinstance(model_out, Tensor) and model_out.numel() == 1):
                    raise ValueError(
                        "incl_bwd=True backpropagates the model output, which must be a scalar; "
                        "pass return_type='loss'."
                    )
                if not model_out.requires_grad:
                    raise RuntimeError(
                        "incl_bwd=True backpropagates the model output, but it does not depend "
                        "on anything that requires grad; call model.requires_grad_(True) first."
                    )
                model_out.backward()
        if device is not None and torch.cuda.is_available():
            torch.cuda.synchronize()  # the non-blocking copies to pinned memory have landed
        if not return_cache_object:
            return model_out, store
        return model_out, ActivationCache(store, self, has_batch_dim=not remove_batch_dim)
