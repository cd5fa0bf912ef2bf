"""Terminal helpers shared by the command modules (the only modules that print)."""

from __future__ import annotations

import contextlib
import os
import select
import signal
import sys
import threading
from collections.abc import Coroutine, Iterable, Iterator
from types import FrameType
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

import click

from botctl.annotations import inert
from botctl.errors import Interrupted

if TYPE_CHECKING:
    import asyncio

    from botctl.reconcile.apply import OpResult, Stop

T = TypeVar("T")


def colour_enabled(stream: Any = None) -> bool:
    """Colour only on a terminal, and never with NO_COLOR (https://no-color.org)."""
    stream = stream or sys.stdout
    return "NO_COLOR" not in os.environ and hasattr(stream, "isatty") and stream.isatty()


def err(message: str) -> None:
    """A message on stderr; text in it from the service or the YAML (an error's words, a
    chatbot's name) carries no terminal escape sequence or CI runner command
    (``annotations.inert``)."""
    click.echo(inert(message), err=True)


def print_warnings(warnings: Iterable[str]) -> None:
    for warning in warnings:
        already = warning.startswith("warning") or ": warning" in warning
        err(warning if already else f"warning: {warning}")


def run_async(coro: Coroutine[Any, Any, T], *, stop: Stop | None = None, unwritten: str = "") -> T:
    """``asyncio.run``, with SIGINT and SIGTERM handled, and the result handed over outside
    the main task.

    Until ``stop`` is armed (writing has begun), the first SIGINT or SIGTERM interrupts the
    run where it is, as Ctrl-C does by default (the state lock and files are released on the
    way out), and it ends with ``Interrupted`` (exit 128 + the signal), saying ``unwritten``;
    signals while it unwinds are ignored. Once armed, every signal is a request to ``stop``:
    the first ends the run gracefully, the next at once (see ``reconcile.apply.Stop``).

    On its way out, ``asyncio.run`` restores the SIGINT handler, and CPython formats the
    replaced handler, which holds the finished main task, with ``repr``: the task's result
    with it, which for a large plan is expensive (see README, Benchmarks)."""
    import asyncio  # here: `--help` and `validate` never need an event loop

    results: list[T] = []
    signals = _Signals(stop)

    async def main() -> None:
        signals.loop = loop = asyncio.get_running_loop()
        if wakeup is not None:
            # The loop's wait ends when a signal arrives, even one that came just before it
            # began waiting (its handler then runs, in the callback, at once).
            loop.add_reader(wakeup, _drain, wakeup)
        try:
            results.append(await coro)
        except KeyboardInterrupt:
            if signals.first is None:
                raise
            # Ours, and the run unwound to here (locks released): end without a result, and
            # without leaving asyncio an exception to report about this task.
        finally:
            if wakeup is not None:
                loop.remove_reader(wakeup)

    try:
        with signals.handled(), _signal_wakeup() as wakeup:
            asyncio.run(main())
    except (KeyboardInterrupt, asyncio.CancelledError, click.exceptions.Abort):
        if signals.first is None:
            raise
        raise Interrupted(signals.first, unwritten) from None
    if not results:
        assert signals.first is not None
        raise Interrupted(signals.first, unwritten)
    return results[0]


def confirm_prompt(question: str, *, default: bool = False) -> bool:
    """``click.confirm``'s question and answers (y/yes, n/no, Enter for ``default``; end of
    input aborts), but read so that a signal always interrupts it.

    ``click.confirm`` reads with ``input()``, which blocks in C: a signal that lands after the
    question is written but before the read begins only marks the Python-level handler as
    due, and the read then waits for a line that may never come (Ctrl-C at the prompt left
    botctl hanging). Here the wait is a ``select`` on the terminal and a signal wakeup pipe
    (``signal.set_wakeup_fd``), which the C-level handler writes to whenever the signal
    arrives, so the wait ends and the handler runs (and, in ``run_async``, interrupts the
    run)."""
    if os.name != "posix":  # select waits on sockets only there
        return click.confirm(question, default=default)
    stdin = sys.stdin.fileno()
    while True:
        click.echo(f"{question} [{'Y/n' if default else 'y/N'}]: ", nl=False)
        with _signal_wakeup() as wakeup:
            line = _read_line(stdin, wakeup)
        if line is None:  # end of input (Ctrl-D), as click.confirm
            click.echo()
            raise click.exceptions.Abort()
        answer = line.decode(errors="replace").strip().lower()
        if answer in ("y", "yes"):
            return True
        if answer in ("n", "no"):
            return False
        if not answer:
            return default
        click.echo("Error: invalid input", err=True)


def _read_line(fd: int, wakeup: int | None) -> bytes | None:
    """One line from ``fd`` (None at end of input), waiting also on ``wakeup``: the Python
    signal handlers run as soon as it is readable (a signal arrived)."""
    watched = [fd] if wakeup is None else [fd, wakeup]
    data = b""
    while not data.endswith(b"\n"):
        ready = select.select(watched, [], [])[0]
        if wakeup is not None and wakeup in ready:
            _drain(wakeup)  # the handler runs here (or already ran): it may raise
        if fd in ready:
            chunk = os.read(fd, 1024)
            if not chunk:
                return data or None
            data += chunk
    return data


@contextlib.contextmanager
def _signal_wakeup() -> Iterator[int | None]:
    """A pipe the C-level signal handler writes a byte to whenever a signal arrives (yields
    its read end), for the span of the block; None outside the main thread (where signals
    are not handled). The previous wakeup descriptor is restored after."""
    if os.name != "posix" or threading.current_thread() is not threading.main_thread():
        yield None
        return
    read_end, write_end = os.pipe()
    try:
        for fd in (read_end, write_end):
            os.set_blocking(fd, False)
        previous = signal.set_wakeup_fd(write_end, warn_on_full_buffer=False)
        try:
            yield read_end
        finally:
            signal.set_wakeup_fd(previous)
    finally:
        os.close(read_end)
        os.close(write_end)


def _drain(fd: int) -> None:
    with contextlib.suppress(BlockingIOError):
        while os.read(fd, 512):
            pass


class _Signals:
    """SIGINT and SIGTERM for one run (see ``run_async``). A Python-level handler rather than
    the event loop's: it must also break a blocking wait (the confirmation prompt, a lock
    wait), which only an exception raised in the main thread does. Such a handler runs only
    once the main thread is back in Python code: every wait in a run therefore also watches
    a signal wakeup pipe (``_signal_wakeup``), or is short (the lock's polling)."""

    SIGNALS = (signal.SIGINT, signal.SIGTERM)

    def __init__(self, stop: Stop | None) -> None:
        self.stop = stop
        self.loop: asyncio.AbstractEventLoop | None = None
        self.first: int | None = None

    @contextlib.contextmanager
    def handled(self) -> Iterator[None]:
        if threading.current_thread() is not threading.main_thread():
            yield  # signals are delivered to the main thread only: nothing to handle
            return
        previous = {sig: signal.signal(sig, self._received) for sig in self.SIGNALS}
        try:
            yield
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)

    def _received(self, signum: int, frame: FrameType | None) -> None:
        interrupting = self.first is None
        if interrupting:
            self.first = signum
        if self.stop is not None and self.stop.armed and self.loop is not None:
            with contextlib.suppress(RuntimeError):  # the loop closed meanwhile
                self.loop.call_soon_threadsafe(self.stop.request, signum)
            return
        if interrupting:
            raise _SignalInterrupt(signum)


class _SignalInterrupt(KeyboardInterrupt):
    """What the handler raises: a KeyboardInterrupt (asyncio and click treat it as one) of
    its own class, because CPython takes a bare one raised inside ``exec`` of a string (as
    ``dataclasses`` does while a module is imported) for an unhandled Ctrl-C, and then ends
    the process by SIGINT whatever exit code botctl chose."""


class Progress:
    """One line per completed operation (what CI logs keep); on a terminal, also a status line
    at the bottom that counts down what is left."""

    LABELS: ClassVar[dict[str, str]] = {
        "applied": "applied",
        "failed": "FAILED ",
        "not_attempted": "skipped",
    }

    def __init__(self, *, live: bool) -> None:
        self.live = live
        self.total = 0
        self.done = 0

    def line(self, result: OpResult) -> None:
        self.done += 1
        note = f": {result.message}" if result.message else ""
        self.note(f"{self.LABELS[result.status]}  {result.operation.label}{note}")

    def note(self, text: str) -> None:
        """A line between operations' lines (a rename's progress)."""
        prefix = "\r\x1b[K" if self.live else ""
        click.echo(f"{prefix}{inert(text)}")
        if self.live:
            click.echo(self._counted(), nl=False)

    def status(self, text: str) -> None:
        """The status line, with ``text`` after the count (waiting on the rate limit)."""
        if self.live:
            click.echo(f"\r\x1b[K{inert(self._counted(text))}", nl=False)

    def _counted(self, text: str = "") -> str:
        return f"  [{self.done}/{self.total}] applying..." + (f" {text}" if text else "")

    def finish(self) -> None:
        if self.live:
            click.echo("\r\x1b[K", nl=False)


class LimitWatch:
    """Shows when a run waits on the service's rate limit, and for how long: on a terminal a
    status line on stderr (that of ``progress`` when an apply shows one), elsewhere a line
    for each long wait (a window exhausted, a Retry-After) and every ``EVERY`` seconds of
    waiting; at the end, one line with the requests refused with 429 and the time waited.
    Waits for ``--rate-limit``'s own pace are not the service's limit: not shown."""

    LONG = 1.0  # a single wait this long is told at once
    EVERY = 10.0  # seconds of waiting between two lines off a terminal
    SHOWN = 0.05  # seconds of waiting on a key's limit worth the closing line

    def __init__(self, *, live: bool, clock: Any = None) -> None:
        import time

        from botctl.service.pacing import RequestStats

        self.live = live
        self.stats = RequestStats()
        self.progress: Progress | None = None
        self.clock = clock or time.monotonic
        self._until: dict[str, float] = {}
        self._waited = 0.0
        self._told = 0.0
        self._shown = False  # a status line of ours is on the terminal

    def wait(self, key: str, seconds: float, reason: str) -> None:
        if reason != "limit":
            return
        now = self.clock()
        until = self._until.get(key, now)
        self._waited += max(0.0, now + seconds - max(now, until))  # about: for the pace of lines
        self._until[key] = max(until, now + seconds)
        text = f"waiting {seconds:.1f} s on the rate limit of ${key}"
        if self.live:
            if self.progress is not None and self.progress.live:
                self.progress.status(text)
            else:
                click.echo(f"\r\x1b[K{inert(text)}", nl=False, err=True)
                self._shown = True
        elif seconds >= self.LONG or self._waited - self._told >= self.EVERY:
            self._told = self._waited
            err(text)

    def report(self) -> None:
        """The closing line, when the run met the limit at all."""
        if self._shown:
            click.echo("\r\x1b[K", nl=False, err=True)
        s = self.stats
        shown = {k: v for k, v in s.limit_wait.items() if v >= self.SHOWN}
        if not (s.rate_limited or shown):
            return
        waited = ", ".join(f"{v:.1f} s (${k})" for k, v in sorted(shown.items()))
        err(
            f"Requests: {s.total} sent, {s.failed} failed, {s.rate_limited} answered 429 "
            f"(rate limited); waited on the rate limit: {waited or 'never'}"
        )
