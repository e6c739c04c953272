"""Decoding numbers shared by files and streams, each named once."""

from __future__ import annotations

# The beam of a file's windows and of a stream's finals (SessionConfig.final_beam_size);
# why 5 for finals: streaming/core/config.py.
BEAM_SIZE = 5
# The most new tokens a partial generates (a stream's partial requests ask for it; the
# adapter caps a partial request that names no cap of its own at AdapterConfig's default).
PARTIAL_MAX_TOKENS = 96
