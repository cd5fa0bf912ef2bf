"""``botctl unlock``."""

from __future__ import annotations

import click

from botctl.cli.options import state_option
from botctl.errors import EXIT_OK


@click.command()
@state_option
@click.option(
    "--force",
    is_flag=True,
    help="Remove the lock even when its holder may still run (on another host, or a pid that "
    "was reused on this one).",
)
def unlock(state_path: str, force: bool) -> int:
    """Remove a state lock left behind by a run that died.

    Refused while the lock's holder still runs on this host: the lock is what keeps two
    applies apart. A lock taken on another host (a CI runner) cannot be checked from here:
    it is shown, and removed only with --force, once you know that run is over.
    """
    from botctl.store.backends import describe
    from botctl.store.lock import break_lock

    done = break_lock(state_path, force=force)
    if done.holder is None:
        click.echo(f"{describe(state_path)} is not locked.")
    elif done.holder_gone:
        click.echo(f"Removed the lock of {done.holder.describe()}: that process no longer exists.")
    else:
        click.echo(f"Removed the lock of {done.holder.describe()} (--force).")
    return EXIT_OK
