"""TransformerLens's ``transformer_lens.hook_points`` names, for scripts ported by import.

Example:
    >>> from interp.hook_points import HookPoint, HookedRootModule
"""

from interp.hooks import Hook, HookedRootModule, HookFn, HookPoint, NamesFilter

LensHandle = Hook  # what HookPoint.add_hook returns: .remove(), .is_permanent, .context_level
HookFunction = HookFn

__all__ = ["HookFunction", "HookPoint", "HookedRootModule", "LensHandle", "NamesFilter"]
