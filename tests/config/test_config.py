"""HookedTransformerConfig takes TransformerLens 2.x's fields and semantics; a value the model
cannot honour is an error naming the field, never silently ignored."""

from __future__ import annotations

import math

import pytest
import torch

from interp import HookedTransformer, HookedTransformerConfig, get_tokenizer

BASE = dict(n_layers=2, d_model=64, n_ctx=32, n_heads=4, d_vocab=100)

# TransformerLens 2.x's HookedTransformerConfig fields at their TL defaults (from its source).
TL_DEFAULTS = dict(
    model_name="custom",
    eps=1e-5,
    use_attn_result=False,
    use_attn_scale=True,
    attn_scale=-1.0,
    use_split_qkv_input=False,
    use_hook_mlp_in=False,
    use_attn_in=False,
    use_local_attn=False,
    ungroup_grouped_query_attention=False,
    original_architecture=None,
    from_checkpoint=False,
    checkpoint_index=None,
    checkpoint_label_type=None,
    checkpoint_value=None,
    tokenizer_name=None,
    window_size=None,
    attn_types=None,
    init_mode="gpt2",
    normalization_type="LN",
    device=None,
    n_devices=1,
    attention_dir="causal",
    attn_only=False,
    seed=None,
    initializer_range=-1.0,
    init_weights=True,
    scale_attn_by_inverse_layer_idx=False,
    positional_embedding_type="standard",
    final_rms=False,
    d_vocab_out=-1,
    parallel_attn_mlp=False,
    rotary_dim=None,
    n_params=None,
    use_hook_tokens=False,
    gated_mlp=False,
    default_prepend_bos=True,
    dtype=torch.float32,
    tokenizer_prepends_bos=None,
    n_key_value_heads=None,
    post_embedding_ln=False,
    rotary_base=10000,
    trust_remote_code=False,
    rotary_adjacent_pairs=False,
    load_in_4bit=False,
    num_experts=None,
    experts_per_token=None,
    relative_attention_max_distance=None,
    relative_attention_num_buckets=None,
    decoder_start_token_id=None,
    tie_word_embeddings=False,
    use_normalization_before_and_after=False,
    attn_scores_soft_cap=-1.0,
    output_logits_soft_cap=-1.0,
    use_NTK_by_parts_rope=False,
    NTK_by_parts_low_freq_factor=1.0,
    NTK_by_parts_high_freq_factor=4.0,
    NTK_by_parts_factor=8.0,
    NTK_original_ctx_len=8192,
    use_qk_norm=False,
    use_yarn_rope=False,
    rotary_base_local=None,
)


def test_every_transformer_lens_field_is_accepted_at_its_default():
    cfg = HookedTransformerConfig(
        n_layers=2, d_model=64, n_ctx=32, d_head=16, act_fn="gelu_new", d_vocab=100, **TL_DEFAULTS
    )
    assert cfg.n_heads == 4 and cfg.d_vocab_out == 100 and cfg.d_mlp == 256
    assert cfg.attn_scale == math.sqrt(16)
    assert cfg.n_params == 2 * (64 * 16 * 4 * 4) + 2 * 64 * 256 * 2  # TL's formula
    tokens = torch.randint(0, 100, (1, 8))
    assert HookedTransformer(cfg)(tokens).shape == (1, 8, 100)


def test_positional_order_matches_transformer_lens():
    cfg = HookedTransformerConfig(2, 64, 32, 16)  # n_layers, d_model, n_ctx, d_head
    assert (cfg.n_layers, cfg.d_model, cfg.n_ctx, cfg.d_head, cfg.n_heads) == (2, 64, 32, 16, 4)


def test_n_heads_derived_from_d_head_and_back():
    assert HookedTransformerConfig(**{**BASE, "n_heads": -1, "d_head": 8}).n_heads == 8
    assert HookedTransformerConfig(**BASE).d_head == 16
    with pytest.warns(UserWarning, match="d_model=64 is not divisible by d_head=24; n_heads is"):
        assert HookedTransformerConfig(**{**BASE, "n_heads": -1, "d_head": 24}).n_heads == 2
    with pytest.raises(ValueError, match=r"Give n_heads or d_head \(the other is derived"):
        HookedTransformerConfig(n_layers=1, d_model=64, n_ctx=8)


def test_d_vocab_minus_one_comes_from_the_tokenizer():
    cfg = HookedTransformerConfig(n_layers=1, d_model=32, n_ctx=16, d_head=8)
    assert cfg.d_vocab == -1 and cfg.d_vocab_out == -1
    model = HookedTransformer(cfg, tokenizer=get_tokenizer("gpt2"))
    assert model.cfg.d_vocab == model.cfg.d_vocab_out == 50257
    assert model.W_E.shape == (50257, 32) and model.W_U.shape == (32, 50257)
    named = HookedTransformer(
        dict(n_layers=1, d_model=32, n_ctx=16, d_head=8, tokenizer_name="gpt2")
    )
    assert named.cfg.d_vocab == 50257 and named.tokenizer is not None
    with pytest.raises(ValueError, match=r"d_vocab=-1 means 'take the vocabulary size from the"):
        HookedTransformer(HookedTransformerConfig(n_layers=1, d_model=32, n_ctx=16, d_head=8))


def test_unwrap_and_to_dict_as_transformer_lens():
    cfg = HookedTransformerConfig(**BASE)
    assert HookedTransformerConfig.unwrap(cfg) is cfg
    values = cfg.to_dict()
    assert values["dtype"] is torch.float32 and values["n_heads"] == 4
    assert set(TL_DEFAULTS) <= set(values)
    assert HookedTransformerConfig.unwrap(values) == cfg
    assert HookedTransformerConfig(**values) == cfg
    values["n_layers"] = 5  # a new dict, not the config's own state
    assert cfg.n_layers == 2


def test_initializer_range_is_init_range():
    assert HookedTransformerConfig(**BASE, initializer_range=0.3).init_range == 0.3
    assert HookedTransformerConfig(**BASE, init_range=0.1).initializer_range == 0.1
    with pytest.raises(ValueError, match="initializer_range=0.3 and init_range=0.1 disagree"):
        HookedTransformerConfig(**BASE, initializer_range=0.3, init_range=0.1)


@pytest.mark.parametrize(
    ("field", "value", "leave"),
    [
        ("final_rms", True, "False"),
        ("scale_attn_by_inverse_layer_idx", True, "False"),
        ("init_mode", "xavier_uniform", "'gpt2'"),
        ("relative_attention_num_buckets", 32, "None"),
        ("load_in_4bit", True, "False"),
    ],
)
def test_unsupported_values_name_the_field(field, value, leave):
    with pytest.raises(ValueError) as error:
        HookedTransformerConfig(**BASE, **{field: value})
    assert str(error.value).startswith(f"{field}={value!r} is not supported yet (interp's model")
    assert str(error.value).endswith(f"leave {field} at {leave}.")


def test_grouped_query_attention_and_attn_scale():
    assert HookedTransformerConfig(**BASE, n_key_value_heads=4).n_key_value_heads == 4
    assert HookedTransformerConfig(**BASE, n_key_value_heads=2).n_key_value_heads == 2
    assert HookedTransformerConfig(**BASE, attn_scale=3.0).attn_scale == 3.0
    assert HookedTransformerConfig(**BASE).attn_scale == 4.0  # sqrt(d_head)
    assert HookedTransformerConfig(**BASE, use_attn_scale=False).attn_scale == 1.0


def test_architecture_fields_are_honoured_and_resolved():
    rotary = HookedTransformerConfig(**BASE, positional_embedding_type="rotary")
    assert rotary.rotary_dim == 16  # d_head, as TransformerLens
    assert HookedTransformerConfig(**BASE, rotary_dim=4).rotary_dim == 4  # inert, kept
    decoupled = HookedTransformerConfig(**{**BASE, "d_head": 32})  # 4 heads of 32 on d_model 64
    assert (decoupled.n_heads, decoupled.d_head, decoupled.attn_scale) == (4, 32, math.sqrt(32))
    gated = HookedTransformerConfig(**BASE, gated_mlp=True, act_fn="silu", d_mlp=96)
    assert gated.n_params == 2 * 64 * 16 * 4 * 4 + 2 * 64 * 96 * 3  # TL's formula
    local = HookedTransformerConfig(
        **BASE, use_local_attn=True, window_size=8, attn_types=("local", "global")
    )
    assert local.attn_types == ["local", "global"]
    for norm in ("RMS", "RMSPre"):
        assert HookedTransformerConfig(**BASE, normalization_type=norm).normalization_type == norm
    values = HookedTransformerConfig(
        **BASE,
        positional_embedding_type="rotary",
        use_NTK_by_parts_rope=True,
        rotary_base=500000.0,
        use_qk_norm=True,
        attn_scores_soft_cap=50.0,
        output_logits_soft_cap=30.0,
        use_normalization_before_and_after=True,
        normalization_type="RMS",
        tie_word_embeddings=True,
        parallel_attn_mlp=True,
    ).to_dict()
    assert HookedTransformerConfig(**values).to_dict() == values


def _error(**changes) -> str:
    with pytest.raises(ValueError) as error:
        HookedTransformerConfig(**{**BASE, **changes})
    return str(error.value)


ROTARY = dict(positional_embedding_type="rotary")


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        (
            dict(n_key_value_heads=3),
            "n_heads=4 is not divisible by n_key_value_heads=3: each key/value head serves the "
            "same number of query heads; use n_key_value_heads in [1, 2, 4].",
        ),
        (dict(n_key_value_heads=0), "n_key_value_heads must be positive, got 0."),
        (
            dict(n_key_value_heads=2, ungroup_grouped_query_attention=True),
            "ungroup_grouped_query_attention=True is not supported yet",
        ),
        (
            dict(**ROTARY, rotary_dim=5),
            "rotary_dim=5 must be a positive even number at most d_head=16 (rotary turns pairs "
            "of dimensions); e.g. rotary_dim=16 (all of each head) or 4 (a quarter, as Pythia).",
        ),
        (dict(**ROTARY, rotary_dim=18), "rotary_dim=18 must be a positive even number at most"),
        (dict(**ROTARY, rotary_base=0), "rotary_base must be a positive number, got 0."),
        (
            dict(**ROTARY, use_NTK_by_parts_rope=True, rotary_scaling_factor=8.0),
            "use_NTK_by_parts_rope=True and rotary_scaling_factor=8.0 are two rope scalings; "
            "use one",
        ),
        (
            dict(**ROTARY, use_NTK_by_parts_rope=True, NTK_by_parts_high_freq_factor=1.0),
            "NTK_by_parts_high_freq_factor=1.0 must exceed NTK_by_parts_low_freq_factor=1.0",
        ),
        (
            dict(window_size=8),
            "window_size=8 and attn_types=None take effect only with use_local_attn=True (as in "
            "TransformerLens); set use_local_attn=True, or window_size=None",
        ),
        (
            dict(use_local_attn=True, window_size=8, attn_types=["global", "global"]),
            "window_size=8 applies to 'local' layers, but attn_types has none; mark the windowed "
            "layers 'local' in attn_types, or set use_local_attn=False and window_size=None.",
        ),
        (
            dict(use_local_attn=True, window_size=8),
            "use_local_attn=True needs window_size (how many positions a local layer sees) and "
            "attn_types",
        ),
        (
            dict(use_local_attn=True, window_size=8, attn_types=["local"]),
            "attn_types must list one of ('global', 'local') for each of the n_layers=2 layers, "
            "got ['local'].",
        ),
        (
            dict(use_local_attn=True, window_size=8, attn_types=["local", "sliding"]),
            "attn_types has unknown entries ['sliding']; each layer is one of ('global', 'local').",
        ),
        (
            dict(use_local_attn=True, window_size=0, attn_types=["local", "local"]),
            "window_size must be positive, got 0.",
        ),
        (
            dict(parallel_attn_mlp=True, attn_only=True),
            "parallel_attn_mlp=True runs the MLP beside the attention, but attn_only=True has no "
            "MLP; set parallel_attn_mlp=False or attn_only=False.",
        ),
        (
            dict(use_normalization_before_and_after=True, normalization_type=None),
            "use_normalization_before_and_after=True adds norms after attention and the MLP, but "
            "normalization_type=None has no norm",
        ),
        (
            dict(rmsnorm_uses_offset=True),
            "rmsnorm_uses_offset=True makes RMS norms scale by 1 + w, but normalization_type="
            "'LN' is a layer norm; set normalization_type='RMS' or rmsnorm_uses_offset=False.",
        ),
        (
            dict(tie_word_embeddings=True, d_vocab_out=50),
            "tie_word_embeddings=True makes W_U a copy of W_E.T, but d_vocab_out=50 != "
            "d_vocab=100; set d_vocab_out=-1 or tie_word_embeddings=False.",
        ),
        (
            dict(attn_scores_soft_cap=-2.0),
            "attn_scores_soft_cap=-2.0 is negative; give a positive cap, or -1.0 to turn it off.",
        ),
        (
            dict(attn_scale=-3.0),
            "attn_scale=-3.0 must be positive (the scores are divided by it); leave it at -1",
        ),
        (
            dict(use_attn_scale=False, attn_scale=8.0),
            "use_attn_scale=False divides the scores by 1, but attn_scale=8.0",
        ),
        (
            dict(positional_embedding_type="sinusoidal"),
            "positional_embedding_type='sinusoidal' is not supported; use one of ('standard', "
            "'rotary', 'shortformer', 'alibi').",
        ),
    ],
)
def test_inconsistent_architecture_fields_name_the_fields_and_the_fix(changes, message):
    assert message in _error(**changes)


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"n_layers": "2"}, "n_layers must be given, as a positive integer, got '2' (str)"),
        ({"n_ctx": None}, "n_ctx must be given, as a positive integer, got None (NoneType)"),
        ({"n_heads": 0}, "n_heads must be positive, got 0."),
        ({"d_mlp": 1.5}, "d_mlp must be a positive integer, got 1.5 (float)"),
        ({"d_vocab": 0}, "d_vocab must be positive, or -1 to take it from the tokenizer; got 0."),
        ({"dtype": "float33"}, "dtype='float33' is not a torch dtype; use e.g. 'float32'"),
        ({"attn_only": "false"}, "attn_only must be True or False, got 'false' (str)."),
        (
            {"rmsnorm_uses_offset": 1.0},
            "rmsnorm_uses_offset must be True or False, got 1.0 (float).",
        ),
        ({"eps": 0}, "eps must be a positive number, got 0; e.g. eps=1e-5."),
        ({"normalization_type": "RMSNorm"}, "normalization_type='RMSNorm' is not supported; use"),
        ({"act_fn": "solu_relu"}, "act_fn='solu_relu' is not one of"),
        ({"attention_dir": "sideways"}, "attention_dir='sideways' is not one of"),
    ],
)
def test_bad_values_name_the_field_and_the_fix(changes, message):
    with pytest.raises(ValueError) as error:
        HookedTransformerConfig(**{**BASE, **changes})
    assert message in str(error.value)


def test_from_dict_names_unknown_and_missing_keys():
    with pytest.raises(ValueError, match=r"Unknown config keys \['n_embd'\]"):
        HookedTransformerConfig.from_dict({**BASE, "n_embd": 64})
    with pytest.raises(ValueError, match=r"The config has no \['d_model'\]"):
        HookedTransformerConfig.from_dict({"n_layers": 1, "n_ctx": 8, "n_heads": 2})


def test_device_without_cuda_is_a_clear_error():
    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    with pytest.raises(ValueError, match="device='cuda' needs CUDA, but CUDA is not available"):
        HookedTransformerConfig(**BASE, device="cuda")
    with pytest.raises(ValueError, match="device='gpu' is not a torch device.*did you mean 'cuda'"):
        HookedTransformerConfig(**BASE, device="gpu")
