"""GPU tiers and model shapes: plain data with sources.

GPU figures are datasheet dense tensor-core numbers (sparse figures are twice these and are NOT used).
Sources, per entry below: llm-analysis gpu_configs (github.com/cli99/llm-analysis), PyTorch Lightning
`_CUDA_FLOPS`, NVIDIA/AMD datasheets; docs/engine.md summarises them.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import UsageError


@dataclass(frozen=True)
class GPU:
    name: str
    bf16_tflops: float  # dense
    fp8_tflops: float | None  # dense; None = no FP8 tensor cores
    mem_gib: float
    mem_bw_tbs: float  # TB/s
    hbm: bool  # HBM vs GDDR: sets the achievable bandwidth fraction
    interconnect_gbs: float  # per-GPU all-reduce bus bandwidth, GB/s (NVLink or PCIe)
    nvlink: bool
    source: str
    fp4_tflops: float | None = None  # dense FP4 (NVFP4 / MXFP4) tensor cores; None = none
    tdp_w: float | None = None  # board power limit (the energy model's ceiling)
    arch: str = ""  # ampere, ada, hopper, blackwell, blackwell-gddr, cdna3, cdna4: which measured MoE kernels apply

    @property
    def bandwidth(self) -> float:
        """Memory bandwidth in bytes per second."""
        return self.mem_bw_tbs * 1e12

    @property
    def ridge(self) -> float:
        """FLOP per byte where BF16 GEMMs turn compute-bound."""
        return self.bf16_tflops * 1e12 / self.bandwidth


AIC = "AIConfigurator (ai-dynamo/aiconfigurator@095f58a) systems/{}.yaml"
# name, BF16, FP8, FP4 TFLOPS (dense), memory GiB, TB/s, HBM, all-reduce GB/s, NVLink, TDP W, arch, source
_TIERS = (
    ("h100-sxm", 989, 1979, None, 80, 3.35, True, 450, True, 700, "hopper",
     "llm-analysis h100-sxm-80gb.json (989 TFLOPS, 3350 GB/s, 450 GB/s intra-node); Lightning 'h100 sxm' 989.4; "
     "NVIDIA datasheet 700 W"),
    ("h100-pcie", 756, 1513, None, 80, 2.0, True, 64, False, 350, "hopper",
     "llm-analysis h100-pcie-80gb.json (756, 2000 GB/s); Lightning 'h100 pcie' 756; PCIe5 x16 ~64 GB/s/dir; 350 W"),
    ("h200", 989, 1979, None, 141, 4.8, True, 450, True, 700, "hopper",
     "NVIDIA H200 datasheet: same compute as H100 SXM, 141 GB HBM3e at 4.8 TB/s, 700 W"),
    ("h20", 148, 296, None, 96, 4.0, True, 450, True, 400, "hopper",
     "H20 (96 GB HBM3; a 141 GB H20-3e exists): 148 dense BF16, 296 FP8, 4.0 TB/s, NVLink4 900 GB/s bidir, 400 W "
     "(willitrunai.com h20-96gb; no NVIDIA datasheet in public)"),
    ("a100-80g-sxm", 312, None, None, 80, 2.039, True, 300, True, 400, "ampere",
     "llm-analysis a100-sxm-80gb; LLM-Viewer A100_80G (2039e9 B/s, 312e12); 400 W"),
    ("a100-80g-pcie", 312, None, None, 80, 1.935, True, 32, False, 300, "ampere",
     "llm-analysis a100-pcie-80gb.json (312, 1935 GB/s); PCIe4 x16 ~32 GB/s/dir; 300 W"),
    ("a100-40g", 312, None, None, 40, 1.555, True, 300, True, 400, "ampere", "LLM-Viewer A100_40G (1555e9 B/s); 400 W"),
    ("l40s", 362, 733, None, 48, 0.864, False, 32, False, 350, "ada",
     "Lightning 'l40s' 362.05 (nvidia.com/en-us/data-center/l40s); 864 GB/s GDDR6; PCIe4, no NVLink; 350 W"),
    ("a10g", 70, None, None, 24, 0.6, False, 32, False, 300, "ampere",
     "llm-analysis a10g-pcie-24gb.json (70 TFLOPS, 600 GB/s); UNVERIFIED tensor rate (A10 is 125) and power"),
    ("l4", 121, 242.5, None, 24, 0.3, False, 32, False, 72, "ada",
     "Lightning 'l4' 121 (L4 datasheet); 300 GB/s GDDR6; 72 W"),
    ("rtx-6000-ada", 364, 728, None, 48, 0.96, False, 32, False, 300, "ada",
     "Ada whitepaper values (UNVERIFIED here): ~364 dense BF16 with FP32 accumulate, 960 GB/s; 300 W"),
    ("rtx-pro-6000", 467.8, 935.6, 1871, 95.6, 1.792, False, 64, False, 600, "blackwell-gddr",
     AIC.format("rtx_pro_6000_server") + ": RTX PRO 6000 Blackwell Server Edition, rates at 2,430 MHz, 97,887 MiB "
     "GDDR7 at 1.792 TB/s, no NVLink (PCIe5 64 GB/s/dir), 600 W"),
    ("b200", 2250, 4500, 9000, 180, 7.7, True, 900, True, 1000, "blackwell",
     "glennklockwood.com B200 (HGX: 2250 dense BF16); NVIDIA HGX B200 table 180 GB, 7.7 TB/s (62 TB/s over 8 GPUs; "
     "DGX B200's page says 64, i.e. 8.0: the HGX figure is used, as in " + AIC.format("b200_sxm") + "); NVLink5 "
     "1.8 TB/s bidir; 1,000 W"),
    ("b300", 2250, 4500, 14000, 268.6, 7.75, True, 900, True, 1100, "blackwell",
     AIC.format("b300_sxm") + ": HGX B300, 275,040 MiB HBM3e, 7.75 TB/s (62 TB/s / 8), FP4 14 PF dense (other "
     "sources 13.1-15), 1,100 W (1,400 W is GB300's); NVLink5"),
    ("gb200", 2500, 5000, 10000, 185.0, 8.0, True, 900, True, 1200, "blackwell",
     AIC.format("gb200") + ": per GPU of a GB200 NVL72 (a 72-GPU NVLink domain), 189,471 MiB, 8 TB/s, 1,200 W"),
    ("gb300", 2500, 5000, 15000, 277.5, 8.0, True, 900, True, 1400, "blackwell",
     AIC.format("gb300") + ": per GPU of a GB300 NVL72, 284,208 MiB, 8 TB/s, FP4 15 PF dense (1.1 EF / 72), 1,400 W"),
    ("mi300x", 1307, 2615, None, 192, 5.3, True, 448, False, 750, "cdna3",
     "AMD MI300X datasheet (1307 dense FP16/BF16, 5.3 TB/s, 192 GB, 750 W); Infinity Fabric 7x64 GB/s/dir"),
    ("mi325x", 1307, 2615, None, 256, 6.0, True, 448, False, 1000, "cdna3",
     "AMD MI325X datasheet (1.3 PF FP16, 2.6 PF FP8 dense, 256 GB HBM3E at 6 TB/s, 1,000 W; CDNA3: no FP4); "
     "Infinity Fabric as MI300X"),
    ("mi355x", 2500, 5000, 10000, 288, 8.0, True, 537, False, 1400, "cdna4",
     "AMD MI355X (amd.com: 2.5 PF FP16, 5 PF FP8, 10 PF MXFP4 dense; 288 GB HBM3E at 8 TB/s; 1,400 W TBP, Hot "
     "Chips 2025); Infinity Fabric 7x76.8 GB/s/dir (1,075 GB/s aggregate, UNVERIFIED)"),
)  # fmt: skip

GPUS: dict[str, GPU] = {
    n: GPU(n, bf, f8, mem, bw, hbm, ic, nvl, src, fp4_tflops=f4, tdp_w=tdp, arch=arch)
    for n, bf, f8, f4, mem, bw, hbm, ic, nvl, tdp, arch, src in _TIERS
}


def get_gpu(name: str) -> GPU:
    try:
        return GPUS[name.lower()]
    except KeyError:
        raise UsageError(f"unknown GPU {name!r}; known: {', '.join(GPUS)}") from None


GIB = 1024**3
