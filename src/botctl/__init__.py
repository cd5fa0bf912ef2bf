"""botctl: chatbot settings and custom contact attributes as code."""

import sys

__version__ = "0.1.0"

# httpx imports its own command-line client (httpx._main: click, pygments, rich) whenever those
# happen to be installed, ~30 ms of every start that talks HTTP; botctl never uses it. An entry
# of None makes that import fail as not installed, which httpx expects and handles.
sys.modules.setdefault("httpx._main", None)  # type: ignore[arg-type]
