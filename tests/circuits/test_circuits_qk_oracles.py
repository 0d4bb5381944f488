"""QK pairs against float64 computations written here, independently of
``interp.circuits.attention``: the score's change when a term is added to the residual
stream (the model's own attention code: norms, rotary, GQA, QK-norm, ALiBi, soft caps,
with the norm scales frozen), and queries and keys rebuilt by hand from the weights."""

from __future__ import annotations

import math

import pytest
import torch

from interp.circuits import attribute, qk_attribution
from interp.circuits.attention import FrozenRun
from tests.circuits.attention_support import family_replacement
from tests.circuits.test_circuits_backward import FAMILY_CHECKPOINTS

# ALiBi, sandwich norms with soft caps, QK-norm across heads with post-norms, per-head
# QK-norm, GQA with b_Q/b_K.
QK_FAMILIES = [
    "bloom-alibi-6-heads", "gemma2-soft-caps-bite-window-4", "olmo2-gqa2-post-norms",
    "qwen3-qk-norm-head-dim-32", "qwen2-gqa2-biases-tied",
]  # fmt: skip
TOKENS = torch.arange(1, 11)
F64_RTOL = 1e-9  # float64 sums of a few thousand products: far below this of their size


def _graph(replacement):
    tokens = TOKENS % replacement.cfg.d_vocab
    return attribute(tokens, replacement, batch_size=32)


def _score_change(replacement, tokens, layer, head, q, k, at, vector) -> float:
    """The score's change (before the cap) when ``vector`` is added to ``resid_pre`` of
    ``layer`` at position ``at``, every norm scale frozen at its clean value."""
    scales, scores = {}, []
    names = [n for n in replacement.model.hook_dict if n.endswith("hook_scale")]

    def keep(value, hook):
        scales[hook.name] = value.detach().clone()

    def freeze(value, hook):
        return scales[hook.name]

    def add(value, hook):
        value = value.clone()
        value[0, at] += vector
        return value

    def read(value, hook):
        scores.append(value[0, head, q, k].item())

    score_hook = (f"blocks.{layer}.attn.hook_attn_scores", read)
    with torch.no_grad():
        replacement.model.run_with_hooks(
            tokens[None], fwd_hooks=[*((n, keep) for n in names), score_hook]
        )
        hooks = [*((n, freeze) for n in names), (f"blocks.{layer}.hook_resid_pre", add), score_hook]
        replacement.model.run_with_hooks(tokens[None], fwd_hooks=hooks)
    cap = replacement.cfg.attn_scores_soft_cap
    if cap > 0:
        scores = [cap * math.atanh(s / cap) for s in scores]
    return scores[1] - scores[0]


@pytest.mark.parametrize("case", QK_FAMILIES)
def test_qk_pairs_equal_the_score_change_of_adding_a_term(case, tmp_path) -> None:
    """A token's embedding added at the key (query) position changes the score by its
    column (row) of pairs: the model's own attention code, with its norms frozen."""
    replacement = family_replacement(FAMILY_CHECKPOINTS[case], tmp_path, torch.float64)
    graph = _graph(replacement)
    run = FrozenRun(replacement, graph)
    cfg = replacement.cfg
    token_node = len(graph.selected_features) + cfg.n_layers * run.n_pos
    embed = replacement.model.embed(graph.input_tokens[None])[0].detach()
    layer, q = cfg.n_layers - 1, run.n_pos - 1
    for head in range(cfg.n_heads):
        k = q - 1
        qk = qk_attribution(replacement, graph, layer, head, q, k, frozen_run=run)
        column = qk.pairs[:, qk.key_nodes.index(token_node + k)].sum()
        row = qk.pairs[qk.query_nodes.index(token_node + q)].sum()
        scale = qk.pairs.abs().sum()
        by_key = _score_change(replacement, graph.input_tokens, layer, head, q, k, k, embed[k])
        by_query = _score_change(replacement, graph.input_tokens, layer, head, q, k, q, embed[q])
        assert float(column) == pytest.approx(by_key, abs=F64_RTOL * scale)
        assert float(row) == pytest.approx(by_query, abs=F64_RTOL * scale)
        assert abs(qk.remainder) <= F64_RTOL * scale


def _rotate_half(x, cos, sin, rotary_dim):
    """Hugging Face's rotary embedding (rotate_half) of the first rotary_dim dims."""
    rot, rest = x[..., :rotary_dim], x[..., rotary_dim:]
    half = rotary_dim // 2
    partner = torch.cat([-rot[..., half:], rot[..., :half]], dim=-1)
    return torch.cat([rot * cos + partner * sin, rest], dim=-1)


def test_qk_pairs_equal_queries_and_keys_rebuilt_by_hand(tmp_path) -> None:
    """Qwen2 (RMSNorm, rotary, GQA, b_Q/b_K): the token x token, token x b_K and b_Q x b_K
    pairs from W_E, the norm weight and scale, W_Q/W_K and cos/sin computed here."""
    replacement = family_replacement(
        FAMILY_CHECKPOINTS["qwen2-gqa2-biases-tied"], tmp_path, torch.float64
    )
    graph = _graph(replacement)
    run = FrozenRun(replacement, graph)
    cfg, model = replacement.cfg, replacement.model
    layer, head, q, k = 1, 3, 9, 4
    qk = qk_attribution(replacement, graph, layer, head, q, k, frozen_run=run)
    scale = {}

    def keep(value, hook):
        scale["s"] = value[0, :, 0].clone()

    with torch.no_grad():
        hooks = [(f"blocks.{layer}.ln1.hook_scale", keep)]
        model.run_with_hooks(graph.input_tokens[None], fwd_hooks=hooks)
    attn, weight = model.blocks[layer].attn, model.blocks[layer].ln1.w.detach()
    kv_head = head // (cfg.n_heads // cfg.n_key_value_heads)
    rotary_dim = cfg.rotary_dim
    # Hugging Face's default rotary frequencies and angles, in float32 as it computes them
    exponents = torch.arange(0, rotary_dim, 2, dtype=torch.int64).float() / rotary_dim
    inv_freq = 1.0 / (cfg.rotary_base**exponents)

    def cos_sin(pos):
        angles = torch.tensor(float(pos)) * inv_freq
        angles = torch.cat([angles, angles])
        return angles.cos().double(), angles.sin().double()

    def query(vector):
        return _rotate_half(vector, *cos_sin(q), rotary_dim)

    def key(vector):
        return _rotate_half(vector, *cos_sin(k), rotary_dim)

    W_E = model.W_E.detach()
    x_q = W_E[graph.input_tokens[q]] / scale["s"][q] * weight
    x_k = W_E[graph.input_tokens[k]] / scale["s"][k] * weight
    q_token = query(x_q @ attn.W_Q[head].detach())
    k_token = key(x_k @ attn.W_K[head].detach())
    q_bias, k_bias = query(attn.b_Q[head].detach()), key(attn.b_K[head].detach())
    token_node = len(graph.selected_features) + cfg.n_layers * run.n_pos
    i_token, j_token = qk.query_nodes.index(token_node + q), qk.key_nodes.index(token_node + k)
    i_bias, j_bias = qk.query_nodes.index("b_Q"), qk.key_nodes.index("b_K")
    expected = {
        (i_token, j_token): q_token @ k_token,
        (i_token, j_bias): q_token @ k_bias,
        (i_bias, j_bias): q_bias @ k_bias,
    }
    assert kv_head != head  # GQA: key head 3 // 2
    # cos and sin are float32 (as Hugging Face's and interp's): an ulp of them, 6e-8
    tolerance = 1e-6 * float(qk.pairs.abs().sum())
    for (i, j), value in expected.items():
        assert float(qk.pairs[i, j]) == pytest.approx(float(value) / cfg.attn_scale, abs=tolerance)
