"""All streams: the asyncio engine, its streams, the request ledger, the model thread and load
control.

`scheduling/` holds the pure policy (queues, cost model, fairness, pace, batch sizing); the
engine applies it. Imports only `core` of kettle.streaming."""
