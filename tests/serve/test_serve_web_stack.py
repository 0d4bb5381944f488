"""FastAPI and uvicorn are the ``serve`` extra's: without them interp imports, the ``interp``
command runs its other subcommands, and the dashboard names what is missing and the fix."""

from __future__ import annotations

import subprocess
import sys
import textwrap

HIDE_WEB_STACK = "import sys; sys.modules['fastapi'] = sys.modules['uvicorn'] = None\n"


def run_without_web_stack(code: str) -> subprocess.CompletedProcess:
    script = HIDE_WEB_STACK + textwrap.dedent(code)
    return subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=300
    )


def test_interp_and_its_command_need_no_web_package() -> None:
    done = run_without_web_stack(
        """
        import interp, interp.viz, interp.serve
        from interp.cli import build_parser, main
        build_parser()
        assert main(["list"]) == 0
        """
    )
    assert done.returncode == 0, done.stderr


def test_the_dashboard_names_what_is_missing() -> None:
    done = run_without_web_stack(
        """
        import interp.serve
        try:
            interp.serve.create_app
        except ImportError as error:
            print(error)
        """
    )
    assert done.returncode == 0, done.stderr
    assert "fastapi and uvicorn" in done.stdout
    assert "pip install 'interp[serve]'" in done.stdout


def test_interp_serve_exits_with_the_fix() -> None:
    done = run_without_web_stack(
        """
        import sys
        from interp.cli import main
        sys.exit(main(["serve", "--model", "attn-only-2l"]))
        """
    )
    assert done.returncode == 1
    assert "pip install 'interp[serve]'" in done.stderr + done.stdout
