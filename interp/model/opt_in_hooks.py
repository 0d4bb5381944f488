"""Opt-in hook points: the ``set_use_*`` switches that add (or remove) the hooks
TransformerLens leaves off by default, because they cost memory or time: each head's output
(``attn.hook_result``), per-head attention inputs (``hook_q_input``/``hook_k_input``/
``hook_v_input``, ``hook_attn_in``) and the MLP's input (``hook_mlp_in``).

A hook named while its switch is off is an ``OptInHookError`` naming the switch, as
TransformerLens's ``check_hooks_to_add`` asserts.

Example:
    >>> model.set_use_attn_result(True)
    >>> _, cache = model.run_with_cache(tokens, names_filter=lambda name: "result" in name)
    >>> cache["result", 0].shape   # each head's output: [batch, pos, head_index, d_model]
    torch.Size([1, 21, 1, 128])
    >>> model.set_use_attn_result(False)   # the switch stays on the model until turned off
"""

from __future__ import annotations

import re

from interp.components import OPT_IN_HOOKS

# blocks.{l}.attn.hook_result, blocks.{l}.hook_q_input, ...: (layer, the hook's own name).
_OPT_IN_NAME = re.compile(r"^blocks\.(\d+)\.(?:attn\.)?(hook_\w+)$")
_SWITCHES = {  # "attn.hook_result" -> "use_attn_result", "block.hook_q_input" -> ...
    f"{owner}.{hook}": flag for flag, (owner, hooks) in OPT_IN_HOOKS.items() for hook in hooks
}


class OptInHookError(AssertionError, KeyError):
    """A hook on an opt-in hook point whose switch is off. An ``AssertionError``, as
    TransformerLens's check raises, and a ``KeyError``, as for any other missing hook name."""

    def __str__(self) -> str:
        return str(self.args[0])


class OptInHooksMixin:
    """TransformerLens's ``set_use_*`` methods; the class using it has ``cfg``, ``blocks``
    (each with ``sync_opt_in_hooks``) and ``setup``."""

    def check_hook_name(self, name: str) -> None:
        """As ``HookedRootModule.check_hook_name``; an opt-in hook point whose switch is off
        (``attn.hook_result`` with ``use_attn_result=False``, ...) says which switch turns it
        on, as TransformerLens's ``check_hooks_to_add`` does."""
        flag = self._switched_off(name) if isinstance(name, str) else None
        if flag is not None and name not in self.hook_dict:
            raise OptInHookError(
                f"Cannot add hook {name} if {flag} is False: call model.set_{flag}(True) "
                "first (it adds the hook points that switch turns on)."
            )
        super().check_hook_name(name)

    def _switched_off(self, name: str) -> str | None:
        """The config flag of the opt-in hook point ``name`` when that flag is off."""
        match = _OPT_IN_NAME.match(name)
        if match is None or int(match.group(1)) >= self.cfg.n_layers:
            return None
        owner = "attn" if ".attn." in name else "block"
        flag = _SWITCHES.get(f"{owner}.{match.group(2)}")
        if flag is None or getattr(self.cfg, flag):
            return None
        if flag == "use_hook_mlp_in" and self.cfg.attn_only:
            return None  # no MLP: the name is simply unknown
        return flag

    def _set_opt_in_hooks(self, flag: str, use: bool) -> None:
        setattr(self.cfg, flag, use)
        for block in self.blocks:
            block.sync_opt_in_hooks()
        self.setup()

    def set_use_attn_result(self, use: bool) -> None:
        """Turn ``attn.hook_result`` (each head's output, [batch, pos, n_heads, d_model]) on/off."""
        self._set_opt_in_hooks("use_attn_result", use)

    def set_use_split_qkv_input(self, use: bool) -> None:
        """Turn ``hook_q_input``/``hook_k_input``/``hook_v_input`` (per-head inputs) on/off."""
        self._set_opt_in_hooks("use_split_qkv_input", use)

    def set_use_attn_in(self, use: bool) -> None:
        """Turn ``hook_attn_in`` (the per-head attention input) on/off."""
        self._set_opt_in_hooks("use_attn_in", use)

    def set_use_hook_mlp_in(self, use: bool) -> None:
        """Turn ``hook_mlp_in`` (the MLP's input) on/off."""
        if use and self.cfg.attn_only:
            raise ValueError(
                "set_use_hook_mlp_in(True) adds a hook on the MLP's input, but this model is "
                "attention-only (attn_only=True) and has no MLP."
            )
        self._set_opt_in_hooks("use_hook_mlp_in", use)
