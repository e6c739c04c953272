"""kettle.transcribe: model loading, the Whisper adapter, offline file pipeline, writers, CLI."""
