"""The Wyoming protocol (Home Assistant's speech-to-text link) as a sans-I/O codec: framing, the
transcript chunks, the codec (docs/wyoming.md)."""
