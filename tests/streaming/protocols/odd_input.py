"""The property every protocol must hold: after any sequence of odd input, speech survives.

``OddInput`` is a hypothesis rule-based state machine over a ``Driver``: each step is audio
of any size (0, 1 byte, odd counts, up to the frame limit and past it; silence or noise),
silence in whole frames, the engine lagging (decodes answered only when it catches up, so
results come between the client's later messages) or catching up, or one of the protocol's
own control messages, settings updates and malformed messages (a subclass adds those as
rules). At the end (``teardown``) it sends
speech — tone words the ``ToneDecoder`` hears only if they arrive sample-exact — then ends
the stream as the protocol says, and checks:

- no exception escaped (hypothesis reports any);
- the words sent after the odd sequence are the transcript's last words, once each, also
  where the stream ends with an error the API documents (``endings``);
- every message the server sent has the API's documented shape (``check_shape``);
- the stream closed as documented (``check_close``).

A step that ends the stream (v1's ``stop``, Deepgram's ``CloseStream``) may come in the
sequence too: then no speech can follow, and only the shapes and the close are checked.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, rule
from kettle.streaming.protocols.base import AudioSetup, Codec
from kettle.transcribe.model.fake_tones import ToneDecoder, tone_speech

from tests.streaming.protocols.driver import Driver, Sent, encode

SPEECH = ["kilo", "lima", "mike"]  # none that a refinement respells (fake.ICAO)
FRAME_LIMIT = 8000  # Limits.max_frame_bytes for these codecs: small, so a step stays cheap


CUTS = st.sampled_from([None, 100, 250, 600])
# A step that ends the stream is drawn with this: it ends it only at 0, so that most
# examples get to the speech (hypothesis shrinks to 0 when the end matters).
RARELY = st.integers(0, 7)


def machine_settings() -> settings:
    """Bounded for the quick suite; ``--hypothesis-profile deep`` runs many more."""
    profile = settings()  # the loaded profile's (tests/conftest.py)
    return settings(
        max_examples=profile.max_examples if profile.max_examples >= 1000 else 50,
        stateful_step_count=12,
        deadline=None,
    )


def audio_sizes() -> st.SearchStrategy[int]:
    return st.one_of(
        st.sampled_from([0, 1, 2, 3, 5, FRAME_LIMIT - 1, FRAME_LIMIT, FRAME_LIMIT + 1]),
        st.integers(0, FRAME_LIMIT + 2),
    )


class OddInput(RuleBasedStateMachine):
    """Subclasses make ``driver`` and add the protocol's rules; see the module's docstring."""

    # Whether the wire audio is one byte stream across messages (a remainder waits for the
    # next message) or each message holds whole samples (OpenAI's base64 appends).
    byte_stream = True

    def __init__(self) -> None:
        super().__init__()
        self.driver = self.make_driver()
        self.audio_bytes = 0  # since the last format switch: where a sample frame begins
        self.ended = False
        self._format = self.driver.audio
        self.cut_ms: int | None = None  # speech between finalizes, if any
        self.ending = 0  # which of endings() ends the speech

    def make_driver(self) -> Driver:
        raise NotImplementedError

    # -- the client's audio -------------------------------------------------------------------
    def send_audio(self, data: bytes) -> None:
        """One audio message in the protocol's own form."""
        raise NotImplementedError

    def end_stream(self) -> None:
        """Say there is no more audio, as the protocol's clients do."""
        raise NotImplementedError

    def finalize(self) -> bool:
        """Ask for the final of what was sent so far, if the protocol can (False: it can't)."""
        return False

    def audio_message(self, data: bytes) -> None:
        if self.driver.audio != self._format:
            self._format, self.audio_bytes = self.driver.audio, 0
        self.send_audio(data)
        if self.takes(data):
            self.audio_bytes += len(data)

    def takes(self, data: bytes) -> bool:
        """Whether the protocol adds ``data`` to the audio stream: one message over the
        limit is refused whole (a protocol that ends the stream on it, or on an empty
        message, sets ``ended`` in ``send_audio``)."""
        return len(data) <= FRAME_LIMIT

    def transcript_words(self) -> list[str]:
        """The transcript's words in order, as the client reads them from the messages the
        server sent (a protocol's machine reads its own final messages; by default the
        engine's finals, before any codec)."""
        return " ".join(f.text for f in self.driver.finals).split()

    @rule(size=audio_sizes(), noise=st.booleans(), seed=st.integers(0, 2**16))
    def audio(self, size: int, noise: bool, seed: int) -> None:
        if noise:
            data = np.random.default_rng(seed).integers(0, 256, size, dtype=np.uint8).tobytes()
        else:
            data = bytes(size)
        self.audio_message(data)

    @rule(seconds=st.sampled_from([0.02, 0.1, 0.3, 0.7, 1.5]))
    def silence(self, seconds: float) -> None:
        self.align()
        data = encode(np.zeros(round(seconds * 16000), np.float32), self.format)
        step = FRAME_LIMIT - FRAME_LIMIT % self.frame_bytes(self.format)
        for i in range(0, len(data), step):  # (in messages under the limit)
            self.audio_message(data[i : i + step])

    @rule()
    def engine_lags(self) -> None:
        """From now on decodes wait (a busy engine): the stream's results come later, between
        the client's next messages, as they do on a real connection."""
        self.driver.lagging = True

    @rule()
    def engine_catches_up(self) -> None:
        self.driver.catch_up()

    @initialize(way=st.integers(0, 3))
    def choose_ending(self, way: int) -> None:
        """Which of ``endings()`` ends the speech at the end (0: the protocol's own end)."""
        self.ending = way

    def endings(self) -> list[Callable[[], None]]:
        """The ways a client's stream may end after its speech: the protocol's own end
        first, then the messages the API answers with an error that ends the stream (a
        documented error, and still nothing of the speech before it lost)."""
        return [self.end_stream]

    @initialize(ms=CUTS)
    def cut_speech(self, ms: int | None) -> None:
        """The speech at the end comes with a finalize after every ``ms`` of it (chosen
        once per example, so that most examples cut it)."""
        self.cut_ms = ms

    # -- the end ------------------------------------------------------------------------------
    @property
    def format(self) -> AudioSetup:
        return self.driver.audio

    def align(self) -> None:
        """Complete the sample frame a byte stream is in the middle of (as a client that sent
        an odd byte count would, with its next message)."""
        if not self.byte_stream:
            return
        frame = self.frame_bytes(self.format)
        if self.driver.audio != self._format:
            self._format, self.audio_bytes = self.driver.audio, 0
        rest = -self.audio_bytes % frame
        if rest:
            self.audio_message(bytes(rest))

    @staticmethod
    def frame_bytes(setup: AudioSetup) -> int:
        width = 4 if setup.encoding == "pcm_f32le" else 1 if setup.encoding == "mulaw" else 2
        return width * setup.channels

    def teardown(self) -> None:
        driver = self.driver
        assert self.ended or driver.closed is None, f"closed ({driver.closed}) by no step that ends"
        if not self.ended:
            self.align()
            speech = np.concatenate([tone_speech(SPEECH), np.zeros(16000, np.float32)])
            data = encode(speech, self.format)
            cut = len(data)
            if self.cut_ms is not None:
                samples = round(self.cut_ms * self.format.sample_rate / 1000)
                cut = samples * self.frame_bytes(self.format)
            for i in range(0, len(data), cut):
                piece = data[i : i + cut]
                for j in range(0, len(piece), 3200):
                    self.audio_message(piece[j : j + 3200])
                if self.cut_ms is not None:
                    self.finalize()
            ways = self.endings()
            ways[self.ending % len(ways)]()
            self.ended = True
            driver.catch_up()
            words = self.transcript_words()
            assert words[-len(SPEECH) :] == SPEECH, f"speech after odd input lost: {words}"
            assert all(words.count(w) == 1 for w in SPEECH), f"said twice: {words}"
        driver.catch_up()
        for message in driver.sent:
            self.check_shape(message)
        self.check_close()

    def check_shape(self, message: Sent) -> None:
        raise NotImplementedError

    def check_close(self) -> None:
        raise NotImplementedError


def tone_driver(codec: Codec) -> Driver:
    return Driver(codec, decoder=ToneDecoder())
