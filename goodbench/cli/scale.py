"""Flags for more than one engine instance (replicas behind a router, prefill/decode disaggregation)
and for GPU prices; shared by simulate, serve and sweep."""

from __future__ import annotations

import argparse

from .common import add_knob_args, knob_values


def add_cluster_args(p: argparse.ArgumentParser) -> None:
    """The instance flags, generated from ClusterSpec's fields (engine/layout.py), and --disaggregate P:D."""
    from ..engine.layout import ClusterSpec

    g = p.add_argument_group("instances (replicas, prefill/decode disaggregation)")
    g.add_argument(
        "--disaggregate",
        metavar="P:D",
        help="P prefill-only and D decode-only instances; the KV cache moves between them",
    )
    add_knob_args(g, ClusterSpec)


def add_price_args(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("cost")
    g.add_argument(
        "--gpu-price",
        metavar="GPU=USD,...",
        help="$ per GPU-hour, overriding the built-in table (`goodbench engine prices`), e.g. h100-sxm=2.5,l4=0.8",
    )
    g.add_argument(
        "--price-file", metavar="FILE", help="$ per GPU-hour from a TOML (gpu = usd) or CSV (gpu,usd_per_hour) file"
    )
    g.add_argument(
        "--electricity-price",
        type=float,
        metavar="USD_PER_KWH",
        help="$ per kWh: the energy block prices the GPUs' energy per million good tokens (default: not priced)",
    )
    g.add_argument(
        "--facility-factor",
        type=float,
        default=1.0,
        help="the facility's energy over the GPUs' (PUE: cooling, power delivery, the rest), e.g. 1.3 (default 1.0)",
    )


def cluster_spec(args):
    """The instance flags as an engine.layout.ClusterSpec (validated)."""
    from ..engine.layout import ClusterSpec, parse_disaggregate

    p, d = parse_disaggregate(args.disaggregate)
    spec = ClusterSpec(prefill=p, decode=d, **knob_values(args, ClusterSpec))
    spec.check()
    return spec


def electricity(args) -> dict | None:
    """--electricity-price and --facility-factor as the energy block's cost inputs (None: not priced)."""
    if getattr(args, "electricity_price", None) is None:
        return None
    return {"usd_per_kwh": args.electricity_price, "facility_factor": args.facility_factor}


def prices(args) -> dict[str, float]:
    from ..api.enginefiles import load_price_file
    from ..engine.prices import parse_overrides

    out = load_price_file(args.price_file) if args.price_file else {}
    return out | parse_overrides(args.gpu_price)
