"""`python -m botctl` runs the CLI."""

from botctl.cli import main

main()
