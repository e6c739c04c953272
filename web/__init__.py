"""kettle.web: the browser microphone page (assets only)."""
