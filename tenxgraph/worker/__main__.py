"""``python -m tenxgraph.worker ...``: the same as ``tenxgraph worker ...``."""

import sys

from tenxgraph.cli import main

sys.exit(main(["worker", *sys.argv[1:]]))
