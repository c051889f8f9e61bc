"""analysis.knobs: a simulated run says when chunked prefill could not have mattered."""

import pytest

import goodbench as gb
from goodbench.analysis.knobs import chunked_prefill_note

ON = gb.EngineConfig().resolved()  # h100-sxm: budget 8192
OFF = gb.EngineConfig(enable_chunked_prefill=False).resolved()  # budget = max_model_len
L40S_OFF = gb.EngineConfig(gpu="l40s", enable_chunked_prefill=False).resolved()  # chunked default: 2048


@pytest.mark.parametrize(
    "cfg,max_step,note",
    [
        (ON, 3055, "no step reached the 8,192-token budget"),
        (ON, 8192, None),  # the budget bound: prompts were split or held back
        (OFF, 3055, "within the 8,192-token budget it would use on h100-sxm"),
        (OFF, 20040, None),  # an unchunked 20,000-token step: chunking would have split it
        (L40S_OFF, 3055, None),  # over L40S's 2048 default budget
        (ON, 0, None),  # nothing ran
    ],
)
def test_chunked_prefill_note(cfg, max_step, note):
    got = chunked_prefill_note(cfg, max_step, 3000)
    assert got is None if note is None else note in got


def test_simulate_says_when_the_knob_could_not_matter(tmp_path):
    """The issue: mixed-long-short on the default H100 reads the same with chunking on and off; now both
    runs say why. hol-stress, whose 20,000-token prompt exceeds the budget, gets no note."""
    mixed = gb.load_workload("mixed-long-short", num_prompts=60)
    for cfg in (gb.EngineConfig(), gb.EngineConfig(enable_chunked_prefill=False)):
        assert gb.simulate(mixed, cfg, result_dir=str(tmp_path)).summary["simulation"]["notes"]
    hol = gb.simulate(gb.load_workload("hol-stress"), result_dir=str(tmp_path)).summary["simulation"]
    assert hol["notes"] == [] and hol["max_step_tokens"] >= 8192
