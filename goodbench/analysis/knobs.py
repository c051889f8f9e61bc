"""Notes for the reader of a simulated run: an engine knob that could not matter (a result that would read
the same with the knob flipped should say so, or a user compares two identical runs and concludes the
knob does nothing), and prompts or steps a calibration profile's runs hardly had (those times are the
fit's extrapolation). Pure: reads the engine config, the profile and what the simulation measured."""

from __future__ import annotations

from dataclasses import replace

from ..engine.config import EngineConfig


def chunked_prefill_note(cfg: EngineConfig, max_step_tokens: int, largest_prompt: int) -> str | None:
    """Chunked prefill only acts when a step would exceed the token budget. cfg: the resolved config the
    run used; max_step_tokens: the most tokens any step carried (engine stats)."""
    if not max_step_tokens:
        return None
    if cfg.enable_chunked_prefill:
        budget = cfg.max_num_batched_tokens
        if max_step_tokens >= budget:
            return None
        return (
            f"chunked prefill had nothing to do: no step reached the {budget:,}-token budget (the largest "
            f"prompt has {largest_prompt:,} tokens), so no prompt was split, and --no-enable-chunked-prefill "
            "gives the same schedule unless the KV cache runs short. Longer prompts (--workload hol-stress) "
            "or a smaller --max-num-batched-tokens make the knob matter."
        )
    chunked = (
        replace(cfg, enable_chunked_prefill=True, max_num_batched_tokens=None, num_gpu_blocks=None, max_model_len=None)
        .resolved()
        .max_num_batched_tokens
    )
    if max_step_tokens > chunked:
        return None
    return (
        f"chunked prefill is off, but no step carried more than {max_step_tokens:,} tokens, within the "
        f"{chunked:,}-token budget it would use on {cfg.gpu}: turning it on would split nothing, so the schedule "
        "would be the same unless the KV cache runs short."
    )


def calibration_notes(cfg: EngineConfig, requests, max_step_tokens: int) -> list[str]:
    """A calibrated run's prompts and steps outside what the profile's runs had (none without a profile)."""
    from ..engine.profile import budget_note, coverage_note

    prof = cfg.profile()  # read once at the edge and carried with the config
    if prof is None:
        return []
    prompts = [r.prompt_tokens for r in requests]
    return [n for n in (coverage_note(prof, prompts), budget_note(prof, max_step_tokens)) if n]


def simulation_notes(cfg: EngineConfig, requests, stats: dict, instances: bool = False) -> list[str]:
    """Everything a simulated run's reader should know (the knob note only for one plain instance)."""
    largest = max((r.prompt_tokens for r in requests), default=0)
    knob = None if instances else chunked_prefill_note(cfg, stats["max_step_tokens"], largest)
    return ([knob] if knob else []) + calibration_notes(cfg, requests, stats["max_step_tokens"])
