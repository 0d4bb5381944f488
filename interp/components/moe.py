"""The mixture-of-experts MLP: a router picks ``experts_per_token`` of ``num_experts`` gated
experts for each token, and the token's output is their outputs weighted by the router.

Routing follows Hugging Face's routers (Mixtral, Qwen2-MoE, Qwen3-MoE, OLMoE): softmax over
the router logits in float32, the top ``experts_per_token`` probabilities, renormalised to
sum to 1 when ``cfg.norm_topk_prob``; the weights scale each expert's output in float32
(``cfg.expert_weights_in_float32``, Mixtral) or in the model's dtype (the others). Qwen2-MoE
adds a shared expert every token goes through, scaled by ``sigmoid(x @ W_shared_expert_gate)``.

The experts run on their own tokens only: one sort groups the routed copies of the tokens by
expert, each expert runs once on its group, and each token's weighted outputs are summed in
one reduction, as Hugging Face's grouped experts do (no loop over tokens; no expert sees a
token not routed to it).

Hook points, with TransformerLens 2.18's names (its ``MoE`` flattens batch and position;
here the router's hooks keep them apart):

- ``hook_router_logits`` [batch, pos, num_experts]: ``x @ W_gate``, in the model's dtype
  (Hugging Face's ``router_logits``);
- ``hook_expert_weights`` [batch, pos, num_experts]: their softmax, in float32, from which
  the top experts are chosen (a hook that edits it changes the routing, as in
  TransformerLens);
- ``hook_expert_indices`` [batch, pos, experts_per_token]: the chosen experts, the most
  probable first (a hook may replace them; the weights are then those experts' probabilities);
- ``experts.{e}.hook_gate`` / ``hook_pre`` / ``hook_post`` [n_routed, d_mlp]: expert ``e``'s
  ``x @ W_gate``, ``x @ W_in`` and ``act(gate) * pre`` on the tokens routed to it, as
  TransformerLens's: the rows are flattened ``batch * pos`` token indices, first the tokens
  whose top choice is ``e`` in token order, then those whose second choice it is, and so on
  (``MoE.routed_tokens`` gives them). An expert no token chose sees [0, d_mlp].
- with a shared expert: ``shared_expert.hook_gate`` / ``hook_pre`` / ``hook_post``
  [batch, pos, d_mlp_shared_expert] and ``hook_shared_expert_gate`` [batch, pos, 1], the
  sigmoid that scales it.

Example:
    >>> cfg = HookedTransformerConfig(n_layers=1, d_model=16, n_ctx=8, d_head=4, d_mlp=32,
    ...     act_fn="silu", gated_mlp=True, num_experts=8, experts_per_token=2)
    >>> moe = MoE(cfg)
    >>> for weight in moe.parameters():   # created empty; a model initialises or loads them
    ...     _ = torch.nn.init.normal_(weight, std=0.1)
    >>> moe(torch.randn(2, 5, 16)).shape     # [batch, pos, d_model]
    torch.Size([2, 5, 16])
"""

from __future__ import annotations

import torch
from jaxtyping import Float, Int
from torch import Tensor, nn

from interp.components.activations import ACTIVATIONS
from interp.config import HookedTransformerConfig
from interp.hooks import HookPoint


class Expert(nn.Module):
    """One gated expert: ``(act(x @ W_gate) * (x @ W_in)) @ W_out``, no biases (TransformerLens's
    ``MoEGatedMLP``). ``hook_gate`` is ``x @ W_gate``, ``hook_pre`` ``x @ W_in`` and
    ``hook_post`` ``act(gate) * pre``; their shape is the input's with d_mlp last."""

    def __init__(self, cfg: HookedTransformerConfig, d_mlp: int) -> None:
        super().__init__()
        self.W_gate = nn.Parameter(torch.empty(cfg.d_model, d_mlp, dtype=cfg.dtype))
        self.W_in = nn.Parameter(torch.empty(cfg.d_model, d_mlp, dtype=cfg.dtype))
        self.W_out = nn.Parameter(torch.empty(d_mlp, cfg.d_model, dtype=cfg.dtype))
        self.act_fn = ACTIVATIONS[cfg.act_fn]
        self.hook_gate = HookPoint()  # [*tokens, d_mlp]
        self.hook_pre = HookPoint()  # [*tokens, d_mlp]
        self.hook_post = HookPoint()  # [*tokens, d_mlp]

    def forward(self, x: Float[Tensor, "*tokens d_model"]) -> Float[Tensor, "*tokens d_model"]:
        gate = self.hook_gate(torch.matmul(x, self.W_gate))
        pre = self.hook_pre(torch.matmul(x, self.W_in))
        post = self.hook_post(self.act_fn(gate) * pre)
        return torch.matmul(post, self.W_out)


class MoE(nn.Module):
    """The mixture-of-experts MLP (see the module docstring): router ``W_gate``
    [d_model, num_experts], ``experts`` (each an ``Expert`` of ``cfg.d_mlp``) and, with
    ``cfg.d_mlp_shared_expert``, ``shared_expert`` and ``W_shared_expert_gate`` [d_model, 1].

    Example:
        >>> cfg = HookedTransformerConfig(n_layers=1, d_model=16, n_ctx=8, d_head=4, d_mlp=32,
        ...     act_fn="silu", gated_mlp=True, num_experts=8, experts_per_token=2)
        >>> moe = MoE(cfg)
        >>> _ = torch.nn.init.normal_(moe.W_gate, std=0.1)   # the router's weight
        >>> indices, weights = moe.route(torch.randn(2, 5, 16))
        >>> indices.shape, weights.shape   # [batch, pos, experts_per_token] each
        (torch.Size([2, 5, 2]), torch.Size([2, 5, 2]))
        >>> torch.allclose(weights.sum(-1), torch.ones(2, 5))   # cfg.norm_topk_prob
        True
    """

    def __init__(self, cfg: HookedTransformerConfig | dict) -> None:
        super().__init__()
        cfg = HookedTransformerConfig.unwrap(cfg)
        self.cfg = cfg
        self.W_gate = nn.Parameter(torch.empty(cfg.d_model, cfg.num_experts, dtype=cfg.dtype))
        self.experts = nn.ModuleList(Expert(cfg, cfg.d_mlp) for _ in range(cfg.num_experts))
        self.hook_router_logits = HookPoint()  # [batch, pos, num_experts]
        self.hook_expert_weights = HookPoint()  # [batch, pos, num_experts], float32
        self.hook_expert_indices = HookPoint()  # [batch, pos, experts_per_token]
        if cfg.d_mlp_shared_expert is not None:
            self.shared_expert = Expert(cfg, cfg.d_mlp_shared_expert)
            self.W_shared_expert_gate = nn.Parameter(torch.empty(cfg.d_model, 1, dtype=cfg.dtype))
            self.hook_shared_expert_gate = HookPoint()  # [batch, pos, 1]

    def input_weights(self) -> list[nn.Parameter]:
        """Every weight that reads the MLP's input, each [d_model, n] (the router, each
        expert's W_gate and W_in, the shared expert's and its gate): what a pre-norm folds
        into."""
        experts = [*self.experts, *([self.shared_expert] if self.cfg.d_mlp_shared_expert else [])]
        weights = [self.W_gate] + [w for expert in experts for w in (expert.W_gate, expert.W_in)]
        if self.cfg.d_mlp_shared_expert is not None:
            weights.append(self.W_shared_expert_gate)
        return weights

    def output_weights(self) -> list[nn.Parameter]:
        """Every weight that writes the MLP's output, each [d_mlp, d_model]: the experts'
        W_out (and the shared expert's)."""
        experts = [*self.experts, *([self.shared_expert] if self.cfg.d_mlp_shared_expert else [])]
        return [expert.W_out for expert in experts]

    def route(
        self, x: Float[Tensor, "batch pos d_model"]
    ) -> tuple[Int[Tensor, "batch pos k"], Float[Tensor, "batch pos k"]]:
        """The experts each token goes to (the most probable first) and their weights: the
        float32 softmax of the router logits at those experts, renormalised to sum to 1 when
        ``cfg.norm_topk_prob``, in float32 with ``cfg.expert_weights_in_float32`` and in
        the model's dtype otherwise (as each family's Hugging Face router rounds them)."""
        logits = self.hook_router_logits(torch.matmul(x, self.W_gate))
        probs = self.hook_expert_weights(torch.softmax(logits, dim=-1, dtype=torch.float32))
        indices = self.hook_expert_indices(probs.topk(self.cfg.experts_per_token, dim=-1)[1])
        if self.hook_expert_indices.has_hooks:  # a hook's experts must exist (checked only
            self._check_experts(indices)  # when hooked: reading the values waits for them)
        weights = probs.gather(-1, indices)
        if self.cfg.norm_topk_prob:
            weights = weights / weights.sum(dim=-1, keepdim=True)
        if not self.cfg.expert_weights_in_float32:
            weights = weights.to(x.dtype)
        return indices, weights

    def _check_experts(self, indices: Int[Tensor, "batch pos k"]) -> None:
        low, high = indices.min().item(), indices.max().item()
        if low < 0 or high >= self.cfg.num_experts:
            raise ValueError(
                f"hook_expert_indices holds expert {low if low < 0 else high}, but this MoE has "
                f"num_experts={self.cfg.num_experts} (experts 0 to {self.cfg.num_experts - 1})."
            )

    def routed_tokens(
        self, indices: Int[Tensor, "n_tokens k"]
    ) -> tuple[Int[Tensor, " n_routed"], Int[Tensor, " n_routed"], list[int]]:
        """The routed copies of the tokens grouped by expert: each copy's token (its flattened
        ``batch * pos`` index) and slot (0: the token's top choice), and how many copies each
        expert has. Within an expert the copies are in slot, then token order, which is the
        row order of its hooks."""
        n_tokens = indices.shape[0]
        chosen = indices.t().reshape(-1)  # [k * n_tokens]: slot-major, as TransformerLens's
        order = torch.argsort(chosen, stable=True)
        counts = torch.bincount(chosen, minlength=self.cfg.num_experts).tolist()
        return order % n_tokens, order // n_tokens, counts

    def forward(self, x: Float[Tensor, "batch pos d_model"]) -> Float[Tensor, "batch pos d_model"]:
        indices, weights = self.route(x)
        out = self.routed_output(x, indices, weights)
        if self.cfg.d_mlp_shared_expert is not None:
            gate = torch.sigmoid(torch.matmul(x, self.W_shared_expert_gate))
            out = out + self.hook_shared_expert_gate(gate) * self.shared_expert(x)
        return out

    def routed_output(
        self,
        x: Float[Tensor, "batch pos d_model"],
        indices: Int[Tensor, "batch pos k"],
        weights: Float[Tensor, "batch pos k"],
    ) -> Float[Tensor, "batch pos d_model"]:
        """The routed experts' outputs on ``x``, each token's weighted by ``weights``."""
        flat = x.reshape(-1, x.shape[-1])
        tokens, slots, counts = self.routed_tokens(indices.reshape(flat.shape[0], -1))
        groups = flat.index_select(0, tokens).split(counts)
        outputs = torch.cat(
            [expert(group) for expert, group in zip(self.experts, groups, strict=True)]
        )
        weighted = outputs * weights.reshape(flat.shape[0], -1)[tokens, slots, None]
        # Each token's k weighted outputs summed in one reduction (float32 inside, rounded
        # once), in slot order, as Hugging Face's grouped experts sum them.
        per_slot = weighted.new_empty(flat.shape[0], indices.shape[-1], flat.shape[-1])
        per_slot[tokens, slots] = weighted
        return per_slot.sum(dim=1).to(x.dtype).view(x.shape)
