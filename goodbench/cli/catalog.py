"""`goodbench workloads [NAME]` and `goodbench locustfile`: what ships inside the package, for users of a
pip install who have no checkout of the repository."""

from __future__ import annotations

from .common import EXIT_OK, console


def add_parsers(sub) -> None:
    p = sub.add_parser(
        "workloads",
        help="list the built-in workloads (usable by name: --workload hol-stress)",
        description="The workload files that ship with goodbench. Any command takes one by name "
        "(--workload hol-stress) as it takes a file; `goodbench workloads NAME` prints one, to copy "
        "and edit: goodbench workloads hol-stress > my-workload.toml",
    )
    p.add_argument("name", nargs="?", metavar="NAME", help="print this workload's TOML file")
    p.set_defaults(fn=cmd_workloads)
    lf = sub.add_parser(
        "locustfile",
        help="print the path of the locustfile that ships with goodbench",
        description='For locust without a checkout: locust -f "$(goodbench locustfile)" '
        "--headless -u 32 -r 8 -t 60s --host http://127.0.0.1:8000 --goodbench-workload "
        'mixed-long-short --goodbench-slo "ttft:500 tpot:50"',
    )
    lf.set_defaults(fn=cmd_locustfile)


def cmd_workloads(args) -> int:
    from ..errors import InputError
    from ..report.tables import workloads_table
    from ..workloads import catalog

    if args.name:
        name = catalog.builtin_name(args.name)
        if name is None:
            raise InputError(f"no built-in workload {args.name!r}{catalog.missing_file_hint(args.name)}")
        print(catalog.read(name)[0], end="")
        return EXIT_OK
    con = console()
    con.print(workloads_table(catalog.catalogue()))
    con.print(
        "  use one by name: goodbench simulate --workload hol-stress; print one to edit: "
        "goodbench workloads hol-stress > my.toml",
        style="dim",
    )
    return EXIT_OK


def cmd_locustfile(args) -> int:
    from ..runner.via_locust import LOCUSTFILE

    print(LOCUSTFILE)
    return EXIT_OK
