"""``python -m tfrecord_lite``: the tfrecord-lite command."""

import sys

from .cli import main

sys.exit(main())
