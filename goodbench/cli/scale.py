"""Flags for more than one engine instance (replicas behind a router, prefill/decode disaggregation)
and for GPU prices; shared by simulate, serve and sweep."""

from __future__ import annotations

import argparse


def add_cluster_args(p: argparse.ArgumentParser) -> None:
    from ..engine.links import LINKS
    from ..engine.router import ROUTERS

    g = p.add_argument_group("instances (replicas, prefill/decode disaggregation)")
    g.add_argument("--replicas", type=int, default=1, help="identical engine instances behind a router (default 1)")
    g.add_argument("--router", choices=ROUTERS, default="least-outstanding",
                   help="how requests pick a replica or prefill instance (default least-outstanding)")
    g.add_argument("--disaggregate", metavar="P:D",
                   help="P prefill-only and D decode-only instances; the KV cache moves between them")
    g.add_argument("--prefill-gpu", help="GPU tier of the prefill instances (default --gpu)")
    g.add_argument("--decode-gpu", help="GPU tier of the decode instances (default --gpu)")
    g.add_argument("--prefill-tp", type=int, help="tensor parallelism of a prefill instance (default -tp)")
    g.add_argument("--decode-tp", type=int, help="tensor parallelism of a decode instance (default -tp)")
    g.add_argument("--kv-link", choices=("auto",) + tuple(LINKS), default="auto",
                   help="link the KV cache crosses (default auto: NVLink within one node of one NVLink tier, "
                   "else InfiniBand, PCIe between boards without NVLink)")
    g.add_argument("--layerwise-kv", action="store_true",
                   help="send each layer's KV while the next layers compute (overlaps transfer with prefill)")


def add_price_args(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("cost")
    g.add_argument("--gpu-price", metavar="GPU=USD,...", help="$ per GPU-hour, overriding the built-in table "
                   "(`goodbench engine prices`), e.g. h100-sxm=2.5,l4=0.8")
    g.add_argument("--price-file", metavar="FILE", help="$ per GPU-hour from a TOML (gpu = usd) or CSV (gpu,usd_per_hour) file")


def cluster_spec(args):
    """The instance flags as an engine.cluster.ClusterSpec (validated)."""
    from ..engine.cluster import ClusterSpec, parse_disaggregate

    p, d = parse_disaggregate(args.disaggregate)
    spec = ClusterSpec(replicas=args.replicas, prefill=p, decode=d, prefill_gpu=args.prefill_gpu,
                       decode_gpu=args.decode_gpu, prefill_tp=args.prefill_tp, decode_tp=args.decode_tp,
                       router=args.router, kv_link=args.kv_link, layerwise=args.layerwise_kv)
    spec.check()
    return spec


def prices(args) -> dict[str, float]:
    from ..engine.prices import load_price_file, parse_overrides

    out = load_price_file(args.price_file) if args.price_file else {}
    return out | parse_overrides(args.gpu_price)
