"""``python -m interp.harvest ARGS`` (what ``torchrun -m interp.harvest`` runs): the CLI.

This process is harvest's alone, so glibc keeps the memory it frees here: the forward's
intermediates are reused instead of landing on fresh, page-faulting pages every batch
(``interp.utils.malloc_tuning``).
"""

import sys

from interp.harvest.cli import main
from interp.utils.malloc_tuning import keep_freed_memory

keep_freed_memory()
sys.exit(main())
