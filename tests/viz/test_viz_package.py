"""interp.viz stays below the served app: importing it starts no server code, and the
dashboard's old name there says where it went."""

from __future__ import annotations

import subprocess
import sys

import pytest

import interp.viz


def test_viz_does_not_import_the_served_app() -> None:
    code = "import sys, interp, interp.viz; print('interp.serve' in sys.modules)"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "False"


def test_the_dashboards_old_name_points_to_its_home() -> None:
    with pytest.raises(AttributeError, match=r"interp\.serve\.dashboard"):
        interp.viz.dashboard  # noqa: B018
    with pytest.raises(AttributeError, match="no attribute 'nothing'"):
        interp.viz.nothing  # noqa: B018
