"""interp.cli: the `interp` command's subcommands, errors and exit codes."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest

from interp import HookedTransformer, HookedTransformerConfig
from interp.cli import hook_shapes, main


def _interp_command() -> list[str]:
    script = shutil.which("interp")
    return [script] if script else [sys.executable, "-m", "interp.cli"]


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    cfg = HookedTransformerConfig(
        n_layers=2,
        d_model=32,
        n_heads=2,
        d_mlp=64,
        d_vocab=50257,
        n_ctx=64,
        seed=0,
        model_name="tiny-test",
    )
    folder = tmp_path_factory.mktemp("model") / "tiny"
    HookedTransformer(cfg, tokenizer="gpt2").save(folder)
    return folder


def test_demo_runs_as_a_fresh_process_offline_and_exits_0(tmp_path):
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    out = tmp_path / "demo.html"
    result = subprocess.run(
        [*_interp_command(), "demo", "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
        env=env,
    )
    assert result.returncode == 0, result.stderr
    assert f"report written to {out.resolve()}" in result.stdout
    assert "next-token prediction:" in result.stdout and "top induction head:" in result.stdout
    assert out.stat().st_size > 1_000_000  # the page with its JavaScript inlined
    # The shipped attn-only-2l completes the repeated sequence from its first copy.
    assert "model: attn-only-2l" in result.stdout
    assert "next-token prediction: '501'" in result.stdout
    assert "top previous token head: L0H0" in result.stdout
    assert "top induction head: L1H0" in result.stdout


def test_report_writes_the_page_and_a_summary(model_dir, tmp_path, capsys):
    out = tmp_path / "sub" / "report.html"
    code = main(
        [
            "report",
            "--model",
            str(model_dir),
            "--prompt",
            "The cat sat. The cat",
            "--corrupted",
            "The dog sat. The dog",
            "--out",
            str(out),
        ]
    )
    assert code == 0
    stdout = capsys.readouterr().out
    assert "model: tiny-test" in stdout and "patching: strongest effect" in stdout
    assert "<section id='patching'>" in out.read_text()


def test_hooks_lists_every_hook_point_with_its_shape(model_dir, capsys):
    assert main(["hooks", "--model", str(model_dir)]) == 0
    lines = capsys.readouterr().out.splitlines()
    model = (
        HookedTransformer.from_pretrained(str(model_dir))
        if hasattr(HookedTransformer, "from_pretrained")
        else None
    )
    from interp.loading.native import load_native

    model = model or load_native(model_dir)
    assert lines[0].startswith(f"{len(model.hook_dict)} hook points")
    listed = dict(line.split(maxsplit=1) for line in lines[1:])
    assert listed.keys() == model.hook_dict.keys()
    assert listed["blocks.1.attn.hook_pattern"] == "[1, 2, 1, 1]"
    assert listed["blocks.0.mlp.hook_post"] == "[1, 1, 64]"
    assert dict(hook_shapes(model))["hook_embed"] == (1, 1, 32)


@pytest.mark.parametrize(
    "argv",
    [
        [],
        ["nonsense"],
        ["report", "--prompt", "x", "--out", "r.html"],  # no --model
        ["report", "--model", "m", "--prompt", "  ", "--out", "r.html"],  # empty prompt
        ["report", "--model", "m", "--prompt", "x", "--answer", " a", "--out", "r.html"],
        ["demo", "--out", "."],  # a folder, not a file
    ],
)
def test_usage_errors_exit_2(argv, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    assert exit_info.value.code == 2
    assert "usage: interp" in capsys.readouterr().err


def test_help_exits_0_everywhere(capsys):
    for argv in (["--help"], ["demo", "--help"], ["report", "--help"], ["hooks", "--help"]):
        with pytest.raises(SystemExit) as exit_info:
            main(argv)
        assert exit_info.value.code == 0
    assert "--corrupted" in capsys.readouterr().out


def test_runtime_errors_exit_1_with_a_clear_message(model_dir, tmp_path, capsys):
    assert main(["hooks", "--model", str(tmp_path / "missing-model")]) == 1
    assert "missing-model" in capsys.readouterr().err
    code = main(
        [
            "report",
            "--model",
            str(model_dir),
            "--prompt",
            "The cat sat",
            "--corrupted",
            "The",
            "--out",
            str(tmp_path / "r.html"),
        ]
    )
    assert code == 1
    assert "same length in tokens" in capsys.readouterr().err
