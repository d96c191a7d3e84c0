"""The dflashctl command line: each command parses arguments, calls one domain function, renders.

Wiring only. Domain modules return data and raise `DflashError`s; `main()` turns those into a
one-line error, a hint and exit code 2 (`DFLASHCTL_DEBUG=1` shows the traceback). Heavy imports
(torch, huggingface_hub, paramiko, fastapi) happen inside the commands that need them, so
`dflashctl --help` stays fast.
"""

from __future__ import annotations

import contextlib
import errno
import os
import sys
from typing import Annotated

import typer

from dflashctl import __version__
from dflashctl.commands.alerts import command as alerts
from dflashctl.commands.bench import command as bench
from dflashctl.commands.dashboard import command as dashboard
from dflashctl.commands.demo import command as demo
from dflashctl.commands.diagnose import command as diagnose
from dflashctl.commands.doctor import command as doctor
from dflashctl.commands.environment import epilog
from dflashctl.commands.fetch import command as fetch
from dflashctl.commands.help_text import Command, Group
from dflashctl.commands.install import command as install
from dflashctl.commands.metrics import command as metrics
from dflashctl.commands.run import command as run
from dflashctl.commands.serve import command as serve
from dflashctl.commands.smoke import command as smoke
from dflashctl.commands.tune import command as tune
from dflashctl.commands.verify_config import command as verify_config
from dflashctl.console import error
from dflashctl.errors import DflashError

app = typer.Typer(
    name="dflashctl",
    cls=Group,
    help="Deploy and diagnose DFlash speculative decoding.",
    no_args_is_help=True,
    rich_markup_mode="rich",
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
    add_completion=True,
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"dflashctl {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="Show the version.")
    ] = False,
) -> None:
    """Deploy and diagnose DFlash speculative decoding: pinned drafters, config checks, a bundled
    engine, smoke tests and acceptance alarms.

    Exit codes: 0 healthy, 1 a problem was found, 2 could not run.
    """
    from dflashctl.hosts import set_command_ssh

    set_command_ssh()  # no SSH options left over from an earlier command in this process


# Every command: its module under dflashctl/commands/<verb>/command.py; its --help ends with
# the environment variables it reads (commands/environment.py).
app.command("verify-config", cls=Command, epilog=epilog("verify-config"))(
    verify_config.verify_config
)
app.command(cls=Command, epilog=epilog("fetch"))(fetch.fetch)
# serve takes a `vllm serve` line as it is: options it does not know are the engine's
app.command(cls=Command, epilog=epilog("serve", serve.EPILOG), context_settings=serve.CONTEXT)(
    serve.serve
)
for name, fn in (
    ("stop", serve.stop),
    ("status", serve.status),
    ("smoke", smoke.smoke),
    ("metrics", metrics.metrics),
    ("bench", bench.bench),
    ("run", run.run),
    ("demo", demo.demo),
    ("doctor", doctor.doctor),
    ("diagnose", diagnose.diagnose),
    ("install", install.install),
    ("alerts", alerts.alerts),
    ("dashboard", dashboard.dashboard),
    ("tune", tune.tune),
):
    app.command(name, cls=Command, epilog=epilog(name))(fn)


def _wants_json(argv: list[str]) -> bool:
    """`--json` among dflashctl's own arguments (not the engine's, after `--`)."""
    args = argv[1:]
    if "--" in args:
        args = args[: args.index("--")]
    return "--json" in args


def _json_error(message: str, hint: str | None) -> None:
    """The error as JSON on stdout, unless stdout itself is what failed (a full disk, a closed
    pipe): then stderr's one line is all there is."""
    from dflashctl.console import emit_json

    with contextlib.suppress(OSError):
        emit_json({"ok": False, "error": message, "hint": hint})


# Errors the file system or the machine raise for any path or write (a name over NAME_MAX, a
# component that is a file, a link loop, a full or read-only disk): never a bug, always exit 2.
ENVIRONMENT_ERRNOS = frozenset(
    {
        errno.ENAMETOOLONG,
        errno.ENOTDIR,
        errno.ELOOP,
        errno.ENOSPC,
        errno.EFBIG,
        errno.EDQUOT,
        errno.EROFS,
        errno.EIO,
        errno.EACCES,
    }
)


def main() -> None:
    """Console-script entry point: one-line errors with a hint, exit 2 on DflashError (and on
    the file-system errors of ENVIRONMENT_ERRNOS that escaped a more specific message). With
    `--json` the error is also `{"ok": false, "error": …, "hint": …}` on stdout, so `| jq`
    always gets JSON (bad arguments included)."""
    as_json = _wants_json(sys.argv)
    try:
        if not as_json:
            app()
            return
        from typer._click.exceptions import ClickException

        try:
            rv = app(standalone_mode=False)
        except ClickException as e:
            command = next((a for a in sys.argv[1:] if not a.startswith("-")), None)
            _json_error(
                e.format_message(), f"see dflashctl {command or ''} --help".replace("  ", " ")
            )
            error(e.format_message())
            sys.exit(e.exit_code)
        sys.exit(rv if isinstance(rv, int) else 0)
    except DflashError as e:
        if os.environ.get("DFLASHCTL_DEBUG"):
            raise
        from dflashctl.http_body import redact

        # a password in a URL (user:secret@host) never reaches the terminal, whoever raised
        message, hint = redact(e.message), redact(e.hint) if e.hint else None
        if as_json:
            _json_error(message, hint)
        error(message, hint)
        sys.exit(e.exit_code)
    except OSError as e:
        if os.environ.get("DFLASHCTL_DEBUG") or e.errno not in ENVIRONMENT_ERRNOS:
            raise
        where = f"{e.filename}: " if e.filename else ""
        if as_json:
            _json_error(f"{where}{os.strerror(e.errno or 0)}", None)
        error(f"{where}{os.strerror(e.errno or 0)}")
        sys.exit(2)
    except KeyboardInterrupt:
        error("interrupted")
        sys.exit(130)


if __name__ == "__main__":
    main()
