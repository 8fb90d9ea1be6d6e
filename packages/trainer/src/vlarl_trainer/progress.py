"""Progress bars with an ETA for every stage of a job: collection, SFT, RL and evaluation.

Each stage counts its own unit (episodes kept, SFT steps, RL steps, evaluation chunk steps) and
shows tqdm's elapsed and remaining time; ``runner.progress=false`` turns every bar off. Lines a
stage prints while its bar is open go through ``write`` so they land above the bar, not through it.
"""

from __future__ import annotations

import sys

from tqdm import tqdm


def progress_bar(total: int, desc: str, unit: str, enabled: bool = True, initial: int = 0,
                 leave: bool = True) -> tqdm:
    """A bar over ``total`` units; a disabled bar accepts the same calls and draws nothing. Written to a
    file (a job's nohup log) rather than a terminal, it redraws every 10 s instead of ten times a second."""
    return tqdm(total=total, initial=initial, desc=desc, unit=unit, dynamic_ncols=True, disable=not enabled,
                leave=leave, file=sys.stderr, mininterval=0.1 if sys.stderr.isatty() else 10.0)


def write(line: str) -> None:
    """Print ``line`` to stdout above any open bar."""
    tqdm.write(line, file=sys.stdout)
    sys.stdout.flush()
