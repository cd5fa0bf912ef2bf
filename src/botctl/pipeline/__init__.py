"""The stages wired together for each command: load -> read -> diff -> (apply -> record).
No printing here: progress goes to callbacks, so the same flows serve the CLI and the demo."""
