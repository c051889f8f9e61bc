"""What the vision encoder must run for a request as it is first scheduled, and vLLM's encoder cache: an image
whose placeholder tokens all come from the prefix cache is not encoded (vLLM schedules encoder inputs only for
the tokens it computes), and one whose encoder output is still held from an earlier request with the same
image (vLLM V1 keys its encoder cache by each image's content hash, and since 0.10.2 keeps a finished
request's outputs until newer ones need the room) is reused. Pure.

A request's images are taken to lead its prompt, as a chat message with its images before its text puts them
(the engine counts no chat template): image k's tokens end at the sum of the first k's."""

from __future__ import annotations

from collections import OrderedDict


class EncoderCache:
    """Encoder outputs held by content key, least recently used evicted first, within `capacity` tokens
    (vLLM sizes it to the encoder budget, max_num_batched_tokens, or the largest item where that is larger)."""

    def __init__(self, capacity: int):
        self.capacity = capacity
        self.held: OrderedDict = OrderedDict()  # key -> its encoder output's tokens
        self.used = 0
        self.skipped = 0  # images not encoded: their tokens were cached, or their output was held

    def plan(self, parts: tuple, n_cached: int) -> tuple:
        """(tokens to encode, encoder seconds, the (key, tokens) to keep once encoded, the held keys it reuses,
        images skipped) for a request's image parts (key or None, encoder tokens, seconds, where its prompt
        tokens end) when its first n_cached prompt tokens come from the prefix cache."""
        tokens, secs, new, reused, skip = 0, 0.0, [], [], 0
        for key, tok, s, end in parts:
            if end <= n_cached:
                skip += 1
            elif key is not None and key in self.held:
                skip += 1
                reused.append(key)
            else:
                tokens, secs = tokens + tok, secs + s
                new.append((key, tok))
        return tokens, secs, tuple(new), tuple(reused), skip

    def keep(self, planned: tuple) -> None:
        """The planned request was scheduled: its skipped images counted, the held outputs it reused made the
        most recent, its new ones kept (the oldest evicted to make room)."""
        _, _, new, reused, skip = planned
        self.skipped += skip
        for key in reused:
            self.held.move_to_end(key)
        for key, tok in new:
            if key is None or key in self.held:
                continue
            while self.held and self.used + tok > max(self.capacity, tok):
                self.used -= self.held.popitem(last=False)[1]
            self.held[key] = tok
            self.used += tok
