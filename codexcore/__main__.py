"""``python -m codexcore``: the command line."""

import sys

from codexcore.cli import main

if __name__ == "__main__":
    sys.exit(main())
