"""streaming/protocols/openai."""
