"""kettle.transcribe: model loading, the Whisper adapter, the offline file pipeline, writers, file CLI."""
