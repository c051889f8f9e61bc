"""goodbench's options on locust's own command line (each with an environment variable; a master
forwards them to its workers). Imported by integrations/locust.py, which locust alone imports."""

from __future__ import annotations

import json

from locust import events


@events.init_command_line_parser.add_listener
def _arguments(parser) -> None:
    g = parser.add_argument_group("goodbench")
    g.add_argument(
        "--goodbench-workload",
        env_var="GOODBENCH_WORKLOAD",
        default="",
        help="a goodbench workload TOML file or a built-in workload's name, e.g. hol-stress "
        "(default: 1024-token prompts, 128 out)",
    )
    g.add_argument(
        "--goodbench-spec-json", env_var="GOODBENCH_SPEC_JSON", default="", help="(internal) workload as JSON"
    )
    g.add_argument(
        "--goodbench-server-json",
        env_var="GOODBENCH_SERVER_JSON",
        default="",
        help="(internal) what the target said about itself, asked by `goodbench run --via locust`",
    )
    g.add_argument(
        "--goodbench-model",
        env_var="GOODBENCH_MODEL",
        default="",
        help="model name sent in requests (default: the server's first /v1/models entry)",
    )
    g.add_argument(
        "--goodbench-endpoint",
        env_var="GOODBENCH_ENDPOINT",
        default="",
        help="API path (default: the workload's, /v1/completions)",
    )
    g.add_argument("--goodbench-slo", env_var="GOODBENCH_SLO", default="", help='SLO, e.g. "ttft:500 tpot:50"')
    g.add_argument(
        "--goodbench-min-attainment",
        env_var="GOODBENCH_MIN_ATTAINMENT",
        type=float,
        default=0.95,
        help="exit 1 when SLO attainment is below this (default 0.95)",
    )
    g.add_argument(
        "--goodbench-result-dir",
        env_var="GOODBENCH_RESULT_DIR",
        default="results",
        help="parent folder of the results directory (default results)",
    )
    g.add_argument("--goodbench-run-id", env_var="GOODBENCH_RUN_ID", default="", help="results directory name")
    g.add_argument(
        "--goodbench-open-loop",
        env_var="GOODBENCH_OPEN_LOOP",
        action="store_true",
        default=False,
        help="take send times from the workload's arrival schedule (default: closed loop, "
        "locust's model, which hides queueing)",
    )
    g.add_argument(
        "--goodbench-api-key-env",
        env_var="GOODBENCH_API_KEY_ENV",
        default="OPENAI_API_KEY",
        help="environment variable holding the API key",
    )


def server_block(o) -> dict | None:
    """run.json's server block from --goodbench-server-json (None: not given, or not an object)."""
    try:
        info = json.loads(o.goodbench_server_json or "null")
    except ValueError:
        return None
    return info if isinstance(info, dict) and info else None
