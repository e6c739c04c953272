"""transcribe/audio."""
