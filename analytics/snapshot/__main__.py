"""``python -m analytics.snapshot ...``: the same job as ``iqmesh snapshot``."""

import sys

from analytics.snapshot.job import main

sys.exit(main())
