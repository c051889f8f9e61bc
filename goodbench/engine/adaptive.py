"""An adaptive per-step token budget: AIMD on observed decode step time against a target (the ITL/TPOT
SLO). A step that carried decodes and ran over the target halves the budget (not below the floor);
one under it adds a fixed increment (not above the ceiling, the configured max_num_batched_tokens).
Long prefills then use big chunks while nothing decodes and small ones while streams are waiting for
their next token. Pure: it sees step times, returns budgets."""

from __future__ import annotations

ADD_TOKENS = 64  # additive increase per on-target step
DECREASE = 0.5  # multiplicative decrease on a step over the target


class AimdBudget:
    def __init__(self, target_s: float, floor: int, ceiling: int, start: int | None = None):
        self.target_s, self.floor, self.ceiling = target_s, max(1, min(floor, ceiling)), ceiling
        self.budget = ceiling if start is None else start
        self.decreases = self.increases = 0

    def observe(self, step_s: float, steps: int = 1) -> int:
        """`steps` consecutive decode-carrying steps, the longest taking step_s: the new budget."""
        if step_s > self.target_s:
            self.budget = max(self.floor, int(self.budget * DECREASE))
            self.decreases += 1
        elif self.budget < self.ceiling:
            self.budget = min(self.ceiling, self.budget + ADD_TOKENS * steps)
            self.increases += steps
        return self.budget
