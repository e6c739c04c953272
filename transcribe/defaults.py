"""Decoding numbers shared by files and streams, each named once."""

from __future__ import annotations

# The beam of a file's windows and of a stream's finals (SessionConfig.final_beam_size);
# why 5 for finals: streaming/core/config.py.
BEAM_SIZE = 5
# The most tokens a partial (or any request without its own cap) may generate: a partial
# covers at most a few seconds of speech, and a runaway loop stops here.
PARTIAL_MAX_TOKENS = 96
