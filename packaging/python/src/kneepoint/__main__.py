"""`python -m kneepoint ARGS...` runs the bundled binary."""

import os
import sys

from ._binary import binary

if __name__ == "__main__":
    exe = binary()
    os.execv(exe, [exe, *sys.argv[1:]])
