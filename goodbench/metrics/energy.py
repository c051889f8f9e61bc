"""The summary's `energy` block of a live run, from GPU telemetry sampled every second (gpu_telemetry.jsonl: rows
{"t": run-clock s, "source": i, "metrics": Prometheus sample}, NVIDIA DCGM exporter names; NVML and AMD SMI are
sampled into the same names). Pure.

Energy is the energy counter's rise over the measured window (the first measured send to the last token),
each GPU's counter read between samples linearly; across a reset (a counter that falls: the exporter or the
driver restarted) the interval's power is integrated; a GPU whose exporter gives only power has it integrated (trapezoids).
A GPU's samples that stop (the GPU or its exporter gone) cover only part of the window: the block says how much
(covered_share), and never extrapolates."""

from __future__ import annotations

import numpy as np

ENERGY = "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION"  # mJ since the driver loaded
POWER = "DCGM_FI_DEV_POWER_USAGE"  # W
KWH = 3.6e6  # J


def gpu_series(rows: list[dict]) -> dict[str, dict]:
    """{gpu key: {"t": [...], "energy_j": [... or None], "power_w": [... or None]}} (key: source and labels)."""
    out: dict[str, dict] = {}
    for r in rows:
        t, sample = r.get("t"), r.get("metrics")
        if not isinstance(t, (int, float)) or not isinstance(sample, dict):
            continue
        seen: dict[str, dict] = {}
        for key, v in sample.items():
            name, _, labels = key.partition("{")
            if name in (ENERGY, POWER):
                seen.setdefault(f"{r.get('source', 0)}:{{{labels}", {})[name] = v
        for gpu, vals in seen.items():
            s = out.setdefault(gpu, {"t": [], "energy_j": [], "power_w": []})
            s["t"].append(float(t))
            s["energy_j"].append(vals[ENERGY] / 1000 if ENERGY in vals else None)
            s["power_w"].append(vals.get(POWER))
    return out


def _cumulative(t: list[float], e: list[float], p: list) -> np.ndarray:
    """A counter's running rise. A fall is a reset: that interval's energy is its power integrated where the
    samples have power, else the counter's new value (what it counted since the reset)."""
    out = [0.0]
    for i in range(1, len(e)):
        if e[i] >= e[i - 1]:
            inc = e[i] - e[i - 1]
        elif p[i] is not None and p[i - 1] is not None:
            inc = (p[i] + p[i - 1]) / 2 * (t[i] - t[i - 1])
        else:
            inc = e[i]
        out.append(out[-1] + inc)
    return np.asarray(out)


def _stale(ts: np.ndarray, e: list[float], lo: float, hi: float) -> bool:
    """The counter did not move over most of the sampling intervals that overlap the window: the exporter
    refreshes it less often than goodbench samples (dcgm-exporter's default is every 30 s: run it with -c 1000),
    so its rise would under-read the window; power is integrated instead."""
    overlap = [i for i in range(1, len(ts)) if ts[i] > lo and ts[i - 1] < hi]
    moved = sum(1 for i in overlap if e[i] != e[i - 1])
    return bool(overlap) and moved * 2 < len(overlap)


def window_energy(t: list[float], energy_j: list, power_w: list, start: float, end: float) -> dict | None:
    """Joules one GPU used over [start, end] and how much of the window its samples cover (None: none do)."""
    lo, hi = max(start, t[0]), min(end, t[-1])
    if hi <= lo or len(t) < 2:
        return None
    ts = np.asarray(t)
    has_power = all(p is not None for p in power_w)
    if all(e is not None for e in energy_j) and not (has_power and _stale(ts, energy_j, lo, hi)):
        c = _cumulative(t, energy_j, power_w)
        joules, how = float(np.interp(hi, ts, c) - np.interp(lo, ts, c)), "energy counter"
    elif has_power:
        grid = np.concatenate(([lo], ts[(ts > lo) & (ts < hi)], [hi]))
        joules = float(np.trapezoid(np.interp(grid, ts, power_w), grid))
        how = "power integrated" + (" (the energy counter was stale)" if all(x is not None for x in energy_j) else "")
    else:
        return None
    return {"joules": joules, "covered_share": (hi - lo) / (end - start), "source": how}


def energy_block(rows: list[dict], start: float, end: float, output_tokens: int, good_tokens: int) -> dict:
    """summary.json's `energy` for telemetry rows over the measured window [start, end] (run clock)."""
    per = {}
    for gpu, s in gpu_series(rows).items():
        w = window_energy(s["t"], s["energy_j"], s["power_w"], start, end)
        if w is not None:
            per[gpu] = w | {"avg_power_w": w["joules"] / ((end - start) * w["covered_share"])}
    if not per or end <= start:
        return {"joules": None, "note": "no GPU telemetry covered the measured window: no energy figure"}
    joules = sum(w["joules"] for w in per.values())
    covered = min(w["covered_share"] for w in per.values())
    sources = sorted({w["source"] for w in per.values()})
    return {
        "joules": joules,
        "gpus": len(per),
        "window_s": end - start,
        "avg_power_w_per_gpu": sum(w["avg_power_w"] for w in per.values()) / len(per),
        "joules_per_output_token": joules / output_tokens if output_tokens else None,
        "joules_per_good_token": joules / good_tokens if good_tokens else None,
        "good_tokens_per_kwh": good_tokens / (joules / KWH) if joules > 0 else None,
        "source": " + ".join(sources),
        "covered_share": covered,
        "per_gpu": per,
        "note": None if covered >= 0.999 else f"telemetry covered {covered:.0%} of the window on at least one GPU",
    }


def simulated_block(st: dict, duration_s: float, output_tokens: int, good_tokens: int) -> dict:
    """The simulated engine's `energy` (engine/power.py; st: the simulation's energy counters): the steps' joules
    on every GPU plus idle power over the rest of the run; how sure it is in `uncertainty_pct`."""
    from ..engine.power import FIT_ERROR

    joules = st["busy_j"] + st["idle_w"] * duration_s - st["idle_busy_j"]
    n = st["gpus"]
    return {
        "joules": joules,
        "gpus": n,
        "window_s": duration_s,
        "avg_power_w_per_gpu": joules / duration_s / n if duration_s > 0 else None,
        "joules_per_output_token": joules / output_tokens if output_tokens else None,
        "joules_per_good_token": joules / good_tokens if good_tokens else None,
        "good_tokens_per_kwh": good_tokens / (joules / KWH) if joules > 0 else None,
        "source": "engine power model",
        "basis": st["basis"],
        "covered_share": 1.0,
        "uncertainty_pct": round(FIT_ERROR * 100, 1),
        "note": f"power coefficients borrowed from {st['borrowed']}" if st.get("borrowed") else None,
    }


def energy_cost(e: dict, el: dict) -> dict:
    """What the energy costs at usd_per_kwh, the GPUs' joules times the facility factor (PUE)."""
    if e.get("joules") is None:
        return {}
    kwh = e["joules"] * el["facility_factor"] / KWH
    per = e.get("joules_per_good_token")
    per_m = el["usd_per_kwh"] * per * 1e6 * el["facility_factor"] / KWH if per is not None else None
    return {"electricity": dict(el), "energy_usd": kwh * el["usd_per_kwh"], "energy_usd_per_million_good_tokens": per_m}
