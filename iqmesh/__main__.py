"""``python -m iqmesh``: the ``iqmesh`` command (what tests and local clusters spawn)."""

import sys

from iqmesh.main import main

sys.exit(main())
