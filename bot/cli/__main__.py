"""`python -m bot.cli`: the `cosigner` command."""

import sys

from bot.cli.commands import main

sys.exit(main())
