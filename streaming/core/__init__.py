"""One stream, pure: the session and the jobs it is split into (lifecycle, tuning, segments, live
requests, publisher, speakers, retention), its config, VAD, utterances, planner, speculation,
context, agreement, guard, voice, refinement, events and the reader backlog (the bounded queue
of events for a slow reader). No I/O, no threads, no clock of its own; imports nothing else of
kettle.streaming."""
