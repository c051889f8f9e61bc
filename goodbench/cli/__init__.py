"""Command line: each command module parses, calls one library function (goodbench.api), renders and
returns an exit code. Nothing imports this package.

Exit codes: 0 ok; 1 an SLO gate failed; 2 bad input or unreachable target; 130 interrupted. A
GoodbenchError is printed as one line; any other exception is a bug and keeps its traceback."""

from __future__ import annotations

import argparse
import sys

from . import analysis, engine, gate, run, simulate, sweep
from .common import EXIT_INTERRUPTED, EXIT_USAGE


def make_parser() -> argparse.ArgumentParser:
    from ..version import __version__

    p = argparse.ArgumentParser(prog="goodbench", description="Goodput benchmarking for LLM serving: how many "
                                "requests per second a server delivers inside its latency SLO.")
    p.add_argument("--version", action="version", version=f"goodbench {__version__}")
    sub = p.add_subparsers(dest="cmd", required=True, metavar="COMMAND")
    run.add_parser(sub)
    simulate.add_parser(sub)
    gate.add_parser(sub)
    sweep.add_parser(sub)
    analysis.add_parsers(sub)
    sweep.add_advise_parser(sub)
    engine.add_serve_parser(sub)
    engine.add_engine_parser(sub)
    return p


def main(argv: list[str] | None = None) -> int:
    from ..errors import GoodbenchError

    from ..limits import check_all

    args = make_parser().parse_args(argv)
    try:
        check_all(vars(args))  # every numeric flag against its range, before any work
        return args.fn(args)
    except GoodbenchError as e:
        print(f"goodbench: error: {e}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("goodbench: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED


if __name__ == "__main__":
    sys.exit(main())
