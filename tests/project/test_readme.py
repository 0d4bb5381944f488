"""README.md: every ```python block runs as written, in order, in one fresh offline interpreter."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

README = Path(__file__).resolve().parents[2] / "README.md"
BLOCK = re.compile(r"^```python\n(.*?)^```", re.DOTALL | re.MULTILINE)
# A guard against a hung interpreter, not a speed test.
TIMEOUT_S = 600

# Runs the blocks one by one in one namespace; on an error, reports the block's number and
# source as JSON on stdout and exits 1.
RUNNER = textwrap.dedent(
    """
    import json, sys, traceback
    blocks = json.loads(sys.stdin.read())
    namespace = {"__name__": "__main__"}
    for number, source in enumerate(blocks, start=1):
        try:
            exec(compile(source, f"<README.md python block {number}>", "exec"), namespace)
        except BaseException:
            print(json.dumps({"block": number, "source": source, "error": traceback.format_exc()}))
            sys.exit(1)
    """
)


def python_blocks(markdown: str) -> list[str]:
    """The source of every fenced ```python block, in order."""
    return BLOCK.findall(markdown)


def test_python_blocks_are_found():
    blocks = python_blocks("text\n```python\na = 1\n```\n```bash\nls\n```\n```python\nb = a\n```\n")
    assert blocks == ["a = 1\n", "b = a\n"]


def test_every_python_block_runs_in_order_in_a_fresh_interpreter(tmp_path):
    blocks = python_blocks(README.read_text(encoding="utf-8"))
    assert len(blocks) >= 5, "README.md should show its API in ```python blocks"
    env = {
        **os.environ,
        "HF_HUB_OFFLINE": "1",  # nothing may download
        "TRANSFORMERS_OFFLINE": "1",
        "MPLBACKEND": "Agg",
        "OMP_NUM_THREADS": "1",
    }
    result = subprocess.run(
        [sys.executable, "-c", RUNNER],
        input=json.dumps(blocks),
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
        cwd=tmp_path,  # files a block writes land here
        env=env,
    )
    if result.returncode != 0:
        lines = result.stdout.strip().splitlines()
        failure = json.loads(lines[-1]) if lines and lines[-1].startswith("{") else None
        if failure is None:
            raise AssertionError(f"README runner crashed:\n{result.stdout}\n{result.stderr}")
        raise AssertionError(
            f"README.md python block {failure['block']} failed:\n"
            f"{failure['source']}\n{failure['error']}"
        )


BASH_BLOCK = re.compile(r"^```bash\n(.*?)^```", re.DOTALL | re.MULTILINE)
DATA_ARGUMENT = re.compile(r"--(?:data|contexts-data|sae-data) (\S+)")


def test_the_commands_data_files_ship_with_interp():
    """The README's ``interp ...`` lines read text a newcomer has: the shipped text by name."""
    from interp.shipped import shipped_text_path

    blocks = "\n".join(BASH_BLOCK.findall(README.read_text(encoding="utf-8")))
    commands = blocks.replace("\\\n", " ").splitlines()  # continuation lines joined
    shown = [c for c in commands if c.startswith(("interp graph ", "interp serve "))]
    values = [value for command in shown for value in DATA_ARGUMENT.findall(command)]
    assert values, "the README shows interp graph / interp serve with their data"
    for value in values:
        assert Path(shipped_text_path(value)).is_file(), value
        assert not Path(value).is_absolute()


def test_a_shipped_text_name_is_its_file_for_the_text_options(monkeypatch, tmp_path):
    import interp.cli
    import interp.cli.commands
    from interp.shipped import shipped_text_path
    from interp.training.text import default_text

    seen = []
    monkeypatch.setattr(interp.cli.commands, "run_command", lambda args: seen.append(args) or 0)
    monkeypatch.chdir(tmp_path)
    shipped = shipped_text_path("tinyshakespeare")
    assert shipped.endswith(".txt.gz") and Path(shipped).is_file()
    assert len(default_text()) > 1_000_000  # what the gzip file holds
    model = ["--model", "shakespeare-char"]
    interp.cli.main(["serve", *model, "--sae", "s", "--data", "tinyshakespeare"])
    interp.cli.main(["graph", *model, "--transcoders", "t", "--prompt", "x", "--out", "g.html",
                     "--contexts-data", "tinyshakespeare"])  # fmt: skip
    interp.cli.main(["report", *model, "--prompt", "x", "--out", "r.html", "--sae", "s",
                     "--sae-data", "tinyshakespeare"])  # fmt: skip
    assert [seen[0].data, seen[1].contexts_data, seen[2].sae_data] == [shipped] * 3
    (tmp_path / "tinyshakespeare").write_text("a file of that name here wins")
    interp.cli.main(["serve", *model, "--sae", "s", "--data", "tinyshakespeare"])
    assert seen[3].data == "tinyshakespeare"
    interp.cli.main(["features", *model, "--sae", "s", "--data", "mine.txt", "--out", "o"])
    assert seen[4].data == "mine.txt"  # any other value is a path as given
