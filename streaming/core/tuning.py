"""What a stream is decoded with, and its changes mid-stream (pure): the config, the settings
the next utterance opens with, and the planner's config (with the engine's partial cadence).

``config.py`` says which fields a running stream may change, and from when: keyterms and the
VAD's at once, language, prompt and word timestamps from the next utterance.
"""

from __future__ import annotations

import dataclasses
import math

from kettle.streaming.core.config import SessionConfig
from kettle.streaming.core.planner import PlannerConfig
from kettle.streaming.core.vad import SegmenterConfig
from kettle.transcribe.types import SAMPLE_RATE


class Tuning:
    def __init__(self, config: SessionConfig) -> None:
        self.config = config
        self.planner = config.planner_config()
        # What the utterances opened from now on are decoded with (reconfigure changes it),
        # and how many reconfigures came so far (SpeechStarted.retunes).
        self.settings = config.utterance_settings()
        self.retunes = 0

    def set_keyterms(self, terms: tuple[str, ...]) -> None:
        self.config = dataclasses.replace(self.config, keyterms=terms)

    def set_endpoint_silence(self, ms: int) -> SegmenterConfig:
        """The VAD's new config; ConfigError outside SessionConfig's range."""
        config = dataclasses.replace(self.config, endpoint_silence_ms=ms)  # validates it
        self.config = config
        self.planner = config.planner_config()  # (its final tail depends on the endpoint)
        return config.segmenter_config()

    def reconfigure(self, config: SessionConfig, fed: int) -> SegmenterConfig:
        """Take ``config``'s changeable fields at stream position ``fed``; the VAD's new
        config. ConfigError if a field is out of range (nothing then changes)."""
        new = self.config.changed_to(config)
        prompt_from = self.settings.prompt_from if new.prompt == self.config.prompt else fed
        self.config = new
        self.settings = new.utterance_settings(prompt_from, self.settings.context_from)
        self.retunes += 1
        self.planner = new.planner_config()
        return new.segmenter_config()

    def new_request(self, fed: int) -> None:
        """The utterances opened from stream position ``fed`` on are a new request's: none
        of the stream's earlier finals is their context or prompt."""
        self.settings = dataclasses.replace(self.settings, prompt_from=fed, context_from=fed)

    def planner_now(self, hint_s: float | None) -> PlannerConfig:
        """The planner's config with the engine's partial cadence ``hint_s``, if it set a
        longer one (an utterance's first partial still comes at the configured interval)."""
        if hint_s is None or hint_s <= self.config.partial_interval_s:
            return self.planner
        if math.isinf(hint_s):
            return dataclasses.replace(self.planner, partials=False)  # partials paused
        return dataclasses.replace(self.planner, later_partial_interval=int(hint_s * SAMPLE_RATE))
