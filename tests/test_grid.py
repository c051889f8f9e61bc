"""A sweep's grid (analysis.grid): knobs typed from EngineConfig, axes, the unchunked baseline cell."""

import pytest

from goodbench.analysis.grid import Cell, cell_config, check_cells, grid, parse_params, parse_value
from goodbench.engine.config import EngineConfig
from goodbench.errors import UsageError


def test_grid_and_params():
    p = parse_params(["max_num_batched_tokens=256,512", "enable_chunked_prefill=false"])
    assert p == {"max_num_batched_tokens": [256, 512], "enable_chunked_prefill": [False]}
    cells = grid(["h100-sxm", "l40s"], p)
    assert [c.label for c in cells] == [
        "h100-sxm,max_num_batched_tokens=256",
        "h100-sxm,max_num_batched_tokens=512",
        "h100-sxm,enable_chunked_prefill=false",
        "l40s,max_num_batched_tokens=256",
        "l40s,max_num_batched_tokens=512",
        "l40s,enable_chunked_prefill=false",
    ]
    assert len(grid(["h100-sxm"], parse_params(["max_num_seqs=8,16", "block_size=16,32"]))) == 4
    with pytest.raises(UsageError, match="unknown engine knob"):
        parse_params(["chunk=5"])
    with pytest.raises(UsageError, match="whole number"):
        parse_params(["max_num_seqs=lots"])


@pytest.mark.parametrize(
    "knob,text,want",
    [
        ("max_num_seqs", "64", 64),
        ("enable_prefix_caching", "off", False),
        ("gpu_memory_utilization", "0.8", 0.8),
        ("scheduler", "static", "static"),
        ("adaptive_chunk_target_ms", "off", None),
        ("adaptive_chunk_target_ms", "50", 50.0),
        ("max_num_batched_tokens", "none", None),
    ],
)
def test_values_are_typed_as_the_config_declares(knob, text, want):
    assert parse_value(knob, text) == want


def test_unchunked_cells_take_max_model_len_and_bad_cells_fail_up_front():
    cfg = cell_config(EngineConfig(), Cell("l40s", (("enable_chunked_prefill", False),)))
    assert cfg.max_num_batched_tokens == cfg.max_model_len and not cfg.enable_chunked_prefill
    with pytest.raises(UsageError, match="cell h100-sxm,max_num_batched_tokens=256,enable_chunked_prefill=false"):
        check_cells(
            EngineConfig(), [Cell("h100-sxm", (("max_num_batched_tokens", 256), ("enable_chunked_prefill", False)))]
        )
    assert Cell("l40s", (("max_num_seqs", 8),)).slug == "cell-l40s_max_num_seqs=8"
    assert Cell("l40s", (("adaptive_chunk_target_ms", None),)).label == "l40s,adaptive_chunk_target_ms=off"
    with pytest.raises(UsageError, match="whole number"):
        parse_value("block_size", "off")  # a knob with a default cannot be unset
