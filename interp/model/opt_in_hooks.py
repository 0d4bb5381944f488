"""Opt-in hook points: the ``set_use_*`` switches that add (or remove) the hooks
TransformerLens leaves off by default, because they cost memory or time: each head's output
(``attn.hook_result``), per-head attention inputs (``hook_q_input``/``hook_k_input``/
``hook_v_input``, ``hook_attn_in``) and the MLP's input (``hook_mlp_in``).

Example:
    >>> model.set_use_attn_result(True)
    >>> _, cache = model.run_with_cache(tokens, names_filter=lambda name: "result" in name)
"""

from __future__ import annotations


class OptInHooksMixin:
    """TransformerLens's ``set_use_*`` methods; the class using it has ``cfg``, ``blocks``
    (each with ``sync_opt_in_hooks``) and ``setup``."""

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
        self._set_opt_in_hooks("use_hook_mlp_in", use)
