"""``interp hooks`` and ``interp report`` on Hugging Face folders of other families: a
Llama-shaped (GQA, rotary, gated MLP) and a Gemma 2-shaped (sandwich norms, soft caps,
sliding window) random checkpoint, saved with a word-level tokenizer."""

from __future__ import annotations

import pytest
import torch
import transformers
from tokenizers import Tokenizer, models, pre_tokenizers

from interp import HookedTransformer
from interp.cli import main
from tests.loading.test_families_parity import VOCAB, saved

PROMPT = "w1 w2 w3 w4 w5 w6 w7"
CORRUPTED = "w1 w2 w9 w4 w5 w6 w7"


def word_tokenizer() -> transformers.PreTrainedTokenizerFast:
    """A tokenizer.json-backed tokenizer of VOCAB whole words: <bos>, <eos>, w0 ... w124."""
    words = ["<bos>", "<eos>", "<pad>"] + [f"w{i}" for i in range(VOCAB - 3)]
    tokenizer = Tokenizer(models.WordLevel({w: i for i, w in enumerate(words)}, unk_token="w0"))
    tokenizer.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    return transformers.PreTrainedTokenizerFast(
        tokenizer_object=tokenizer, bos_token="<bos>", eos_token="<eos>", pad_token="<pad>"
    )


@pytest.fixture(scope="module", params=["llama-gqa2-llama3-rope", "gemma2-soft-caps-bite-window-4"])
def folder(request, tmp_path_factory):
    folder = tmp_path_factory.mktemp(request.param)
    saved(folder, request.param)
    word_tokenizer().save_pretrained(folder)
    return folder


def test_hooks_lists_the_family_hook_points_in_forward_order(folder, capsys):
    assert main(["hooks", "--model", str(folder)]) == 0
    lines = capsys.readouterr().out.splitlines()
    model = HookedTransformer.from_pretrained_no_processing(folder)
    cfg = model.cfg
    listed = dict(line.split(maxsplit=1) for line in lines[1:])
    assert lines[0].startswith(f"{len(model.hook_dict)} hook points")
    assert listed.keys() == model.hook_dict.keys()
    names = list(listed)
    assert names[:3] == ["hook_embed", "blocks.0.hook_resid_pre", "blocks.0.ln1.hook_scale"]
    assert names.index("blocks.0.attn.hook_q") < names.index("blocks.0.attn.hook_rot_q")
    assert "hook_pos_embed" not in listed  # rotary: positions rotate q and k
    n_kv, d_head = cfg.n_key_value_heads, cfg.d_head
    assert n_kv < cfg.n_heads
    assert listed["blocks.1.attn.hook_k"] == f"[1, 1, {n_kv}, {d_head}]"
    assert listed["blocks.1.attn.hook_rot_q"] == f"[1, 1, {cfg.n_heads}, {d_head}]"
    assert listed["blocks.0.mlp.hook_pre_linear"] == f"[1, 1, {cfg.d_mlp}]"
    sandwich = cfg.use_normalization_before_and_after
    assert ("blocks.0.ln2_post.hook_normalized" in listed) == sandwich
    assert sandwich == (cfg.original_architecture == "Gemma2ForCausalLM")
    if sandwich:  # the post-norm runs before hook_mlp_out sees its output
        assert names.index("blocks.0.ln2_post.hook_scale") < names.index("blocks.0.hook_mlp_out")


def test_report_on_a_family_checkpoint(folder, tmp_path, capsys):
    out = tmp_path / "report.html"
    argv = ["report", "--model", str(folder), "--prompt", PROMPT, "--corrupted", CORRUPTED]
    assert main([*argv, "--out", str(out)]) == 0
    summary = capsys.readouterr().out
    model = HookedTransformer.from_pretrained_no_processing(folder)
    with torch.no_grad():
        top = model(PROMPT)[0, -1].argmax().item()
    assert f"next-token prediction: {model.to_single_str_token(top)!r}" in summary
    assert "patching: strongest effect at" in summary
    html = out.read_text(encoding="utf-8")
    assert html.startswith("<!DOCTYPE html>") and "w5" in html
