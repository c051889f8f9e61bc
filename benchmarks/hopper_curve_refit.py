"""Refit the public constants with the Hopper GEMM curve derived from goodbench's own H100 runs
(benchmarks/data/gpu-ops-h100-sxm-*.csv: torch 2.11, cuBLAS of CUDA 13.0) in place of Vidur's, and print
the out-of-sample tables: does today's shallower mid-M dip price the public vLLM points better?

    python benchmarks/hopper_curve_refit.py        # ~8 min on 2 cores (a fit from the priors, then 10 steps)

The curve is derived as opderive derives Vidur's (the efficiency against the roofline per token count,
the median over the five measured layer shapes, one per-GEMM latency); the shipped tables are untouched.
Compare with `python -m goodbench.engine.virtual.calreport`."""

from __future__ import annotations

import multiprocessing

from gpu_operators_compare import layer_gemms, measured  # this directory (the script's own) is on sys.path

import goodbench.engine.opdata as opdata
import goodbench.engine.opmodel as opmodel
from goodbench.engine.hardware import get_gpu
from goodbench.engine.models import get_model
from goodbench.engine.opderive import N_GRID, gemm_curve


def shapes(tier: str) -> dict:
    """(model, tp) -> {N: (one layer's GEMMs s, 0, matmul params per GPU, hidden, ffn per GPU)}:
    opderive.gemm_curve's input, from the layer times gpu_operators_compare.py uses."""
    out: dict = {}
    for (model, tp, n), s in layer_gemms(measured(tier), "bf16").items():
        if n in N_GRID:
            m = get_model(model)
            out.setdefault((model, tp), {})[n] = (s, 0.0, m.params_per_layer / tp, m.hidden, m.ffn / tp)
    return out


def main() -> None:
    g = get_gpu("h100-sxm")
    curve = gemm_curve(shapes("h100-sxm"), g.bf16_tflops * 1e12, g.mem_bw_tbs * 1e12)
    print(
        f"measured Hopper curve: t0 {curve[2] * 1e6:.2f} us, RMS {curve[3]:.1%} (Vidur's: {opdata.GEMM['hopper'][2] * 1e6:.2f} us, {opdata.GEMM['hopper'][3]:.1%})"
    )
    for x, e, v in zip(curve[0], curve[1], opdata.GEMM["hopper"][1]):
        print(f"  N / ridge {x:6.3f}: efficiency {e:.3f} (Vidur's {v:.3f})")
    opdata.GEMM["hopper"] = opmodel.GEMM["hopper"] = curve
    multiprocessing.set_start_method("fork", force=True)  # the replays' workers inherit the patched table

    from goodbench.engine.virtual.calibration import calibrate
    from goodbench.engine.virtual.calreport import markdown, shipped_constants_text

    first = calibrate()
    result = calibrate(start=first["theta"], iterations=10)
    print(shipped_constants_text(result["theta"]), f"\nlast step {result['step']:.3f} scale units\n")
    print("Out of sample, by regime" + markdown(result).split("Out of sample, by regime")[1])


if __name__ == "__main__":
    main()
