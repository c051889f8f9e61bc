"""The server's front end between a request's send and the engine (engine/frontend.py): a constant, or
for a calibrated server one that grows with the requests in flight at the send and the prompt's length.
A send is an event of its own (engine/virtual/arrivals.py) because its delay depends on what finished
before it."""

import pytest

from goodbench.engine.frontend import FrontEnd, front_end
from goodbench.engine.virtual.arrivals import ClosedArrivals, OpenArrivals


def test_a_request_is_delayed_by_the_requests_in_flight_at_its_send_and_its_prompt():
    arr = OpenArrivals([0.0, 1.0, 2.0], FrontEnd(0.1, 0.5, 0.01), prompts=[10, 20, 30])
    assert arr.heap[0][0] == 0.0  # the next thing that happens is the first send
    assert arr.pop(0.0) is None  # sent at 0; it reaches the engine at 0.1 + 10 x 0.01
    assert arr.pop(0.2) == pytest.approx((0.2, 0))
    arr.finished([0], 1.5)
    # request 1, sent at 1.0 while request 0 was still in flight: 0.1 + 0.5 + 20 x 0.01
    assert arr.pop(5.0) == pytest.approx((1.8, 1))
    # request 2, sent at 2.0: request 0 ended at 1.5, request 1 is in flight: 0.1 + 0.5 + 30 x 0.01
    assert arr.pop(5.0) == pytest.approx((2.9, 2))
    assert arr.pop(5.0) is None and arr.sent == [0.0, 1.0, 2.0] and arr.load == [0, 1, 1]


def test_a_constant_front_end_keeps_every_arrival_where_it_was():
    arr = OpenArrivals([0.0, 0.0, 0.5], 0.02)
    got = [arr.pop(1.0) for _ in range(4)]
    assert got == [(0.02, 0), (0.02, 1), (0.52, 2), None] and not arr.dynamic
    assert front_end(0.02) == FrontEnd(0.02) and FrontEnd(0.02).constant and not FrontEnd(0, 1e-3).constant
    # its loads are counted as a load-dependent front end counts them (calibrate's Jacobian needs them)
    arr = OpenArrivals([0.0, 1.0, 2.0], 0.1, prompts=[10, 20, 30])
    assert arr.pop(0.5) == (0.1, 0)
    arr.finished([0], 1.5)
    assert arr.pop(5.0) == (1.1, 1) and arr.pop(5.0) == (2.1, 2) and arr.load == [0, 1, 1]


def test_a_closed_loops_next_send_counts_the_requests_still_in_flight():
    arr = ClosedArrivals([100] * 3, users=2, front=FrontEnd(0.0, 1.0, 0.0))
    assert arr.pop(0.0) == (0.0, 0)  # the first user's request: nothing in flight before it
    assert arr.pop(10.0) == (1.0, 1)  # the second user's, sent at 0 beside the first
    arr.finished([0], 3.0)  # user 1 sends again at 3.0 with request 1 still in flight
    assert arr.pop(10.0) == (4.0, 2) and arr.load == [0, 1, 1]
