"""Hook names: which hook points a name, a ``names_filter`` or a list of ``(name, fn)``
pairs refers to, with errors that say what is wrong and how to fix it (an unknown name
lists the closest valid ones).

A ``names_filter`` is None (every hook point), a name, a list of names, or a predicate
``name -> bool``; a hook's name may be a name or a predicate.

Example:
    >>> model.hook_names(lambda name: name.endswith("hook_pattern"))[:1]
    ['blocks.0.attn.hook_pattern']
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from torch import Tensor

from interp.hooks.hook_point import HookFn, HookPoint

HookName = str | Callable[[str], bool]
NamesFilter = None | str | Sequence[str] | Callable[[str], bool]


def check_hook_pairs(argument: str, pairs: Any) -> list[tuple[HookName, HookFn]]:
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


class HookNamesMixin:
    """Name resolution for ``HookedRootModule``; the class using it has ``hook_dict``."""

    hook_dict: dict[str, HookPoint]

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
