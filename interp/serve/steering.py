"""Steering a forward pass: add to, clamp or ablate one SAE feature, one MLP neuron or one
direction of a hook's activation, at every position, and what that does to the next-token
logits and to a greedy continuation.

Each edit is an ordinary forward hook (``Edit.hook``), the same one a notebook would add:

* a feature (SAE with the error term kept): the activation ``x`` at the SAE's hook becomes
  ``x + (new - a) * W_dec[f]``, ``a`` the feature's activation on ``x`` and ``new`` ``a +
  value`` (add), ``value`` (clamp) or 0 (ablate): what splicing the SAE with its error term
  and setting ``hook_sae_acts_post[..., f]`` gives;
* a neuron: ``blocks.{layer}.mlp.hook_post[..., n]`` plus ``value``, set to it, or 0;
* a direction ``d`` (made unit) at any hook: ``x + value * d``, ``x``'s component along
  ``d`` set to ``value``, or removed.

Example:
    >>> chars = interp.load_model("shakespeare-char")
    >>> sae = interp.load_sae("shakespeare-char-resid-l1")
    >>> text = chars.to_tokens("To be, or not")
    >>> edit = Edit("feature", "clamp", 5.0, feature=7)
    >>> edit.hook(chars, sae)[0]   # the hook it edits: the SAE's
    'blocks.1.hook_resid_post'
    >>> logits = chars.run_with_hooks(text, fwd_hooks=[edit.hook(chars, sae)])
    >>> logits.shape, torch.equal(logits, chars(text))   # [batch, pos, d_vocab]; changed
    (torch.Size([1, 13, 65]), False)
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from jaxtyping import Float, Int
from torch import Tensor

from interp.serve.errors import ApiError

MODES = ("add", "clamp", "ablate")


def _changed(current: Tensor, mode: str, value: float) -> Tensor:
    """The new value of ``current`` under ``mode``."""
    if mode == "add":
        return current + value
    if mode == "clamp":
        return torch.full_like(current, value)
    return torch.zeros_like(current)


@dataclass(frozen=True)
class Edit:
    """One steering edit: ``target`` "feature" (``feature``), "neuron" (``layer``,
    ``neuron``) or "direction" (``hook_name``, ``direction`` [d]); ``mode`` add, clamp or
    ablate; ``value`` (unused by ablate)."""

    target: str
    mode: str
    value: float = 0.0
    feature: int | None = None
    layer: int | None = None
    neuron: int | None = None
    hook_name: str | None = None
    direction: tuple[float, ...] | None = None

    def hook(self, model: Any, sae: Any = None) -> tuple[str, Callable[..., Tensor]]:
        """``(hook name, hook function)`` for ``run_with_hooks``; a 422 naming a bad value."""
        if self.mode not in MODES:
            raise ApiError(422, f"mode {self.mode!r} is not one of {', '.join(MODES)}.")
        if self.target == "feature":
            return self._feature_hook(sae)
        if self.target == "neuron":
            return self._neuron_hook(model)
        if self.target == "direction":
            return self._direction_hook(model)
        raise ApiError(422, f"target {self.target!r} is not one of feature, neuron, direction.")

    def _feature_hook(self, sae: Any) -> tuple[str, Callable[..., Tensor]]:
        from interp.sae.features.logit_effects import decoder_rows

        if sae is None:
            raise ApiError(404, "No SAE is loaded for this model; start the server with --sae.")
        if self.feature is None or not 0 <= self.feature < sae.cfg.d_sae:
            raise ApiError(
                422,
                f"feature {self.feature} is out of range: the SAE has 0 to {sae.cfg.d_sae - 1}.",
            )
        if sae.cfg.output_hook != sae.cfg.hook_name:
            raise ApiError(
                422,
                f"{sae.cfg.hook_name} -> {sae.cfg.output_hook} is a transcoder; steering edits "
                "an SAE that reads and writes one hook.",
            )
        row = decoder_rows(sae)[self.feature].detach()  # [d_out]
        feature, mode, value = self.feature, self.mode, self.value

        def steer(x: Tensor, hook: Any) -> Tensor:
            acts = sae.encode(x.to(sae.dtype), hooked=False)[..., feature]  # [batch, pos]
            delta = _changed(acts, mode, value) - acts
            return x + (delta[..., None] * row).to(x.dtype)

        return sae.cfg.hook_name, steer

    def _neuron_hook(self, model: Any) -> tuple[str, Callable[..., Tensor]]:
        cfg = model.cfg
        if cfg.attn_only or cfg.d_mlp is None:
            raise ApiError(422, f"{cfg.model_name} has no MLP neurons (attention only).")
        if self.layer is None or not 0 <= self.layer < cfg.n_layers:
            raise ApiError(422, f"layer {self.layer} is out of range: 0 to {cfg.n_layers - 1}.")
        if self.neuron is None or not 0 <= self.neuron < cfg.d_mlp:
            raise ApiError(422, f"neuron {self.neuron} is out of range: 0 to {cfg.d_mlp - 1}.")
        neuron, mode, value = self.neuron, self.mode, self.value

        def steer(x: Tensor, hook: Any) -> Tensor:
            x = x.clone()
            x[..., neuron] = _changed(x[..., neuron], mode, value)
            return x

        return f"blocks.{self.layer}.mlp.hook_post", steer

    def _direction_hook(self, model: Any) -> tuple[str, Callable[..., Tensor]]:
        if self.hook_name not in model.hook_dict:
            raise ApiError(
                422, f"hook {self.hook_name!r} is not a hook point of {model.cfg.model_name}."
            )
        if not self.direction:
            raise ApiError(422, "a direction edit needs a direction (a list of numbers).")
        direction = torch.tensor(self.direction, dtype=torch.float64)
        norm = float(direction.norm())
        if not norm > 0:
            raise ApiError(422, "the direction is zero (or not finite); give a nonzero vector.")
        unit = direction / norm
        mode, value = self.mode, self.value

        def steer(x: Tensor, hook: Any) -> Tensor:
            if x.shape[-1] != len(unit):
                raise ApiError(
                    422,
                    f"the direction has {len(unit)} numbers; {hook.name} is {x.shape[-1]} wide.",
                )
            d = unit.to(x.device, x.dtype)
            along = x @ d  # [...]
            return x + (_changed(along, mode, value) - along)[..., None] * d

        return self.hook_name, steer


@torch.no_grad()
def greedy(
    model: Any,
    tokens: Int[Tensor, "1 pos"],
    hooks: Sequence[tuple[str, Callable[..., Tensor]]],
    n_new: int,
) -> tuple[Float[Tensor, " d_vocab"], list[int]]:
    """The last position's logits on ``tokens`` with ``hooks``, and ``n_new`` greedy tokens
    (each chosen with the hooks on, applied to every position of the grown sequence)."""
    first_logits, new = None, []
    for _ in range(max(n_new, 1)):
        logits = model.run_with_hooks(tokens, fwd_hooks=list(hooks))[0, -1].float().cpu()
        if first_logits is None:
            first_logits = logits
        next_id = int(logits.argmax())
        new.append(next_id)
        grown = torch.tensor([[next_id]], device=tokens.device, dtype=tokens.dtype)
        tokens = torch.cat([tokens, grown], dim=1)[:, -model.cfg.n_ctx :]
    return first_logits, new[:n_new]
