"""streaming/protocols/deepgram."""
