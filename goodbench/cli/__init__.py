"""Command line: each command module parses, calls one library function (goodbench.api), renders and
returns an exit code. Nothing imports this package.

Exit codes: 0 ok; 1 an SLO gate failed; 2 bad input or unreachable target; 130 interrupted. A
GoodbenchError is printed as one line; any other exception is a bug and keeps its traceback."""

from __future__ import annotations

import argparse
import difflib
import sys

from . import analysis, calibrate, catalog, engine, gate, history, run, simulate, sweep
from .common import EXIT_INTERRUPTED, EXIT_USAGE


class Parser(argparse.ArgumentParser):
    """argparse with a short error: the message, then the full usage only when it is short (a subcommand
    with forty flags points to its --help instead of printing them all)."""

    def error(self, message: str):
        usage = self.format_usage()
        self.exit(
            2,
            (usage if usage.count("\n") <= 4 else f"usage: {self.prog} ... (see {self.prog} --help)\n")
            + f"{self.prog}: error: {message}\n",
        )


def make_parser() -> argparse.ArgumentParser:
    from ..version import __version__

    p = Parser(
        prog="goodbench",
        description="Goodput benchmarking for LLM serving: how many "
        "requests per second a server delivers inside its latency SLO.",
    )
    p.add_argument("--version", action="version", version=f"goodbench {__version__}")
    sub = p.add_subparsers(dest="cmd", required=True, metavar="COMMAND")
    run.add_parser(sub)
    simulate.add_parser(sub)
    gate.add_parser(sub)
    sweep.add_parser(sub)
    analysis.add_parsers(sub)
    history.add_parsers(sub)
    sweep.add_advise_parser(sub)
    engine.add_serve_parser(sub)
    engine.add_fleet_parser(sub)
    engine.add_engine_parser(sub)
    calibrate.add_parser(sub)
    catalog.add_parsers(sub)
    return p


def _chosen(parser: argparse.ArgumentParser, args) -> argparse.ArgumentParser:
    """The (sub)command parser the arguments selected, e.g. `engine explain`'s."""
    while parser._subparsers is not None:
        action = next(a for a in parser._subparsers._group_actions if isinstance(a, argparse._SubParsersAction))
        name = getattr(args, action.dest, None)
        if name not in action.choices:
            break
        parser = action.choices[name]
    return parser


def suggestions(parser: argparse.ArgumentParser, unknown: list[str]) -> str:
    """'; did you mean --request-rate?' for each unknown flag close to one this parser has."""
    known = [o for a in parser._actions for o in a.option_strings if a.help != argparse.SUPPRESS]
    hints = []
    for tok in unknown:
        if tok.startswith("-"):
            close = difflib.get_close_matches(tok.split("=")[0], known, n=1, cutoff=0.6)
            if close:
                hints.append(f"{tok.split('=')[0]} -> did you mean {close[0]}?")
    return ("; " + "; ".join(hints)) if hints else ""


def parse(argv: list[str] | None = None):
    """Parse like argparse, but an unknown flag is reported by the subcommand that got it (its usage, not
    the top-level one) with the closest flag it has."""
    parser = make_parser()
    args, unknown = parser.parse_known_args(argv)
    if unknown:
        sub = _chosen(parser, args)
        sub.error(f"unrecognized arguments: {' '.join(unknown)}{suggestions(sub, unknown)}")
    return args


def _show_warnings() -> None:
    """A GoodbenchWarning is one line on stderr, as an error is; other warnings as Python shows them."""
    import warnings

    from ..errors import GoodbenchWarning

    shown = warnings.showwarning

    def show(message, category, filename, lineno, file=None, line=None):
        if issubclass(category, GoodbenchWarning):
            print(f"goodbench: warning: {message}", file=sys.stderr, flush=True)
        else:
            shown(message, category, filename, lineno, file, line)

    warnings.showwarning = show
    warnings.simplefilter("always", GoodbenchWarning)


def main(argv: list[str] | None = None) -> int:
    from ..errors import GoodbenchError
    from ..limits import check_all
    from ..proctree import sigterm_interrupts

    args = parse(argv)
    _show_warnings()
    with sigterm_interrupts():  # SIGTERM is a Ctrl-C: what finished is summarized, exit 130
        try:
            check_all(vars(args))  # every numeric flag against its range, before any work
            return args.fn(args)
        except GoodbenchError as e:
            _summary_of_what_was_kept(e)
            print(f"goodbench: error: {e}", file=sys.stderr)
            return EXIT_USAGE
        except KeyboardInterrupt:
            print("goodbench: interrupted", file=sys.stderr)
            return EXIT_INTERRUPTED


def _summary_of_what_was_kept(e) -> None:
    """A run whose results could not all be written (a full disk) still shows what it measured."""
    summary = getattr(e, "summary", None)
    if summary:
        from ..report.console import print_summary
        from .common import console

        print_summary(console(), summary)


if __name__ == "__main__":
    sys.exit(main())
