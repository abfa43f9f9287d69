"""``python -m tenxgraph.cli``: the ``tenxgraph`` command."""

import sys

from tenxgraph.cli import main

sys.exit(main())
