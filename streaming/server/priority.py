"""The model's CPU priority below the event loop's, so the loop's small, frequent work (reads,
VAD, JSON, writes for every stream) is not queued behind the model's long computations.

On Linux a nice value belongs to a thread, and a thread inherits it from the thread that
creates it. CTranslate2 creates its compute threads when a model is loaded, so loading the
model in a thread whose nice value was raised puts every compute thread below the loop,
while the loop and the engine's own inference thread (which mostly waits for them) keep
the process's priority. Elsewhere the call does nothing: a process-wide nice value would
lower the loop too.
"""

from __future__ import annotations

import os
import sys
import threading

MAX_NICE_INCREMENT = 19


def lower_this_thread(increment: int) -> bool:
    """Raise the calling thread's nice value by `increment`; True when it was raised."""
    if not 0 <= increment <= MAX_NICE_INCREMENT:
        raise ValueError(f"a nice increment is within 0..{MAX_NICE_INCREMENT}, not {increment}")
    if increment == 0 or sys.platform != "linux":
        return False
    tid = threading.get_native_id()
    try:
        now = os.getpriority(os.PRIO_PROCESS, tid)
        os.setpriority(os.PRIO_PROCESS, tid, min(19, now + increment))
    except OSError:  # not permitted in this sandbox or container: run at the same priority
        return False
    return True


def thread_nice() -> int:
    """The calling thread's nice value (the process's where threads have none of their own)."""
    tid = threading.get_native_id() if sys.platform == "linux" else 0
    return os.getpriority(os.PRIO_PROCESS, tid)
