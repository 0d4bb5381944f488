"""``interp harvest`` / ``python -m interp.harvest``: options reach harvest(), bad input exits 2
with the reason, and nothing is written for it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from interp.cli import main
from tests.support.harvest_data import shakespeare_text


@pytest.fixture
def text(tmp_path) -> Path:
    return shakespeare_text(tmp_path / "small.txt", n_chars=1200)


def test_harvest_command_writes_the_manifest_it_was_asked_for(text, tmp_path, capsys):
    out = tmp_path / "acts"
    code = main(
        [
            "harvest",
            "--model",
            "shakespeare-char",
            "--data",
            str(text),
            "--hooks",
            "blocks.0.hook_resid_post, blocks.1.hook_resid_post",
            "--out",
            str(out),
            "--seq-len",
            "24",
            "--batch-size",
            "3",
            "--max-tokens",
            "500",
            "--dtype",
            "fp16",
            "--positions",
            "2:",
            "--shard-tokens",
            "100",
            "--no-progress",
        ]
    )
    assert code == 0
    manifest = json.loads((out / "manifest.json").read_text())
    config = manifest["config"]
    assert list(config["hooks"]) == ["blocks.0.hook_resid_post", "blocks.1.hook_resid_post"]
    assert (config["seq_len"], config["batch_size"], config["max_tokens"]) == (24, 3, 500)
    assert (config["dtype"], config["positions"], config["tokens_per_shard"]) == (
        "float16",
        [2, None, None],
        88,
    )
    assert manifest["n_sequences"] == 20 and manifest["n_tokens"] == 20 * 22
    assert capsys.readouterr().out == f"harvested 440 tokens x 2 hooks in 5 shards to {out}\n"


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (["--hooks", "blocks.9.hook_resid_post"], "Closest valid names"),
        (["--seq-len", "500"], "seq_len=500 is not between 1 and the model's n_ctx (128)"),
        (["--positions", "a:b"], "--positions 'a:b' is not a position or a slice"),
        (["--text-field", "body", "--data", "JSONL"], "has no text field 'body'"),
    ],
)
def test_bad_input_exits_2_with_the_reason_and_writes_nothing(
    arguments, message, text, tmp_path, capsys
):
    jsonl = tmp_path / "docs.jsonl"
    jsonl.write_text(json.dumps({"text": "hello"}) + "\n")
    options = {"--hooks": "blocks.0.hook_resid_post", "--data": str(text)}
    for flag, value in zip(arguments[::2], arguments[1::2], strict=True):
        options[flag] = str(jsonl) if value == "JSONL" else value
    argv = ["harvest", "--model", "shakespeare-char", "--out", str(tmp_path / "out")]
    with pytest.raises(SystemExit) as exit_info:
        main([*argv, *(item for pair in options.items() for item in pair)])
    assert exit_info.value.code == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_python_m_interp_harvest_is_the_same_command(text, tmp_path):
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "interp.harvest",
            "--model",
            "shakespeare-char",
            "--data",
            str(text),
            "--hooks",
            "hook_embed",
            "--out",
            str(tmp_path / "acts"),
            "--seq-len",
            "100",
            "--no-progress",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert "harvested 1200 tokens x 1 hooks in 1 shards" in done.stdout
