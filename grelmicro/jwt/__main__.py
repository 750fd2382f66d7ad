"""``python -m grelmicro.jwt``: see :mod:`grelmicro.jwt._cli`."""

import sys

from grelmicro.jwt._cli import main

sys.exit(main())
