"""``python -m vlarl_trainer ...`` is ``vlarl-train ...``."""

import sys

from vlarl_trainer.cli.commands import train_main

sys.exit(train_main())
