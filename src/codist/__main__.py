"""`python -m codist` is the `codist` command."""
import sys

from .cli import main

sys.exit(main())
