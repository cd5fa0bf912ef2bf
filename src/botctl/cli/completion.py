"""``botctl completion``."""

from __future__ import annotations

import click

from botctl.errors import EXIT_OK


@click.command()
@click.argument("shell", type=click.Choice(["bash", "zsh", "fish"]))
@click.pass_context
def completion(ctx: click.Context, shell: str) -> int:
    """Print the shell completion script for SHELL (bash 4.4+, zsh, fish).

    Completes commands, options and, for --target, the chatbot names declared in the PATHs
    typed before it (else in the current directory), from the YAML alone: completing never
    contacts the service.

    \b
    Install it once:
      bash  echo 'eval "$(botctl completion bash)"' >> ~/.bashrc
      zsh   echo 'eval "$(botctl completion zsh)"' >> ~/.zshrc
      fish  botctl completion fish > ~/.config/fish/completions/botctl.fish
    then open a new shell.
    """
    from click.shell_completion import get_completion_class

    complete = get_completion_class(shell)
    assert complete is not None  # click registers all three shells
    # The variable the script sets when it calls botctl back: click's own convention.
    script = complete(ctx.find_root().command, {}, "botctl", "_BOTCTL_COMPLETE").source()
    click.echo(script)
    return EXIT_OK
