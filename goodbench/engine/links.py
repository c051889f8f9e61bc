"""Links a KV cache crosses between a prefill and a decode instance, and the time it takes.

Bandwidths are per direction, per GPU. Sources: NVLink 4 is 900 GB/s bidirectional per H100 SXM
(450 per direction; NVIDIA's H100 datasheet, llm-analysis h100-sxm-80gb.json intra-node 450 GB/s), NVLink 3
600 GB/s on A100 SXM (300 per direction); InfiniBand NDR is 400 Gb/s per ConnectX-7 port (50 GB/s),
HDR 200 Gb/s (25 GB/s), one NIC per GPU as in DGX/HGX nodes; PCIe 4.0 x16 is 32 GB/s per direction,
5.0 x16 64 GB/s. Achievable fraction 0.8 and per-transfer latencies (NVLink 10 us, InfiniBand 20 us,
PCIe 30 us, transfer-engine software included) are UNVERIFIED assumptions."""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import UsageError
from .hardware import get_gpu


@dataclass(frozen=True)
class Link:
    name: str
    gbs: float  # GB/s per direction per GPU
    latency_s: float
    source: str

    @property
    def bytes_per_s(self) -> float:
        return self.gbs * 1e9 * LINK_EFFICIENCY


LINK_EFFICIENCY = 0.8  # UNVERIFIED: RDMA/NVLink copies of paged KV blocks
LINKS: dict[str, Link] = {
    k.name: k
    for k in (
        Link("nvlink4", 450, 10e-6, "NVLink 4: 900 GB/s bidirectional per H100/H200 SXM"),
        Link("nvlink3", 300, 10e-6, "NVLink 3: 600 GB/s bidirectional per A100 SXM"),
        Link("ib-ndr", 50, 20e-6, "InfiniBand NDR 400 Gb/s, one ConnectX-7 per GPU"),
        Link("ib-hdr", 25, 20e-6, "InfiniBand HDR 200 Gb/s, one ConnectX-6 per GPU"),
        Link("pcie5", 64, 30e-6, "PCIe 5.0 x16, per direction"),
        Link("pcie4", 32, 30e-6, "PCIe 4.0 x16, per direction"),
    )
}


def default_link(prefill_gpu: str, decode_gpu: str, gpus_total: int) -> Link:
    """Same NVLink tier and at most 8 GPUs in all: one node, NVLink. Otherwise InfiniBand NDR between
    nodes (HDR for A100-era tiers), or PCIe between boards without NVLink in one host."""
    p, d = get_gpu(prefill_gpu), get_gpu(decode_gpu)
    if p.name == d.name and p.nvlink and gpus_total <= 8:
        return LINKS["nvlink4" if p.interconnect_gbs >= 450 else "nvlink3"]
    if not p.nvlink and not d.nvlink and gpus_total <= 8:
        return LINKS["pcie4"]
    return LINKS["ib-hdr" if p.name.startswith("a100") or d.name.startswith("a100") else "ib-ndr"]


def get_link(name: str | None, prefill_gpu: str, decode_gpu: str, gpus_total: int) -> Link:
    if not name or name == "auto":
        return default_link(prefill_gpu, decode_gpu, gpus_total)
    try:
        return LINKS[name.lower()]
    except KeyError:
        raise UsageError(f"unknown KV link {name!r}; known: auto, {', '.join(LINKS)}") from None


def transfer_s(
    kv_bytes: float, link: Link, tp: int = 1, layers: int = 1, prefill_s: float = 0.0, layerwise: bool = False
) -> float:
    """Time from the end of the prefill until the decode instance holds the whole KV cache. Each of the
    TP ranks sends its shard over its own link. With layer-wise pipelining, layer l's KV is sent while
    layers l+1.. are computed: what remains after the prefill is the larger of one layer's share and
    the part of the transfer the prefill could not hide."""
    whole = kv_bytes / (link.bytes_per_s * max(1, tp))
    if layerwise and layers > 1:
        whole = max(whole / layers, whole - prefill_s * (layers - 1) / layers)
    return link.latency_s + whole
