"""Activation, path and attribution patching, batched, with TransformerLens's names.

Example:
    >>> corrupted_tokens = tokens.clone()   # BOS, 10 random tokens, the same 10 again
    >>> corrupted_tokens[0, 10] = 7         # the first copy's last token, 211, becomes 7
    >>> clean_logits, clean_cache = model.run_with_cache(tokens)
    >>> metric = interp.patching.normalized_logit_diff(   # 211 vs 7 after the repeat's 9
    ...     torch.tensor([211, 7]), clean_logits, model(corrupted_tokens), position=-2)
    >>> result = interp.patching.get_act_patch_resid_pre(
    ...     model, corrupted_tokens, clean_cache, metric)
    >>> result.shape   # [n_layers, pos]: 1 where a patch restores the clean answer
    torch.Size([2, 21])
    >>> figure = result.plot()   # layer x position heatmap with token labels (plotly)
    >>> exact = interp.patching.get_act_patch_resid_pre(
    ...     model, corrupted_tokens, clean_cache, metric, exact=True)  # = TL's loop, to the bit
    >>> bool((exact - result).abs().max() < 1e-3)
    True
"""

from interp.patching.activation import (
    BLOCK_PATCH_TYPES,
    HEAD_PATCH_TYPES,
    generic_activation_patch,
    get_act_patch_attn_head_all_pos_every,
    get_act_patch_attn_head_by_pos_every,
    get_act_patch_attn_head_k_all_pos,
    get_act_patch_attn_head_k_by_pos,
    get_act_patch_attn_head_out_all_pos,
    get_act_patch_attn_head_out_by_pos,
    get_act_patch_attn_head_pattern_all_pos,
    get_act_patch_attn_head_pattern_by_pos,
    get_act_patch_attn_head_pattern_dest_src_pos,
    get_act_patch_attn_head_q_all_pos,
    get_act_patch_attn_head_q_by_pos,
    get_act_patch_attn_head_v_all_pos,
    get_act_patch_attn_head_v_by_pos,
    get_act_patch_attn_out,
    get_act_patch_block_every,
    get_act_patch_mlp_out,
    get_act_patch_resid_mid,
    get_act_patch_resid_post,
    get_act_patch_resid_pre,
    layer_head_dest_src_pos_pattern_patch_setter,
    layer_head_pattern_patch_setter,
    layer_head_pos_pattern_patch_setter,
    layer_head_vector_patch_setter,
    layer_pos_head_vector_patch_setter,
    layer_pos_patch_setter,
)
from interp.patching.attribution import (
    ATTRIBUTION_KINDS,
    attribution_patch,
    get_attr_patch_attn_head_all_pos_every,
    get_attr_patch_attn_head_by_pos_every,
    get_attr_patch_attn_head_k_all_pos,
    get_attr_patch_attn_head_k_by_pos,
    get_attr_patch_attn_head_out_all_pos,
    get_attr_patch_attn_head_out_by_pos,
    get_attr_patch_attn_head_pattern_all_pos,
    get_attr_patch_attn_head_pattern_by_pos,
    get_attr_patch_attn_head_q_all_pos,
    get_attr_patch_attn_head_q_by_pos,
    get_attr_patch_attn_head_v_all_pos,
    get_attr_patch_attn_head_v_by_pos,
    get_attr_patch_attn_out,
    get_attr_patch_block_every,
    get_attr_patch_mlp_out,
    get_attr_patch_resid_mid,
    get_attr_patch_resid_post,
    get_attr_patch_resid_pre,
)
from interp.patching.metrics import (
    AnswerProbability,
    FunctionMetric,
    KLDivergence,
    LogitDiff,
    NormalizedMetric,
    PatchingMetric,
    normalized_logit_diff,
)
from interp.patching.path import (
    get_path_patch_head_to_final_resid_post,
    get_path_patch_head_to_heads,
    path_patch,
    path_patch_runs,
)
from interp.patching.results import LabelledTensor

__all__ = [
    "ATTRIBUTION_KINDS",
    "AnswerProbability",
    "BLOCK_PATCH_TYPES",
    "FunctionMetric",
    "HEAD_PATCH_TYPES",
    "KLDivergence",
    "LabelledTensor",
    "LogitDiff",
    "NormalizedMetric",
    "PatchingMetric",
    "attribution_patch",
    "generic_activation_patch",
    "get_act_patch_attn_head_all_pos_every",
    "get_act_patch_attn_head_by_pos_every",
    "get_act_patch_attn_head_k_all_pos",
    "get_act_patch_attn_head_k_by_pos",
    "get_act_patch_attn_head_out_all_pos",
    "get_act_patch_attn_head_out_by_pos",
    "get_act_patch_attn_head_pattern_all_pos",
    "get_act_patch_attn_head_pattern_by_pos",
    "get_act_patch_attn_head_pattern_dest_src_pos",
    "get_act_patch_attn_head_q_all_pos",
    "get_act_patch_attn_head_q_by_pos",
    "get_act_patch_attn_head_v_all_pos",
    "get_act_patch_attn_head_v_by_pos",
    "get_act_patch_attn_out",
    "get_act_patch_block_every",
    "get_act_patch_mlp_out",
    "get_act_patch_resid_mid",
    "get_act_patch_resid_post",
    "get_act_patch_resid_pre",
    "get_attr_patch_attn_head_all_pos_every",
    "get_attr_patch_attn_head_by_pos_every",
    "get_attr_patch_attn_head_k_all_pos",
    "get_attr_patch_attn_head_k_by_pos",
    "get_attr_patch_attn_head_out_all_pos",
    "get_attr_patch_attn_head_out_by_pos",
    "get_attr_patch_attn_head_pattern_all_pos",
    "get_attr_patch_attn_head_pattern_by_pos",
    "get_attr_patch_attn_head_q_all_pos",
    "get_attr_patch_attn_head_q_by_pos",
    "get_attr_patch_attn_head_v_all_pos",
    "get_attr_patch_attn_head_v_by_pos",
    "get_attr_patch_attn_out",
    "get_attr_patch_block_every",
    "get_attr_patch_mlp_out",
    "get_attr_patch_resid_mid",
    "get_attr_patch_resid_post",
    "get_attr_patch_resid_pre",
    "get_path_patch_head_to_final_resid_post",
    "get_path_patch_head_to_heads",
    "layer_head_dest_src_pos_pattern_patch_setter",
    "layer_head_pattern_patch_setter",
    "layer_head_pos_pattern_patch_setter",
    "layer_head_vector_patch_setter",
    "layer_pos_head_vector_patch_setter",
    "layer_pos_patch_setter",
    "normalized_logit_diff",
    "path_patch",
    "path_patch_runs",
]
