"""transcribe/corpus."""
