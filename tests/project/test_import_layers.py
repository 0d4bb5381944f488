"""The package's import layers (pyproject.toml's [tool.importlinter] contracts) hold, and the
pieces that keep them: the loaders build the class interp.model hands them, and the command
line's shared helpers live below the command line."""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from interp.config import HookedTransformerConfig
from interp.loading import model_class as loaders_class
from interp.loading.checkpoint import build_model
from interp.model import HookedTransformer

ROOT = Path(__file__).resolve().parents[2]


def _lint_imports() -> list[str]:
    """The lint-imports command next to this Python, or run through it."""
    script = Path(sys.executable).with_name("lint-imports")
    if script.is_file():
        return [str(script)]
    found = shutil.which("lint-imports")
    return [found] if found else [sys.executable, "-m", "importlinter.cli"]


def test_import_contracts_are_kept():
    pytest.importorskip("importlinter", reason="needs import-linter (the test extra)")
    done = subprocess.run(
        [*_lint_imports(), "--no-cache"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "0 broken" in done.stdout


def test_loaders_build_the_class_interp_model_hands_them():
    assert loaders_class.model_class() is HookedTransformer
    cfg = HookedTransformerConfig(
        n_layers=1, d_model=8, n_heads=2, d_head=4, d_mlp=16, d_vocab=11, n_ctx=5, act_fn="relu"
    )
    source = HookedTransformer(cfg)
    built = build_model(cfg, source.state_dict().items())
    assert type(built) is HookedTransformer
    for name, tensor in source.state_dict().items():
        assert torch.equal(built.state_dict()[name], tensor), name


def test_set_model_class_refuses_what_is_not_a_module_class():
    for wrong in ("HookedTransformer", torch.nn.Linear(2, 2), int):
        with pytest.raises(TypeError, match="nn.Module subclass"):
            loaders_class.set_model_class(wrong)
    assert loaders_class.model_class() is HookedTransformer


def test_command_line_helpers_stay_importable_from_interp_cli():
    from interp import cli, cli_support
    from interp.models import by_name

    assert cli.load_named_model is by_name.load_named_model
    assert cli.UsageError is cli_support.UsageError
    assert cli.CommandError is cli_support.CommandError
    assert cli.terminal_text is cli_support.terminal_text


def test_unknown_model_is_a_value_error_naming_the_closest_shipped_model():
    from interp.models.by_name import UnknownModelError, load_named_model

    with pytest.raises(UnknownModelError, match="did you mean 'attn-only-2l'"):
        load_named_model("attn-only-2")
    assert issubclass(UnknownModelError, ValueError)
