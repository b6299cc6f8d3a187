"""``python -m zlink_trio.cli``: the ``zlink-trio`` command."""

import sys

from zlink_trio.cli.main import main

sys.exit(main())
