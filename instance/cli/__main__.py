"""``python -m instance.cli``: the ``iqmesh`` command (what tests and local clusters spawn)."""

import sys

from instance.cli.main import main

sys.exit(main())
