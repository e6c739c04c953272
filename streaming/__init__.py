"""kettle.streaming: VAD segmenter, sessions, agreement, scheduler, engine, server, CLI."""
