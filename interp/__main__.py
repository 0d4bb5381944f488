"""``python -m interp ...``: the ``interp`` command (``interp.cli``)."""

import sys

from interp.cli import main

sys.exit(main())
