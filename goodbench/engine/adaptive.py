"""An adaptive per-step token budget: AIMD on observed decode step time against a target (the ITL/TPOT
SLO). A step that carried decodes and ran over the target halves the budget (not below the floor);
one under it that used the whole budget adds a fixed increment (not above the ceiling, the configured
max_num_batched_tokens); steps that did not use the budget teach nothing about it. It starts at the
floor, so the first long prompt among decoding streams is cut small and the budget grows only as far
as the target allows. Pure: it sees step times, returns budgets."""

from __future__ import annotations

ADD_TOKENS = 64  # additive increase per on-target step
DECREASE = 0.5  # multiplicative decrease on a step over the target


class AimdBudget:
    def __init__(self, target_s: float, floor: int, ceiling: int, start: int | None = None):
        self.target_s, self.floor, self.ceiling = target_s, max(1, min(floor, ceiling)), ceiling
        self.budget = self.floor if start is None else start
        self.decreases = self.increases = 0

    def observe(self, step_s: float, used: bool = True) -> int:
        """A decode-carrying step took step_s (used: it was filled to the budget): the new budget."""
        if step_s > self.target_s:
            self.budget = max(self.floor, int(self.budget * DECREASE))
            self.decreases += 1
        elif used and self.budget < self.ceiling:
            self.budget = min(self.ceiling, self.budget + ADD_TOKENS)
            self.increases += 1
        return self.budget
