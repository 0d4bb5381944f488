"""``python -m interp.harvest ARGS`` (what ``torchrun -m interp.harvest`` runs): the CLI."""

import sys

from interp.harvest.cli import main

sys.exit(main())
