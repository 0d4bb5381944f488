"""The sharded attention, MLP and mixture of experts: each rank computes its heads' or
neurons' share of a block, and one all-reduce after the attention and one after the MLP
sum the shares into the residual stream, which every rank holds whole.

Each is the one-process module (``Attention``, ``MLP``, ``MoE``) built with this rank's
head and neuron counts (``ShardPlan.local_config``); what changes is the input (marked
``copy_to_shards``, so gradients from every rank's share are summed) and the output (the
shares all-reduced, the bias added once). ``install_tensor_parallel`` swaps them into a
model and makes its hook points distributed (``interp.distributed.hooks``).
"""

from __future__ import annotations

from typing import Any

import torch
from jaxtyping import Float
from torch import Tensor, nn

from interp.components.attention import Attention, alibi_slopes
from interp.components.mlp import MLP
from interp.components.moe import MoE
from interp.config import HookedTransformerConfig
from interp.distributed.collectives import copy_to_shards, reduce_from_shards
from interp.distributed.hooks import distributed_hook_point, replace_hook_points
from interp.distributed.inputs import check_same_inputs
from interp.distributed.plan import ShardPlan
from interp.distributed.process_group import TPGroup
from interp.hooks import HookPoint

# The config fields whose value is this rank's share; every other field is the model's own
# (read live, so flags the model switches, such as use_attn_result, reach the shard too).
_LOCAL_FIELDS = ("n_heads", "n_key_value_heads", "d_mlp", "d_mlp_shared_expert")


class ShardConfig:
    """The model's config as a shard reads it: this rank's counts (``_LOCAL_FIELDS``) from
    ``local``, everything else from the model's ``cfg`` at the time it is read."""

    def __init__(self, cfg: HookedTransformerConfig, local: HookedTransformerConfig) -> None:
        self._cfg, self._local = cfg, local

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):  # not set yet (a copy being made): no config field is private
            raise AttributeError(name)
        return getattr(self._local if name in _LOCAL_FIELDS else self._cfg, name)


class TPAttention(Attention):
    """This rank's heads of layer ``layer_id``'s attention (see the module docstring)."""

    def __init__(
        self, cfg: HookedTransformerConfig, plan: ShardPlan, tp: TPGroup, layer_id: int
    ) -> None:
        local = plan.local_config()
        super().__init__(local, layer_id=layer_id)
        self.cfg = ShardConfig(cfg, local)
        self.tp = tp
        heads, kv_heads = plan.heads, plan.kv_heads
        self.tp_layouts = {
            "hook_q": heads(2),  # [batch, pos, n_heads, d_head]
            "hook_rot_q": heads(2),
            "hook_k": kv_heads(2),  # [batch, pos, n_key_value_heads, d_head]
            "hook_rot_k": kv_heads(2),
            "hook_v": kv_heads(2),
            "hook_attn_scores": heads(1),  # [batch, n_heads, query_pos, key_pos]
            "hook_pattern": heads(1),
            "hook_z": heads(2),
            "hook_result": heads(2),  # [batch, pos, n_heads, d_model]
        }
        if cfg.use_qk_norm:  # per head (norms across heads are refused by check_tp_size)
            norm_hooks = ("hook_scale", "hook_normalized")  # [batch, pos, heads, 1 or d_head]
            self.q_norm.tp_layouts = dict.fromkeys(norm_hooks, heads(2))
            self.k_norm.tp_layouts = dict.fromkeys(norm_hooks, kv_heads(2))
        if self.alibi_slopes is not None:  # this rank's heads' slopes
            start = heads(2).starts[tp.rank]
            self.alibi_slopes = alibi_slopes(cfg.n_heads)[start : start + local.n_heads]

    def add_module(self, name: str, module: nn.Module | None) -> None:
        """Opt-in hook points the block adds later (``hook_result``) are distributed too."""
        if type(module) is HookPoint:
            module = distributed_hook_point(module, self.tp, self.tp_layouts.get(name))
        super().add_module(name, module)

    def forward(
        self, query_input: Tensor, key_input: Tensor, value_input: Tensor, *args, **kwargs
    ) -> Float[Tensor, "batch query_pos d_model"]:
        copies: dict[int, Tensor] = {}  # q, k and v often read one tensor: marked once

        def marked(x: Tensor) -> Tensor:
            if id(x) not in copies:
                copies[id(x)] = copy_to_shards(x, self.tp)
            return copies[id(x)]

        return super().forward(
            marked(query_input), marked(key_input), marked(value_input), *args, **kwargs
        )

    def output(
        self, z: Float[Tensor, "batch query_pos n_heads d_head"]
    ) -> Float[Tensor, "batch query_pos d_model"]:
        """This rank's heads' share of ``z @ W_O``, summed over the ranks, plus ``b_O``."""
        if self.cfg.use_attn_result:
            partial = self.hook_result(torch.einsum("bqhd,hdm->bqhm", z, self.W_O)).sum(dim=2)
        else:
            h, d, m = self.W_O.shape
            partial = torch.matmul(z.reshape(*z.shape[:2], h * d), self.W_O.reshape(h * d, m))
        return reduce_from_shards(partial, self.tp) + self.b_O


class TPMLP(MLP):
    """This rank's neurons of an MLP (see the module docstring)."""

    def __init__(self, cfg: HookedTransformerConfig, plan: ShardPlan, tp: TPGroup) -> None:
        super().__init__(plan.local_config())
        self.tp = tp
        neurons = plan.neurons(cfg.d_mlp)  # [batch, pos, d_mlp]
        names = ("hook_pre", "hook_pre_linear", "hook_mid", "hook_post")
        self.tp_layouts = dict.fromkeys(names, neurons)

    def forward(self, x: Float[Tensor, "batch pos d_model"]) -> Float[Tensor, "batch pos d_model"]:
        return super().forward(copy_to_shards(x, self.tp))

    def output(self, post: Float[Tensor, "batch pos d_mlp"]) -> Float[Tensor, "batch pos d_model"]:
        """This rank's neurons' share of ``post @ W_out``, summed over the ranks, plus
        ``b_out``."""
        return reduce_from_shards(torch.matmul(post, self.W_out), self.tp) + self.b_out


class TPMoE(MoE):
    """A mixture of experts whose every expert holds this rank's share of its neurons: the
    router (whole on every rank) routes as in one process, each rank runs every expert on
    its tokens with its neurons, and the outputs are summed over the ranks once."""

    def __init__(self, cfg: HookedTransformerConfig, plan: ShardPlan, tp: TPGroup) -> None:
        local = plan.local_config()
        super().__init__(local)
        self.cfg = ShardConfig(cfg, local)
        self.tp = tp
        names = ("hook_gate", "hook_pre", "hook_post")  # [n_routed or batch pos, d_mlp]
        for expert in self.experts:
            expert.tp_layouts = dict.fromkeys(names, plan.neurons(cfg.d_mlp))
        if cfg.d_mlp_shared_expert is not None:
            layout = plan.neurons(cfg.d_mlp_shared_expert)
            self.shared_expert.tp_layouts = dict.fromkeys(names, layout)

    def forward(self, x: Float[Tensor, "batch pos d_model"]) -> Float[Tensor, "batch pos d_model"]:
        # The router reads x whole (its gradient is whole on every rank); the weights it
        # gives scale this rank's share of the experts' outputs, so their gradient is a
        # share too, summed over the ranks by copy_to_shards.
        indices, weights = self.route(x)
        x_shared = copy_to_shards(x, self.tp)
        out = self.routed_output(x_shared, indices, copy_to_shards(weights, self.tp))
        if self.cfg.d_mlp_shared_expert is not None:
            gate = torch.sigmoid(torch.matmul(x, self.W_shared_expert_gate))
            gate = copy_to_shards(self.hook_shared_expert_gate(gate), self.tp)
            out = out + gate * self.shared_expert(x_shared)
        return reduce_from_shards(out, self.tp)


def install_tensor_parallel(model: nn.Module, plan: ShardPlan, tp: TPGroup) -> None:
    """Swap every block's attention and MLP of ``model`` (built whole, on the meta device)
    for this rank's shards, make its hook points distributed, and check on every forward
    that every rank was given the same input."""
    cfg = model.cfg
    with torch.device("meta"):
        for index, block in enumerate(model.blocks):
            block.attn = TPAttention(cfg, plan, tp, index)
            if not cfg.attn_only:
                block.mlp = TPMoE(cfg, plan, tp) if cfg.num_experts else TPMLP(cfg, plan, tp)
            block.sync_opt_in_hooks()  # the opt-in hook points on the new attention
    replace_hook_points(model, tp)
    model.setup()
    model.tp = tp
    model.register_forward_pre_hook(check_same_inputs, with_kwargs=True)
