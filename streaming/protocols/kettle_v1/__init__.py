"""streaming/protocols/kettle_v1."""
