"""Which chatbots of the configuration a run covers (``--target``)."""

from __future__ import annotations

import difflib
from collections.abc import Sequence

from botctl.errors import BotctlError
from botctl.models import Desired


def select_targets(desired: Desired, targets: Sequence[str]) -> Desired:
    """Only the chatbots named (metadata.name); a name that matches none is an error with
    the closest names."""
    if not targets:
        return desired
    names = [bot.name for bot in desired.bots]
    unknown = [t for t in targets if t not in names]
    if unknown:
        hints = []
        for target in unknown:
            close = difflib.get_close_matches(target, names, n=1)
            hints.append(f"{target!r}" + (f" (did you mean {close[0]!r}?)" if close else ""))
        raise BotctlError(
            "--target names no chatbot of the configuration: "
            + ", ".join(hints)
            + f"; known: {', '.join(names)}"
        )
    kept = tuple(bot for bot in desired.bots if bot.name in targets)
    return desired.model_copy(update={"bots": kept})
