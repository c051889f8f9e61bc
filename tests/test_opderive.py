"""The cost model's operator tables are what the Vidur profiles give: re-derived from the data files in
reference/vidur-profiles and compared with the committed engine/opdata.py."""

import os

import pytest
from conftest import ROOT

from goodbench.engine import opderive

DATA = os.path.join(ROOT, "reference", "vidur-profiles")


@pytest.fixture(scope="module")
def derived():
    return opderive.derive(DATA)


def test_committed_tables_are_the_derivation(derived):
    with open(os.path.join(ROOT, "goodbench", "engine", "opdata.py"), encoding="utf-8") as f:
        assert f.read() == opderive.render(derived), (
            "regenerate: python -m goodbench.engine.opderive reference/vidur-profiles"
        )


def test_the_gemm_curves_fit_the_measurements_and_dip_at_the_ridge(derived):
    for fam, (xs, eff, t0, rms) in derived["GEMM"].items():
        assert rms < 0.08 and 3e-6 < t0 < 8e-6, fam  # one per-GEMM latency explains the small shards
        dip = min(range(len(xs)), key=lambda i: eff[i])
        assert 0.7 < xs[dip] < 2.0 and eff[dip] < min(eff[0], eff[-1]) - 0.15, fam


def test_collectives_grow_with_the_message_and_pcie_class_rings_are_slower(derived):
    c = derived["COLLECTIVES"]
    for name, (sizes, times) in c.items():
        assert list(times) == sorted(times) and sizes[0] < sizes[-1], name
    # a 32 MB all-reduce over 4 GPUs: NVSwitch vs a ring that crosses PCIe
    big = lambda name: next(t for s, t in zip(*c[name]) if s > 3e7)  # noqa: E731
    assert big("pairwise-a100-4") > 5 * big("nvswitch-a100-4")
    # send/recv over NVLink 4 reaches ~80% of its 450 GB/s at 50 MB (Vidur reads `size` as bytes)
    sizes, times = c["nvlink-h100"]
    i = max(k for k, s in enumerate(sizes) if s < 6e7)
    assert 0.6 < sizes[i] / times[i] / 450e9 < 0.95
