# SPDX-License-Identifier: GPL-2.0
"""python3 -m copa_tools.eval: copa-eval (the --vm guest runs it so)."""
import sys

from .cli import main

sys.exit(main())
