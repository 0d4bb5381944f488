"""Hook points and the root module that finds, adds, removes and caches through them.

A ``HookPoint`` is an identity module with a name. A hook function ``fn(activation, hook)``
attached to it may read the activation or return a tensor of the same shape, dtype and
device to replace it. Hooks added by ``hooks()``, ``run_with_hooks`` and ``run_with_cache``
are removed when they finish, even when the forward pass raises, and only the thread that
added them runs them; permanent hooks stay until ``reset_hooks(including_permanent=True)``.

The code lives in one file per concept: ``hook_point`` (``HookPoint``, ``Hook``),
``names`` (names filters and ``(name, fn)`` pairs) and ``root_module``
(``HookedRootModule``); this package gathers their names.
"""

from interp.hooks.hook_point import Direction, Hook, HookFn, HookPoint
from interp.hooks.names import HookName, NamesFilter
from interp.hooks.root_module import HookedRootModule

__all__ = [
    "Direction",
    "Hook",
    "HookFn",
    "HookName",
    "HookPoint",
    "HookedRootModule",
    "NamesFilter",
]
