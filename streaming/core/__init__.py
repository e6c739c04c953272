"""One stream, pure: the session and its config, VAD, utterances, planner, speculation, context,
agreement, guard, voice, events and the reader backlog. No I/O, no threads, no clock of its own;
imports nothing else of kettle.streaming."""
