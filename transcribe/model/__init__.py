"""transcribe/model."""
