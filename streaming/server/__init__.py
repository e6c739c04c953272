"""The server: Starlette on uvicorn, every protocol and plain HTTP on one port, each WebSocket
connection run by one connection runner around its protocol's sans-I/O codec.

Layout (under kettle.streaming.server, codecs under kettle.streaming.protocols):

    server.py        KettleServer: lifecycle (uvicorn, model, drain); builds the services
    services.py      Services: what the routes use (gate, connections, uploads, serving, ...)
    serving.py       Serving: the engine being served and whether the server drains
    config.py        ServerConfig: what `kettle serve` sets about the server, validated
    gate.py          ConnectionGate: admission (401/400/403/426/503) and the session slots
    sockets.py       the listening sockets (buffers, keepalive) and the stopping signals
    app.py           the Starlette app, assembled from route providers
    http_routes.py   /healthz /readyz /metrics /v1/info and the page's assets
    catalog.py       the WebSocket protocols and REST APIs served, listed once
    ws_endpoint.py   ASGI WebSocket endpoint: admit -> accept (echo subprotocol) -> run -> release
    connections.py   Connections: a codec and a runner per admitted connection; shutdown
    runner.py        ConnectionRunner: reader / pump / writer around one codec and one stream
    intake.py        Intake: a codec's inbound actions (audio, finalize, stop) and the budget
    writer.py        Writer: a codec's outbound messages, queued, written, then the close
    connection.py    ConnectionState: its phases and their transitions, deadlines, rate (pure)
    ingress.py       AudioIngress: wire bytes -> PCM decoder -> engine stream, arrival times
    transport.py     Transport, PeerGone: one accepted WebSocket as the runner sees it
    access.py        API keys (digests only), session slots, the message rate's token bucket
    protocols/limits.py      Limits: every connection's limits, derived from ServerConfig
    protocols/handshake.py   ProtocolRoute: per-protocol credentials and parameters
    protocols/base.py        the Codec interface and its actions (Send, FeedAudio, ...)
    protocols/kettle_v1/     docs/protocol.md (kettle v1) on /v1/stream

Adding a WebSocket protocol (a package of its own under protocols/, e.g. `protocols/openai/`:
its codec in `realtime.py`, its route in `realtime_route.py`):

1. Write a codec class with the methods of `protocols.base.Codec`: `start()`,
   `on_text(text, rate)`, `on_binary(data)`, `stream_setup()`, `on_leftover(...)`,
   `on_event(event, received)`, `fatal_error(message)`. Each returns actions (`Send`,
   `FeedAudio`, `Finalize`, `Stop`, `Close`); none does I/O, reads a clock or raises on bad
   client input. Audio that arrives inside text messages (base64) becomes `FeedAudio` of the
   decoded bytes; call `rate.check()` only for messages that may be dropped. `Done` must yield
   a `Send` whose OutMessage has `closing=True`; the runner closes after sending it. Test the
   codec alone with plain values (see tests/streaming/protocols/).
2. Declare its route: `ROUTE = ProtocolRoute(path, name, credentials, prepare, info, refusal)`.
   `credentials(request)` returns every key the client presents (see
   `handshake.bearer_credentials` / `subprotocol_credentials`); `prepare(request, model)`
   parses the query (raise `HandshakeRefused(400, why)`) and returns
   `Prepared(make_codec, subprotocol)`, where `subprotocol` is the offered name to echo
   (`handshake.choose_subprotocol`; never the one carrying a key). `refusal(status, message)`
   renders refusals in the protocol's error shape (default: plain text).
3. Add the route to `catalog.websocket_protocols()`. It then gets the same admission (401 first,
   then 400, then 503 + Retry-After), slots, limits, metrics, shutdown and /v1/info entry.
   A protocol with an idle timeout of its own picks it from the limits
   (`ProtocolRoute(..., idle_timeout=lambda limits: ...)`).

Adding plain HTTP routes (REST): write a module with `routes(services) -> list[BaseRoute]`
(Starlette `Route`s; `Services` gives `engine`, `authenticator`, `model_info`, `config`,
`metrics`, `ready`, `uploads`, `serving.upload_engine()`) and add it to
`app.ROUTE_PROVIDERS` before `http_routes.asset_routes`.
"""
