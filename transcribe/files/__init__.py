"""transcribe/files."""
