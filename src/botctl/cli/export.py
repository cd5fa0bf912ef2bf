"""``botctl export``."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import click

from botctl.cli.console import err, run_async
from botctl.cli.options import (
    API_URL,
    CONFIG,
    LOCK_TIMEOUT,
    STATE,
    BoundsGroup,
    FoundProject,
    group,
    request_bounds,
    takes,
)
from botctl.defaults import DEFAULT_API_KEY_ENV
from botctl.errors import EXIT_OK


@dataclass(frozen=True, kw_only=True)
class ExportOptions:
    chatbot_ids: tuple[str, ...]
    export_all: bool
    out: Path | None
    api_key_env: str
    api_url: str | None
    config_file: FoundProject  # for apiUrl and state
    sandbox: bool
    state_path: str
    lock_timeout: float
    bounds: BoundsGroup = group(BoundsGroup)


@click.command()
@click.argument("chatbot_ids", nargs=-1)
@click.option("--all", "export_all", is_flag=True, help="Every chatbot of the key's account.")
@click.option(
    "--out",
    type=click.Path(path_type=Path, file_okay=False),
    help="Write one DIR/<name>.yaml per chatbot (never overwrites); default: standard output.",
)
@click.option(
    "--api-key-env",
    default=DEFAULT_API_KEY_ENV,
    show_default=True,
    metavar="NAME",
    help="Environment variable holding the account's API key.",
)
@API_URL
@CONFIG
@click.option("--sandbox", is_flag=True, help="Export from the embedded sandbox.")
@STATE
@LOCK_TIMEOUT
@request_bounds
@takes(ExportOptions)
def export(o: ExportOptions) -> int:
    """Write YAML for existing chatbots from what the service lets botctl read: adoption.

    Settings that cannot be read are listed in a comment of each document. With --out, the
    values read are also recorded in the state as each chatbot's verified baseline, so
    `botctl drift` on the written files starts clean. Review, then commit: from there on,
    botctl manages what the documents declare.

    With --out, the configuration repository (botctl.yaml's directory; else the git work
    tree DIR is in; else DIR's parent) also gets what `botctl init` would give it of this:
    schemas/botctl.schema.json, which each document's first line names (editors check it
    offline), and ".botctl/" in its .gitignore (the local state's key file never reaches
    git). Neither is overwritten; each is said.

    \b
    Examples:
      botctl export --all --out bots/          # adopt every chatbot of the account
      botctl export ckl123abc456               # print one document
    """
    from botctl.cli.init import outcome_line
    from botctl.config.export import export_documents, with_schema
    from botctl.pipeline.flows import read_for_export, record_export, write_exported
    from botctl.pipeline.scaffold import (
        documents_schema,
        ignore_local_files,
        repository_root,
        schema_hint,
    )
    from botctl.service.options import ServiceOptions

    chatbot_ids, api_key_env, out, state_path = o.chatbot_ids, o.api_key_env, o.out, o.state_path
    if bool(chatbot_ids) == o.export_all:
        raise click.UsageError("give CHATBOT_ID... or --all (not both)")
    project = o.config_file.get()  # a broken botctl.yaml is an error, as for every command
    options = ServiceOptions(
        api_url=o.api_url,
        sandbox=o.sandbox,
        timeout=o.bounds.request_timeout,
        max_response_bytes=o.bounds.max_response_bytes,
        retry_base_delay=o.bounds.retry_base_delay,
    )
    bots, names = run_async(
        read_for_export(
            list(chatbot_ids), api_key_env, os.environ, options, lambda m: err(f"warning: {m}")
        )
    )
    exported = export_documents(bots, names, api_key_env)
    if out is None:
        click.echo("---\n".join(doc.text for doc in exported), nl=False)
        err("The state was not changed: with --out, export also records each chatbot's baseline.")
        return EXIT_OK
    root = repository_root(project.root if project is not None else None, out)
    exported = [with_schema(doc, schema_hint(root, out)) for doc in exported]
    for path in write_exported(out, exported):
        click.echo(f"wrote {path}")
    # Before the state (whose key file may be made now): .botctl/ is ignored by then.
    for outcome in (documents_schema(root), ignore_local_files(root)):
        click.echo(outcome_line(outcome))
    record_export(state_path, o.lock_timeout, exported, api_key_env)
    from botctl.store.backends import describe

    click.echo(f"recorded the baseline of {len(exported)} chatbot(s) in {describe(state_path)}")
    return EXIT_OK
