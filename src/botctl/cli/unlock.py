"""``botctl unlock``."""

from __future__ import annotations

from pathlib import Path

import click

from botctl.cli.options import STATE
from botctl.errors import EXIT_OK


@click.command()
@STATE
def unlock(state_path: Path) -> int:
    """Remove a state lock left behind by an apply that died.

    Only when you are sure no apply is running: the lock is what keeps two applies apart.
    """
    from botctl.store.lock import break_lock

    holder = break_lock(state_path)
    if holder is None:
        click.echo(f"{state_path} is not locked.")
    else:
        click.echo(f"Removed the lock of {holder.describe()}.")
    return EXIT_OK
