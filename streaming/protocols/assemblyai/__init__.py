"""streaming/protocols/assemblyai."""
