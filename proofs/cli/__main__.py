"""``python -m proofs.cli``: the ``schedcheck`` command."""

import sys

from proofs.cli.main import main

sys.exit(main())
