"""GPU telemetry read on this host (`--gpu-telemetry nvml` / `amdsmi`): each call returns one sample in the DCGM
exporter's names, so the sampling loop and the energy block (metrics/energy.py) treat every source alike.
nvidia-ml-py (`pip install 'goodbench[gpu]'`) and amdsmi are imported only here, when asked for."""

from __future__ import annotations

from ..errors import UsageError
from ..metrics.energy import ENERGY, POWER

UTIL, MEM, TEMP = "DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_FB_USED", "DCGM_FI_DEV_GPU_TEMP"


def nvml_sampler():
    """A sampler over every NVIDIA GPU NVML sees (UsageError before the run when NVML is missing or finds none)."""
    try:
        import pynvml
    except ImportError:
        raise UsageError("--gpu-telemetry nvml needs nvidia-ml-py: pip install nvidia-ml-py") from None
    try:
        pynvml.nvmlInit()
        handles = [pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(pynvml.nvmlDeviceGetCount())]
    except pynvml.NVMLError as e:
        raise UsageError(f"--gpu-telemetry nvml: NVML cannot read the GPUs here: {e}") from None
    if not handles:
        raise UsageError("--gpu-telemetry nvml: NVML finds no GPU on this host")

    def sample() -> dict:
        out = {}
        for i, h in enumerate(handles):
            lab = f'{{gpu="{i}"}}'
            out[POWER + lab] = pynvml.nvmlDeviceGetPowerUsage(h) / 1000  # mW -> W
            try:
                out[ENERGY + lab] = float(pynvml.nvmlDeviceGetTotalEnergyConsumption(h))  # mJ (Volta and later)
            except pynvml.NVMLError:
                pass  # no counter on this GPU: its power is integrated
            out[UTIL + lab] = pynvml.nvmlDeviceGetUtilizationRates(h).gpu
            out[MEM + lab] = pynvml.nvmlDeviceGetMemoryInfo(h).used / 2**20
        return out

    return sample


def amdsmi_sampler():
    """A sampler over every AMD GPU AMD SMI sees (UsageError before the run when amdsmi is missing or finds none)."""
    try:
        import amdsmi
    except ImportError:
        raise UsageError("--gpu-telemetry amdsmi needs AMD SMI's Python package (amdsmi, from ROCm)") from None
    try:
        amdsmi.amdsmi_init()
        handles = amdsmi.amdsmi_get_processor_handles()
    except Exception as e:  # amdsmi raises its own AmdSmiException family
        raise UsageError(f"--gpu-telemetry amdsmi: AMD SMI cannot read the GPUs here: {e}") from None
    if not handles:
        raise UsageError("--gpu-telemetry amdsmi: AMD SMI finds no GPU on this host")

    def sample() -> dict:
        out = {}
        for i, h in enumerate(handles):
            lab = f'{{gpu="{i}"}}'
            power = amdsmi.amdsmi_get_power_info(h)
            watts = _number(power.get("current_socket_power")) or _number(power.get("average_socket_power"))
            if watts is not None:
                out[POWER + lab] = watts
            e = amdsmi.amdsmi_get_energy_count(h)
            counter, res = _number(e.get("energy_accumulator", e.get("power"))), _number(e.get("counter_resolution"))
            if counter is not None:
                out[ENERGY + lab] = counter * (res or 1.0) / 1000  # counts x microjoules per count -> mJ
        return out

    return sample


def _number(v) -> float | None:
    """AMD SMI's value, or None for what it reports as unsupported ("N/A")."""
    try:
        return float(v)
    except (TypeError, ValueError):
        return None


def local_sampler(kind: str):
    return nvml_sampler() if kind == "nvml" else amdsmi_sampler()
