"""Cooperative fibers on greenlets: scheduler, cond, channel, latch, triggers, coio."""
from .channel import Channel
from .cond import Cond
from .fiber import Fiber, FiberSwitchForbidden
from .latch import Latch
from .scheduler import Scheduler, TimerHandle
from .trigger import TriggerList

__all__ = ["Channel", "Cond", "Fiber", "FiberSwitchForbidden", "Latch", "Scheduler",
           "TimerHandle", "TriggerList"]
