"""The calibration's tables for docs/engine.md (tests/test_calibration.py recomputes them and compares),
and the expected-error table engine/uncertainty.py ships (derived here, from the same rows).

    python -m goodbench.engine.virtual.calreport           the tables at the shipped constants (docs/engine.md)
    python -m goodbench.engine.virtual.calreport --refit   refit from the priors: the constants to ship (~5 min)
    python -m goodbench.engine.virtual.calreport --seeds ID   one point's metric over 40 arrival / length draws"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from ..costmodel import CostModel
from ..uncertainty import BATCH_CLASSES, REGIME_ORDER, batch_class
from .calibration import NAMES, K, calibrate, constants, shipped_theta
from .calpoints import load_points, point_config, replay

TARGETS = {"tpot": ("TPOT / ITL / latency per token", 0.10), "ttft": ("TTFT", 0.15), "throughput": ("throughput", 0.10)}
UNITS = {
    "step_s": (1e3, "ms", "host time per step"),
    "request_s": (1e6, "us", "host time per scheduled request per step"),
    "kv_read": (1, "x", "KV bytes read at bandwidth / this (decode attention; prefill re-reads)"),
    "attn_request_s": (
        1e6,
        "us",
        "decode attention per decoding request per layer, on the H100 SXM (x its bandwidth / the tier's)",
    ),
    "fp8_mem": (
        1,
        "x",
        "FP8 weights read at bandwidth / this (memory-bound GEMMs; 1 = half the BF16 bytes), GDDR tiers (Ada)",
    ),
    "fp8_mem_hbm": (1, "x", "the same on HBM tiers (Hopper, Blackwell, MI300X)"),
    "fp8_compute": (1, "x", "FP8 tensor-core FLOPs at peak / this (compute-bound GEMMs; 1 = twice BF16's rate)"),
    "tp_layer_s": (1e6, "us", "per layer per step with TP > 1 over NVLink, beyond the measured all-reduces"),
    "tp_layer_pcie_s": (1e6, "us", "the same over PCIe"),
    "tp_pcie_bw": (1, "x", "PCIe ring all-reduce bytes at the link rate / this (1.36 = Vidur's measured ring)"),
    "prefill_attn": (1, "x", "prefill attention FLOPs at peak / this"),
    "frontend_s": (1e3, "ms", "once per request: the server's front end (online runs only), V1"),
    "step_s_v0": (1e3, "ms", "host time per step, V0-era or unstated versions"),
    "request_s_v0": (1e6, "us", "host time per request per step, V0-era or unstated versions"),
    "frontend_s_v0": (1e3, "ms", "once per request: the front end, V0-era or unstated versions"),
}


def _pct(x) -> str:
    return "–" if x is None else f"{x:+.1%}"


def counted(rows: list[dict], excluded: bool = False) -> list[dict]:
    """The rows the error tables count: all but `excluded` points (unless asked for)."""
    return [r for r in rows if excluded or r["point"].use != "excluded"]


def _fitted_tiers(rows: list[dict]) -> set[str]:
    """The GPU tiers with fitted points: where the engine's efficiencies are its own, not borrowed."""
    return {r["point"].gpu for r in rows if r["point"].use == "fit"}


def regime_table(rows: list[dict]) -> dict:
    """Per regime: points, median |out-of-sample error|, median signed error, worst |error|, over the
    points on tiers with fitted points (`calibrated`) and over all points (`all`)."""
    fitted_tiers = _fitted_tiers(rows)
    out = {}
    for reg in REGIME_ORDER:
        for scope in ("calibrated", "all"):
            e = np.array(
                [
                    r["oos_error"]
                    for r in counted(rows)
                    if reg in r["regimes"] and (scope == "all" or r["point"].gpu in fitted_tiers)
                ]
            )
            out[(reg, scope)] = (
                {
                    "n": len(e),
                    "median_abs": float(np.median(np.abs(e))),
                    "median": float(np.median(e)),
                    "worst": float(np.max(np.abs(e))),
                }
                if len(e)
                else {"n": 0, "median_abs": None, "median": None, "worst": None}
            )
    return out


def uncertainty_constants(rows: list[dict]) -> tuple[dict, dict, tuple]:
    """(REGIME_ERROR, REGIME_WORST, CALIBRATED_TIERS) for engine/uncertainty.py, rounded to 0.1%."""
    t = regime_table(rows)
    err = {reg: round(t[(reg, "calibrated")]["median_abs"] or 0.0, 3) for reg in REGIME_ORDER}
    worst = {reg: round(t[(reg, "calibrated")]["worst"] or 0.0, 3) for reg in REGIME_ORDER}
    tiers = tuple(sorted(_fitted_tiers(rows)))
    return err, worst, tiers


def shipped_constants_text(theta: np.ndarray) -> str:
    """What to paste into costmodel.SHIPPED and calibration.V0_TERMS after a refit."""
    k = dict(zip(NAMES, theta.tolist()))
    head = ", ".join(f"{n}={k[n]:.4g}" for n in NAMES[:K])
    v0 = ", ".join(f"{k[n]:.4g}" for n in NAMES[K:])
    return f"SHIPPED = StepConstants({head})\nV0_TERMS = ({v0})"


def _constants_table(theta: np.ndarray) -> list[str]:
    out = ["| term | value | what it is |", "|---|---|---|"]
    for n, v in zip(NAMES, theta):
        f, unit, what = UNITS[n]
        out.append(f"| {n} | {v * f:.3g} {unit} | {what} |")
    return out


def _points_table(rows: list[dict]) -> list[str]:
    out = [
        "| point | source | GPU | model, TP | metric | use | measured | fitted | error | out of sample | error | regimes |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        p = r["point"]
        out.append(
            f"| {p.id} | {p.source_id} | {p.gpu} | {p.model} tp{p.tp}{' fp8' if p.dtype == 'fp8' else ''} | "
            f"{p.metric} | {p.use} | {p.value:.4g} | {r['fitted']:.4g} | {_pct(r['error'])} | {r['oos']:.4g} | "
            f"{_pct(r['oos_error'])} | {', '.join(r['regimes'])} |"
        )
    return out


def _summary_tables(rows: list[dict]) -> list[str]:
    t = regime_table(rows)
    out = [
        "| regime | points | median abs error | median error | worst abs error | points incl. tiers never fitted | "
        "their median abs error |",
        "|---|---|---|---|---|---|---|",
    ]
    for reg in REGIME_ORDER:
        c, a = t[(reg, "calibrated")], t[(reg, "all")]
        med = "–" if c["median_abs"] is None else f"{c['median_abs']:.1%}"
        worst = "–" if c["worst"] is None else f"{c['worst']:.1%}"
        amed = "–" if a["median_abs"] is None else f"{a['median_abs']:.1%}"
        out.append(f"| {reg} | {c['n']} | {med} | {_pct(c['median'])} | {worst} | {a['n']} | {amed} |")
    return out + [""] + _metric_table(rows)


def _metric_errors(rows: list[dict], klass: str, fitted_tiers: set[str]) -> tuple[np.ndarray, ...]:
    """One metric's out-of-sample errors: every counted point, with the excluded ones, on fitted tiers."""
    e = np.array([r["oos_error"] for r in counted(rows) if r["point"].klass == klass])
    x = np.array([r["oos_error"] for r in counted(rows, excluded=True) if r["point"].klass == klass])
    f = np.array(
        [r["oos_error"] for r in counted(rows) if r["point"].klass == klass and r["point"].gpu in fitted_tiers]
    )
    return e, x, f


def ttft_error(rows: list[dict]) -> dict:
    """TTFT_ERROR for engine/uncertainty.py: the public TTFTs' median |out-of-sample error| on tiers with
    fitted points and over every point, rounded to 0.1%."""
    e, _, f = _metric_errors(rows, "ttft", _fitted_tiers(rows))
    return {"calibrated": round(float(np.median(np.abs(f))), 3), "all": round(float(np.median(np.abs(e))), 3)}


def _metric_table(rows: list[dict]) -> list[str]:
    """Per metric (the issue's targets): over every counted point, over the excluded ones too, and over
    the points on tiers with fitted points (where the regime table's calibrated figures come from)."""
    fitted_tiers = _fitted_tiers(rows)
    out = [
        "| metric | target | points | median abs error | median error | with the excluded points: points | "
        "median abs error | on tiers with fitted points: points | median abs error |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for klass, (label, target) in TARGETS.items():
        e, x, f = _metric_errors(rows, klass, fitted_tiers)
        cells = [f"{len(a)} | {np.median(np.abs(a)):.1%}" if len(a) else "0 | –" for a in (x, f)]
        head = f"{len(e)} | {np.median(np.abs(e)):.1%} | {np.median(e):+.1%}" if len(e) else "0 | – | –"
        out.append(f"| {label} | {target:.0%} | {head} | {cells[0]} | {cells[1]} |")
    return out


# the regimes' batch classes (uncertainty.BATCH_CLASSES), the last split at 256 in flight as the issue asks
FLIGHT_BINS = BATCH_CLASSES[:-1] + ((255.5, "batch 65-255"), (np.inf, "batch 256+"))
PROMPT_BINS = ((1024, "prompts < 1k"), (4096, "1k-4k"), (np.inf, "4k+"))
MIN_POINTS = 5  # fewer held-out points than this in a cell: not measured


def _held_out_cells(r: dict) -> list[str]:
    """The held-out table's rows a point counts in: its in-flight bin (the replay's mean batch), its prompt-length
    bin (ShareGPT-sampled points without stated lengths in none), TP > 1, FP8, and all."""
    p = r["point"]
    out = [batch_class(r["mean_batch"], FLIGHT_BINS)]
    if p.input_len:
        out.append(next(name for edge, name in PROMPT_BINS if p.input_len < edge))
    return out + (["TP > 1"] if p.tp > 1 else []) + (["FP8"] if p.dtype == "fp8" else []) + ["all"]


def held_out_table(rows: list[dict]) -> list[str]:
    """Held-out sources only (use `check`: never fitted, not even by the fits that leave one source out), per
    regime and metric: the engine-misses issue's headline. Cells with fewer than MIN_POINTS: not measured."""
    names = [name for _, name in FLIGHT_BINS + PROMPT_BINS] + ["TP > 1", "FP8", "all"]
    errs = {(n, k): [] for n in names for k in TARGETS}
    for r in counted(rows):
        if r["point"].use == "check":
            for n in _held_out_cells(r):
                errs[(n, r["point"].klass)].append(abs(r["oos_error"]))
    out = ["| regime | " + " | ".join(f"{label} (target {t:.0%})" for label, t in TARGETS.values()) + " |"]
    out.append("|---|" + "---|" * len(TARGETS))
    for n in names:
        cells = [errs[(n, k)] for k in TARGETS]
        text = [
            f"{np.median(e):.1%} (n = {len(e)})" if len(e) >= MIN_POINTS else f"not measured (n = {len(e)})"
            for e in cells
        ]
        out.append(f"| {n} | " + " | ".join(text) + " |")
    return out


def markdown(result: dict) -> str:
    """The block docs/engine.md carries between the calibration markers."""
    rows = result["rows"]
    out = ["Fitted constants (V1 terms ship; the V0 terms price only the V0-era and unstated-version points):", ""]
    out += _constants_table(result["theta"])
    out += [
        "",
        "Every point, in sample and out of sample (a `check` point is never fitted; a `fit` point is "
        "predicted by the fit without its source):",
        "",
    ]
    out += _points_table(rows)
    out += ["", "Out of sample, by regime (the error `engine_uncertainty` reports) and by metric:", ""]
    out += _summary_tables(rows)
    out += [
        "",
        "Held-out sources only (`check` points: never fitted; no leave-one-source-out), median |error| per regime "
        f"and metric, fewer than {MIN_POINTS} points not measured (in flight: the replay's mean batch):",
        "",
    ]
    out += held_out_table(rows)
    return "\n".join(out)


def seed_spread(point_id: str, seeds: int = 40) -> np.ndarray:
    """The point's metric at the shipped constants, replayed with seeds 0..seeds-1 (Poisson arrivals,
    sampled lengths): how much of a point is its draw (the reason calibration.csv excludes some)."""
    (p,) = [q for q in load_points() if q.id == point_id]
    out = []
    for s in range(seeds):
        q = replace(p, seed=s)
        out.append(replay(q, CostModel.for_config(point_config(q), constants=constants(shipped_theta(), q)))[0])
    return np.array(out)


__all__ = [
    "held_out_table",
    "markdown",
    "regime_table",
    "seed_spread",
    "shipped_constants_text",
    "ttft_error",
    "uncertainty_constants",
]


if __name__ == "__main__":
    import sys

    if "--refit" in sys.argv:
        print(shipped_constants_text(calibrate()["theta"]))
    elif "--seeds" in sys.argv:
        v = seed_spread(sys.argv[sys.argv.index("--seeds") + 1])
        lo, p10, med, p90, hi = np.percentile(v, [0, 10, 50, 90, 100])
        print(f"{len(v)} draws: {lo:.4g} .. {hi:.4g} (10th-90th percentile {p10:.4g} .. {p90:.4g}, median {med:.4g})")
    else:
        result = calibrate(start=shipped_theta(), iterations=0)
        print(markdown(result))
        print(
            "\n# engine/uncertainty.py:", *uncertainty_constants(result["rows"]), ttft_error(result["rows"]), sep="\n"
        )
