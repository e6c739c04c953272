"""The scheduler's pure policy: queues, cost model, fairness, pace and the ahead share. Every
call is given `now`; nothing here does I/O."""
