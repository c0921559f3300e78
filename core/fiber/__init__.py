"""Cooperative fibers on greenlets: scheduler, cond, channel, latch, triggers, time
slices (timeslice.py), coio."""
from .channel import Channel
from .cond import Cond
from .fiber import Fiber, FiberSwitchForbidden
from .latch import Latch
from .scheduler import Scheduler, TimerHandle
from .timeslice import TimeSlice
from .trigger import TriggerList

__all__ = ["Channel", "Cond", "Fiber", "FiberSwitchForbidden", "Latch", "Scheduler",
           "TimeSlice", "TimerHandle", "TriggerList"]
