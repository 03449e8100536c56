"""`python -m eebench.testing METHOD [--rule RULE ...]`: the conformance report."""

import sys

from eebench.testing.conformance import main

sys.exit(main())
