"""Hook points and the root module that finds, adds, removes and caches through them.

A ``HookPoint`` is an identity module with a name. A hook function ``fn(activation, hook)``
attached to it may read the activation or return a tensor of the same shape, dtype and
device to replace it. Hooks added by ``hooks()``, ``run_with_hooks`` and ``run_with_cache``
are removed when they finish, even when the forward pass raises, and only the thread that
added them runs them; permanent hooks stay until ``reset_hooks(including_permanent=True)``.
"""

from __future__ import annotations

import difflib
import functools
import logging
import re
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Literal

import torch
from torch import Tensor, nn

from interp.caching import ActivationKeeper, PositionSlice

HookFn = Callable[..., Tensor | tuple[Tensor] | None]
HookName = str | Callable[[str], bool]
NamesFilter = None | str | Sequence[str] | Callable[[str], bool]
Direction = Literal["fwd", "bwd"]
_LAYER_IN_NAME = re.compile(r"^blocks\.(\d+)\.")
# Serialises changes to hook lists. A list is replaced, never changed in place, so a pass
# that is running keeps the hooks it started with whatever its hooks (or other threads) do.
_HOOK_LISTS_LOCK = threading.Lock()
_BWD_HOOKS_RESET_WARNING = (  # TransformerLens's text, then the fix
    "WARNING: Hooks will be reset at the end of run_with_hooks. This removes the backward "
    "hooks before a backward pass can occur. To run them in a later .backward(), pass "
    "reset_hooks_end=False and call model.reset_hooks() afterwards, or call .backward() "
    "inside `with model.hooks(bwd_hooks=...)`."
)


@dataclass(eq=False)
class Hook:
    """One hook function attached to one hook point; ``remove()`` detaches it.

    ``context_level`` is the ``hooks()`` nesting depth that added it (None outside one);
    ``thread`` is the thread whose passes alone run it (None: every thread's).
    """

    hook_point: HookPoint
    fn: HookFn
    direction: Direction
    is_permanent: bool = False
    context_level: int | None = None
    thread: int | None = None

    def remove(self) -> None:
        self.hook_point._replace_hooks(
            self.direction, lambda hooks: [h for h in hooks if h is not self]
        )


class HookPoint(nn.Module):
    """An identity module at a named point of the forward pass.

    Example:
        >>> hook_point = model.hook_dict["blocks.0.hook_resid_pre"]
        >>> handle = hook_point.add_hook(lambda resid, hook: resid * 0)   # zero-ablate it
        >>> handle.remove()
    """

    def __init__(self) -> None:
        super().__init__()
        self.name: str | None = None
        self.fwd_hooks: list[Hook] = []
        self.bwd_hooks: list[Hook] = []
        self.ctx: dict[Any, Any] = {}  # free storage for hooks (TransformerLens's ``ctx``)

    def hooks_of(self, direction: Direction) -> list[Hook]:
        if direction not in ("fwd", "bwd"):
            raise ValueError(f"Hook direction must be 'fwd' or 'bwd', got {direction!r}.")
        return self.fwd_hooks if direction == "fwd" else self.bwd_hooks

    def visible_hooks(self, direction: Direction) -> list[Hook]:
        """The hooks a pass in this thread runs: all but other threads' context hooks."""
        thread = threading.get_ident()
        return [h for h in self.hooks_of(direction) if h.thread is None or h.thread == thread]

    @property
    def has_hooks(self) -> bool:
        """Whether a pass in this thread runs any hook here."""
        if not (self.fwd_hooks or self.bwd_hooks):
            return False
        thread = threading.get_ident()
        for hooks in (self.fwd_hooks, self.bwd_hooks):
            for hook in hooks:
                if hook.thread is None or hook.thread == thread:
                    return True
        return False

    @property
    def only_read(self) -> bool:
        """No hook here can change the activation or wants its gradient: every one this thread
        runs is a forward hook marked ``reads_only`` (as caching hooks are), so a fused kernel
        may compute what follows without waiting for them."""
        return not self.visible_hooks("bwd") and all(
            getattr(h.fn, "reads_only", False) for h in self.visible_hooks("fwd")
        )

    def layer(self) -> int:
        """The block index in this hook's name (``blocks.3.attn.hook_z`` -> 3)."""
        match = _LAYER_IN_NAME.match(self.name or "")
        if match is None:
            raise ValueError(f"Hook point {self.name!r} is not inside a transformer block.")
        return int(match.group(1))

    # ---------------------------------------------------------------- adding / removing
    def add_hook(
        self,
        hook: HookFn,
        dir: Direction = "fwd",
        is_permanent: bool = False,
        level: int | None = None,
        prepend: bool = False,
    ) -> Hook:
        """Attach ``hook(activation, hook=hook_point)``; it runs before existing hooks if
        ``prepend``. ``level`` tags it for ``remove_hooks(level=...)``.

        A backward hook gets the gradient and may return a replacement, ``(grad,)`` or None.
        """
        if not callable(hook):
            raise TypeError(f"A hook must be callable as fn(activation, hook), got {hook!r}.")
        self.hooks_of(dir)  # a bad direction raises before anything is attached
        return self.attach(Hook(self, hook, dir, is_permanent, level), prepend)

    def add_perma_hook(self, hook: HookFn, dir: Direction = "fwd") -> Hook:
        """Attach a hook that ``reset_hooks()`` leaves (``including_permanent=True`` removes it)."""
        return self.add_hook(hook, dir=dir, is_permanent=True)

    def attach(self, hook: Hook, prepend: bool = False) -> Hook:
        """Attach an already built ``Hook`` (``hooks()`` builds thread-scoped ones)."""
        self._replace_hooks(
            hook.direction, lambda hooks: [hook, *hooks] if prepend else [*hooks, hook]
        )
        return hook

    def remove_hooks(
        self,
        dir: Direction | Literal["both"] = "fwd",
        including_permanent: bool = False,
        level: int | None = None,
    ) -> None:
        """Remove this thread's hooks in ``dir`` (only those of context ``level`` if given);
        other threads' context hooks stay theirs."""
        if dir not in ("fwd", "bwd", "both"):
            raise ValueError(f"Hook direction must be 'fwd', 'bwd' or 'both', got {dir!r}.")
        thread = threading.get_ident()

        def stays(hook: Hook) -> bool:
            return (
                (hook.is_permanent and not including_permanent)
                or (level is not None and hook.context_level != level)
                or hook.thread not in (None, thread)
            )

        for direction in ("fwd", "bwd") if dir == "both" else (dir,):
            self._replace_hooks(direction, lambda hooks: [h for h in hooks if stays(h)])

    def clear_context(self) -> None:
        self.ctx = {}

    def _replace_hooks(
        self, direction: Direction, change: Callable[[list[Hook]], list[Hook]]
    ) -> None:
        with _HOOK_LISTS_LOCK:
            setattr(self, f"{direction}_hooks", change(self.hooks_of(direction)))

    # --------------------------------------------------------------------------- running
    def forward(self, activation: Tensor) -> Tensor:
        if not (self.fwd_hooks or self.bwd_hooks):
            return activation
        thread = threading.get_ident()
        # The list as it is now: hooks that a hook adds or removes take effect next pass.
        for hook in self.fwd_hooks:
            if hook.thread is not None and hook.thread != thread:
                continue  # another thread's context hook
            replacement = hook.fn(activation, hook=self)
            if replacement is not None:
                activation = self._checked(replacement, activation, hook)
        bwd_hooks = self.visible_hooks("bwd") if self.bwd_hooks else None
        if bwd_hooks and activation.requires_grad:
            # Chosen now, in the forward's thread: autograd may run backward in another.
            activation.register_hook(functools.partial(self._run_backward_hooks, bwd_hooks))
        return activation

    def _run_backward_hooks(self, hooks: list[Hook], grad: Tensor) -> Tensor:
        for hook in hooks:
            if hook not in self.bwd_hooks:  # removed since the forward pass
                continue
            replacement = hook.fn(grad, hook=self)
            if isinstance(replacement, tuple) and len(replacement) == 1:  # PyTorch's (grad,)
                replacement = replacement[0]
            if replacement is not None:
                grad = self._checked(replacement, grad, hook)
        return grad

    def _checked(self, replacement: Any, original: Tensor, hook: Hook) -> Tensor:
        what = "activation" if hook.direction == "fwd" else "gradient"
        fix = f"return a tensor of the same {{}}, or None to leave the {what} unchanged."
        where = f"Hook {_fn_name(hook.fn)!r} on {self.name}"
        if not isinstance(replacement, Tensor):
            raise TypeError(
                f"{where} returned {type(replacement).__name__}; return a tensor of the "
                f"{what}'s shape, or None to leave it unchanged."
            )
        if replacement.shape != original.shape:
            raise ValueError(
                f"{where} returned shape {tuple(replacement.shape)}, but the {what} has shape "
                f"{tuple(original.shape)}; " + fix.format("shape")
            )
        if replacement.dtype != original.dtype and not (
            replacement.is_floating_point()
            and original.is_floating_point()
            and torch.is_autocast_enabled(original.device.type)  # autocast mixes float types
        ):
            raise TypeError(
                f"{where} returned dtype {replacement.dtype}, but the {what} has dtype "
                f"{original.dtype}; " + fix.format(f"dtype (e.g. `.to({original.dtype})`)")
            )
        if replacement.device != original.device:
            raise ValueError(
                f"{where} returned a tensor on {replacement.device}, but the {what} is on "
                f"{original.device}; " + fix.format(f"device (e.g. `.to('{original.device}')`)")
            )
        return replacement

    def __repr__(self) -> str:
        return f"HookPoint({self.name!r})"


def _fn_name(fn: Callable) -> str:
    if isinstance(fn, functools.partial):  # its repr may print whole tensors
        return f"partial({_fn_name(fn.func)}, ...)"
    return getattr(fn, "__name__", repr(fn))


def _hook_pairs(argument: str, pairs: Any) -> list[tuple[HookName, HookFn]]:
    """``fwd_hooks``/``bwd_hooks`` as a list of (name, fn) pairs, or an error naming the fix."""
    fix = f"pass a list of (name, fn) pairs: {argument}=[(name, fn)]"
    if isinstance(pairs, dict):
        raise TypeError(f"{argument} is a dict; {fix}, e.g. {argument}=list(hooks.items()).")
    if (
        isinstance(pairs, tuple)
        and len(pairs) == 2
        and (isinstance(pairs[0], str) or callable(pairs[0]))
        and callable(pairs[1])
    ):
        raise TypeError(f"{argument}={pairs!r} is a single (name, fn) pair; {fix}.")
    if isinstance(pairs, (str, Tensor)) or not isinstance(pairs, Iterable):
        raise TypeError(f"{argument}={pairs!r} is not a list; {fix}.")
    checked = []
    for pair in pairs:
        if not (isinstance(pair, (tuple, list)) and len(pair) == 2):
            raise TypeError(f"{argument} holds {pair!r}, which is not a (name, fn) pair; {fix}.")
        name, fn = pair
        if not (isinstance(name, str) or callable(name)):
            raise TypeError(
                f"{argument} names the hook point {name!r}; a name is a string "
                "(e.g. 'blocks.0.hook_resid_pre') or a function name -> bool."
            )
        if not callable(fn):
            raise TypeError(
                f"{argument} pairs {name!r} with {fn!r}; the hook must be callable as "
                "fn(activation, hook)."
            )
        checked.append((name, fn))
    return checked


class HookedRootModule(nn.Module):
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
        """Name every hook point after its module path; call at the end of ``__init__``."""
        self.mod_dict = {name: module for name, module in self.named_modules() if name}
        self.hook_dict = {}
        for name, module in self.mod_dict.items():
            if isinstance(module, HookPoint):
                module.name = name
                self.hook_dict[name] = module

    def hook_points(self) -> list[HookPoint]:
        return list(self.hook_dict.values())

    @property
    def context_level(self) -> int:
        """How many ``hooks()`` contexts this thread is inside."""
        return self._context_levels.get(threading.get_ident(), 0)

    # ----------------------------------------------------------------- name resolution
    def hook_names(self, names_filter: NamesFilter) -> list[str]:
        """The hook names a filter selects: None (all), a name, a list of names, or a predicate.

        Unknown names raise a ``KeyError`` that lists the closest valid names.
        """
        if names_filter is None:
            return list(self.hook_dict)
        if callable(names_filter):
            return [name for name in self.hook_dict if names_filter(name)]
        allowed = "None, a hook name, a list of hook names, or a function name -> bool"
        if isinstance(names_filter, str):
            names = [names_filter]
        elif isinstance(names_filter, (list, tuple, set, frozenset)):
            names = list(names_filter)
        else:
            raise TypeError(
                f"names_filter={names_filter!r} ({type(names_filter).__name__}); it must be "
                f"{allowed}."
            )
        for name in names:
            if not isinstance(name, str):
                raise TypeError(
                    f"names_filter holds {name!r} ({type(name).__name__}), which is not a hook "
                    f"name; names_filter must be {allowed}."
                )
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

    def _points_named(self, name: HookName) -> list[HookPoint]:
        if callable(name):
            return [self.hook_dict[n] for n in self.hook_names(name)]
        self.check_hook_name(name)
        return [self.hook_dict[name]]

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
        """
        pairs = [("fwd", *pair) for pair in _hook_pairs("fwd_hooks", fwd_hooks)]
        pairs += [("bwd", *pair) for pair in _hook_pairs("bwd_hooks", bwd_hooks)]
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
            >>> logits = model.run_with_hooks(tokens, fwd_hooks=[("hook_embed", fn)])
        """
        fwd_hooks = _hook_pairs("fwd_hooks", fwd_hooks)
        bwd_hooks = _hook_pairs("bwd_hooks", bwd_hooks)
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

        The storage options are ``run_with_cache``'s (see ``interp.caching.ActivationKeeper``).
        With ``device="cpu"`` on a GPU the copies do not block: call
        ``torch.cuda.synchronize()`` before reading the dict (``run_with_cache`` does).

        Example:
            >>> store, fwd_hooks, _ = model.get_caching_hooks("blocks.0.hook_resid_post")
            >>> with model.hooks(fwd_hooks=fwd_hooks):
            ...     model(tokens)
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
            >>> model(tokens); model.reset_hooks()
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
            >>> _, last = model.run_with_cache(tokens, pos_slice=-1, dtype=torch.float16)
            >>> last["resid_post", 0].shape   # [batch, 1, d_model]
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
