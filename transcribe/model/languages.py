"""The languages Whisper can be told to transcribe, by their ISO 639-1 codes."""

from __future__ import annotations

# Whisper's languages that have an ISO 639-1 code (Whisper's own list also has haw and yue).
_LANGUAGE_CODES = (
    "af am ar as az ba be bg bn bo br bs ca cs cy da de el en es et eu fa fi fo fr gl gu ha "
    "he hi hr ht hu hy id is it ja jw ka kk km kn ko la lb ln lo lt lv mg mi mk ml mn mr ms "
    "mt my ne nl nn no oc pa pl ps pt ro ru sa sd si sk sl sn so sq sr su sv sw ta te tg th "
    "tk tl tr tt uk ur uz vi yi yo zh "
)
LANGUAGES = frozenset(_LANGUAGE_CODES.split())
