"""get_act_name: TransformerLens's shorthand for hook names."""

import pytest

from interp.utils import get_act_name


@pytest.mark.parametrize(
    "args, expected",
    [
        (("resid_pre", 3), "blocks.3.hook_resid_pre"),
        (("pattern", 0), "blocks.0.attn.hook_pattern"),
        (("attn", 2), "blocks.2.attn.hook_pattern"),
        (("attn_scores", 1), "blocks.1.attn.hook_attn_scores"),
        (("q", 1), "blocks.1.attn.hook_q"),
        (("pre", 4), "blocks.4.mlp.hook_pre"),
        (("mlp_post", 4), "blocks.4.mlp.hook_post"),
        (("scale", 2, "ln1"), "blocks.2.ln1.hook_scale"),
        (("normalized", 0, "ln2"), "blocks.0.ln2.hook_normalized"),
        (("scale",), "ln_final.hook_scale"),
        (("embed",), "hook_embed"),
        (("pos_embed",), "hook_pos_embed"),
        (("resid_pre3",), "blocks.3.hook_resid_pre"),
        (("scale4ln1",), "blocks.4.ln1.hook_scale"),
        (("attn_out", 5), "blocks.5.hook_attn_out"),
        (("blocks.0.attn.hook_z",), "blocks.0.attn.hook_z"),
    ],
)
def test_get_act_name(args, expected):
    assert get_act_name(*args) == expected
