"""Bytes at the edge: the typed JSON codec, the binary frame codec and the handshake.

Nothing in this package imports trio, reads a clock or does I/O (a test enforces
it). The modules, top down:

Application messages (``codec``, public to the runtime):

- ``codec``: :class:`MessageCodec` -- stable type names, JSON bodies, size bound.
- ``_converter``: the one strict cattrs converter and the JSON byte functions.
- ``_json_names``: the ``__zlink_json_names__`` opt-in (camelCase keys), read when hooks are made.

Frames (``frames``, the public face; ``docs/wire.md`` has the byte tables):

- ``frames``: ``encode(frame) -> bytes``, ``decode(data) -> Frame``, the ``FRAMES`` table.
- ``_frame_types``: the index of the frame classes and ``Frame``, their union, from
  ``_frame_enums`` (command byte, route kind, results), ``_link_frames`` (handshake and
  keepalive, 1..5), ``_request_frames`` (39, 47, 48, 60) and ``_reply_frames`` (20).
- ``_frame_fields``: field encodings (``text8``, ``rid``, ``gen``, ...), ``Reader``/``Writer``.
- ``_frame_checks``: the attrs validators of the frame classes (what this side may send).
- ``_frame_layouts``: one writer and one reader per command but 20; command 39's route table.
- ``_reply_layouts``: the writer and reader of the reply (20); the outcome table.
- ``_frame_rules``: the ``Rule`` row that ties a class to its tag, layout and bodies.
- ``_fast_frames``: struct-based fast paths for commands 39 and 20.

Peer authentication (``handshake``, the public face):

- ``handshake``: ``ServerHandshake`` and ``ClientHandshake``, the two sans-IO machines.
- ``_handshake_side``: what both share -- identities, states, configuration and peer checks.
- ``_handshake_macs``: the HMAC-SHA256 inputs and labels of HELLO and WELCOME.

Dependencies point up this list and never back: the handshake builds frames, and frames
carry the codec's bodies; within a group the public module is built on the private ones.
"""
