"""The one exception root of kettle and its few subclasses.

Bad input from a remote peer never escapes as one of these; the server and sessions turn it
into an error event or close code. Entry points catch ``KettleError`` and print its message
as one line, without a traceback.
"""

from __future__ import annotations


class KettleError(Exception):
    """Root of every error kettle raises on purpose."""


class ModelError(KettleError):
    """A model is unknown, not installed, or its weights fail the checksum."""


class AudioError(KettleError):
    """Audio could not be read or decoded (wrong type, truncated, empty)."""


class ConfigError(KettleError):
    """A configuration value is invalid."""


class DecodeError(KettleError):
    """A decode batch failed inside the model."""
