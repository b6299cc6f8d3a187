"""``python -m zlink_trio.bench`` (also ``zlink-trio bench``): every figure in one run."""

import sys

from zlink_trio.bench.suite import main

sys.exit(main())
