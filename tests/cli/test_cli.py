"""interp.cli: the `interp` command's subcommands, errors and exit codes."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest

from interp import HookedTransformer, HookedTransformerConfig
from interp.cli import hook_shapes, main, terminal_text


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
    assert (tmp_path / "report_assets" / "plotly-cartesian.min.js").stat().st_size > 1_000_000
    # The shipped attn-only-2l completes the repeated sequence from its first copy.
    assert "model: attn-only-2l" in result.stdout
    assert "next-token prediction: '501'" in result.stdout
    assert "top previous token head: L0H0" in result.stdout
    assert "top induction head: L1H0" in result.stdout


def test_list_names_the_shipped_models_and_saes(capsys):
    import interp

    assert main(["list"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("models (interp.load_model(NAME), --model NAME):\n")
    for name in interp.list_models() + interp.list_saes():
        assert f"\n  {name}\n" in out
    assert "SAEs (interp.load_sae(NAME), --sae NAME):\n  shakespeare-char-resid-l1\n" in out


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
    model = HookedTransformer.from_pretrained_no_processing(str(model_dir))
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


def _usage_error(argv: list[str], capsys) -> str:
    """Runs the command, checks it exits 2 with its usage, and returns stderr."""
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith(f"usage: interp {argv[0]}")
    return err


def test_an_unknown_model_is_a_usage_error_suggesting_the_closest_shipped_name(
    tmp_path, capsys, monkeypatch
):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    err = _usage_error(["hooks", "--model", "attn-only-2"], capsys)
    assert "unknown model 'attn-only-2': did you mean 'attn-only-2l'?" in err
    assert "not a shipped model (attn-only-2l, shakespeare-char)" in err
    err = _usage_error(["hooks", "--model", str(tmp_path / "missing-model")], capsys)
    assert f"unknown model {str(tmp_path / 'missing-model')!r}: It is not" in err


def _report_argv(model: str, out, *extra: str) -> list[str]:
    return ["report", "--model", model, "--out", str(out), *extra]


def test_a_corrupted_prompt_of_another_length_is_a_usage_error(model_dir, tmp_path, capsys):
    argv = _report_argv(str(model_dir), tmp_path / "r.html", "--prompt", "The cat sat")
    err = _usage_error([*argv, "--corrupted", "The"], capsys)
    assert "--corrupted is 2 tokens and --prompt 4 (['<|endoftext|>', 'The'] vs" in err
    assert "give prompts of the same length in tokens" in err
    assert not (tmp_path / "r.html").exists()


def test_an_answer_of_several_tokens_is_a_usage_error(tmp_path, capsys):
    argv = _report_argv("attn-only-2l", tmp_path / "r.html", "--prompt", "1 2 3 1 2")
    argv += ["--corrupted", "1 4 3 1 2"]
    err = _usage_error([*argv, "--answer", "3 4"], capsys)
    assert "--answer '3 4' is 2 tokens for attn-only-2l (['3', '4']); give one token" in err
    err = _usage_error([*argv, "--answer", "3", "--wrong-answer", "4 5"], capsys)
    assert "--wrong-answer '4 5' is 2 tokens" in err and "e.g. --wrong-answer '4'" in err


def test_a_checkpoint_that_fails_to_load_is_a_runtime_error_exit_1(tmp_path, capsys):
    folder = tmp_path / "broken"
    folder.mkdir()
    (folder / "config.json").write_text("{not json", encoding="utf-8")
    assert main(["hooks", "--model", str(folder)]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"interp: error: Could not load {str(folder)!r}")


def test_control_characters_from_names_and_prompts_reach_the_terminal_escaped(
    model_dir, tmp_path, capsys
):
    red = "\x1b[31m"
    folder = tmp_path / f"{red}broken"
    folder.mkdir()
    (folder / "config.json").write_text("{not json", encoding="utf-8")
    assert main(["hooks", "--model", str(folder)]) == 1
    err = capsys.readouterr().err
    assert "\x1b" not in err and "\\x1b[31mbroken" in err

    err = _usage_error(["hooks", "--model", f"{red}attn-only-2l"], capsys)
    assert "\x1b" not in err and "unknown model '\\x1b[31mattn-only-2l'" in err

    model = HookedTransformer.from_pretrained(str(model_dir))
    model.cfg.model_name = f"{red}evil\u202e"  # an ANSI colour and a right-to-left override
    named = tmp_path / "named"
    model.save(named)
    assert main(["hooks", "--model", str(named)]) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\u202e" not in out
    assert "hook points of \\x1b[31mevil\\u202e;" in out

    out_file = tmp_path / f"{red}r.html"
    prompt = f"The {red}cat sat"
    assert main(_report_argv(str(model_dir), out_file, "--prompt", prompt)) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out
    assert f"report written to {out_file.resolve()}".replace(red, "\\x1b[31m") in out
    assert terminal_text(f"a{red}\n\tb\u200b") == "a\\x1b[31m\n\tb\\u200b"


def test_a_prompt_the_model_cannot_take_is_a_runtime_error_exit_1(tmp_path, capsys):
    argv = _report_argv("shakespeare-char", tmp_path / "r.html", "--prompt", "ROMEO: \u20ac")
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert err == (
        "interp: error: Characters ['\u20ac'] are not in this model's alphabet of 65 "
        "characters; remove or replace them.\n"
    )
