"""transcribe/speakers."""
