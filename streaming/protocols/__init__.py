"""Wire protocols: one sans-I/O codec per protocol, plus the handshake vocabulary they share.

Each codec turns client messages into actions (`base.Send`, `FeedAudio`, ...) and engine events
into `OutMessage`s; none does I/O or reads a clock. The server (`kettle.streaming.server`)
drives them. Imports only `core` of kettle.streaming."""
