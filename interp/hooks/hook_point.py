"""The hook point: an identity module at a named point of the forward pass, and the hooks
attached to it.

A hook function ``fn(activation, hook)`` attached to a ``HookPoint`` may read the
activation or return a tensor of the same shape, dtype and device to replace it; a backward
hook does the same with the gradient. A ``Hook`` is one attached function: ``remove()``
detaches it. Hooks that ``HookedRootModule.hooks()`` adds belong to one thread: only that
thread's passes run them.

Example:
    >>> handle = model.hook_dict["hook_embed"].add_hook(lambda embed, hook: embed * 0)
    >>> _, cache = model.run_with_cache(tokens)
    >>> bool(cache["hook_embed"].eq(0).all())   # the cache sees what the hook returned
    True
    >>> handle.remove()
"""

from __future__ import annotations

import functools
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

import torch
from torch import Tensor, nn

HookFn = Callable[..., Tensor | tuple[Tensor] | None]
Direction = Literal["fwd", "bwd"]
_LAYER_IN_NAME = re.compile(r"^blocks\.(\d+)\.")
# Serialises changes to hook lists. A list is replaced, never changed in place, so a pass
# that is running keeps the hooks it started with whatever its hooks (or other threads) do.
_HOOK_LISTS_LOCK = threading.Lock()


def check_direction(value: object, argument: str = "dir", allow_both: bool = False) -> None:
    """Raise a ValueError naming ``value`` unless it is "fwd" or "bwd" (or "both" when
    ``allow_both``: removing hooks of both directions)."""
    valid = ("fwd", "bwd", "both") if allow_both else ("fwd", "bwd")
    if not (isinstance(value, str) and value in valid):
        shown = " or ".join(repr(v) for v in valid)
        raise ValueError(
            f"{argument}={value!r} is not a hook direction: pass {shown} (forward hooks see "
            "activations, backward hooks their gradients)."
        )


def check_flag(value: object, argument: str) -> None:
    """Raise a TypeError naming ``value`` unless it is a bool (or 0 / 1): a string such as
    ``reset_hooks("fwd")`` lands in the first flag, and would count as True."""
    if not (isinstance(value, bool) or (isinstance(value, int) and value in (0, 1))):
        hint = ""
        if isinstance(value, str):
            hint = " (a direction, 'fwd', 'bwd' or 'both', goes in direction=)"
        raise TypeError(f"{argument}={value!r} is not a flag: pass True or False{hint}.")


def check_level(level: object) -> None:
    """Raise a TypeError naming ``level`` unless it is None or an int >= 0 (a ``hooks()``
    nesting depth)."""
    if level is not None and (isinstance(level, bool) or not isinstance(level, int) or level < 0):
        raise TypeError(
            f"level={level!r} is not a hooks() context level: pass None (every level) or an "
            "int >= 0."
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
        >>> len(hook_point.fwd_hooks)
        1
        >>> handle.remove()
        >>> hook_point.fwd_hooks
        []
    """

    def __init__(self) -> None:
        super().__init__()
        self.name: str | None = None
        self.fwd_hooks: list[Hook] = []
        self.bwd_hooks: list[Hook] = []
        self.ctx: dict[Any, Any] = {}  # free storage for hooks (TransformerLens's ``ctx``)

    def hooks_of(self, direction: Direction) -> list[Hook]:
        check_direction(direction, "direction")
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
        check_direction(dir)  # bad arguments raise before anything is attached
        check_level(level)
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
        check_direction(dir, allow_both=True)
        check_level(level)
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
