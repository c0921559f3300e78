"""TimeSlice, the one time-slice yield (core/fiber/timeslice.py): a fiber's run on
the CPU against a budget, restarted by any switch. On a fake clock: the fiber's
switches (csw) say whether it yielded."""
from __future__ import annotations

from spindle.core.fiber import Scheduler
from spindle.core.fiber.timeslice import APPLIER_SLICE, RELAY_SLICE, TimeSlice


def test_due_after_the_budget_and_not_before(clock):
    sched = Scheduler(clock=clock)

    def main():
        me = sched.current
        time_slice = TimeSlice(sched, RELAY_SLICE)
        start = me.csw
        clock.advance(RELAY_SLICE)
        assert not time_slice.due()            # exactly the budget: not yet
        time_slice.maybe_yield()
        assert me.csw == start
        clock.advance(RELAY_SLICE / 10)
        assert time_slice.due()                # due() only says so
        assert me.csw == start
        time_slice.maybe_yield()               # maybe_yield() yields
        assert me.csw == start + 1
        assert not time_slice.due()            # and that switch began a new slice

    sched.run(main)
    sched.close()


def test_a_wait_restarts_the_slice(clock):
    """Time spent parked is not work: a slice counts from the last time the fiber
    got the CPU back, whatever made it wait."""
    sched = Scheduler(clock=clock)

    def main():
        me = sched.current
        time_slice = TimeSlice(sched, APPLIER_SLICE)
        clock.advance(APPLIER_SLICE / 2)
        sched.sleep(0)                         # a wait of any kind (here: a yield)
        clock.advance(APPLIER_SLICE * 0.75)    # 1.25 budgets since made, 0.75 since the wait
        switches = me.csw
        time_slice.maybe_yield()
        assert me.csw == switches              # the first look after a switch says no
        clock.advance(APPLIER_SLICE * 2)
        time_slice.maybe_yield()
        assert me.csw == switches + 1

    sched.run(main)
    sched.close()


def test_made_outside_a_fiber_it_measures_the_first_fiber_to_ask(clock):
    """A relay is made before the fiber that sends runs it: its slice binds to the
    fiber that first asks, from that moment."""
    sched = Scheduler(clock=clock)
    time_slice = TimeSlice(sched, RELAY_SLICE)
    clock.advance(RELAY_SLICE * 5)             # long before any fiber ran

    def main():
        me = sched.current
        switches = me.csw
        time_slice.maybe_yield()
        assert me.csw == switches and time_slice.fiber is me
        clock.advance(RELAY_SLICE * 2)
        time_slice.maybe_yield()
        assert me.csw == switches + 1

    sched.run(main)
    sched.close()
