"""Bytes at the edge: the typed JSON codec, the binary frame codec and the handshake.

Nothing in this package imports trio, reads a clock or does I/O (a test enforces
it). The modules, top down:

Application messages (``codec``, public to the runtime):

- ``codec``: :class:`MessageCodec` -- stable type names, JSON bodies, size bound.
- ``_converter``: the one strict cattrs converter and the JSON byte functions.
- ``_json_names``: the ``__zlink_json_names__`` opt-in (camelCase keys), read when hooks are made.

Frames (``frames``, the public face; ``docs/wire.md`` has the byte tables):

- ``frames``: the table of commands, ``encode(frame) -> bytes``, ``decode(data) -> Frame``,
  ``LinkDecoder`` (one link's readers and their caches), and the writers of the hot
  commands 39 and 20 with the pre-encoders of their slots.
- ``_frame_types``: the index of the frame classes and ``Frame``, their union.
- ``_frame_enums``: the command byte, route kind, node action and results.
- ``_link_frames``: the handshake and keepalive frames (commands 1..5).
- ``_request_frames``: the Spot message (39) and its routes, 47, 48, 60 and 61.
- ``_reply_frames``: the reply (20) and its outcomes.
- ``call_metadata``: command 39's metadata bytes -- named text fields (a call's W3C
  trace context) -- written and read.
- ``_frame_layouts``: the field encodings (``text8``, ``rid``, ``gen``, ...) and the
  compiler that makes one writer and one reader per command from the classes. Each
  frame class is its layout: its attrs fields in wire order, each with its encoding.

Peer authentication (``handshake``, the public face):

- ``handshake``: ``ServerHandshake`` and ``ClientHandshake``, the two sans-IO machines.
- ``_handshake_side``: what both share -- identities, states, configuration and peer checks.
- ``_handshake_macs``: the HMAC-SHA256 inputs and labels of HELLO and WELCOME.

Dependencies point up this list and never back: the handshake builds frames, and frames
carry the codec's bodies; within a group the public module is built on the private ones
(the frame classes on ``_frame_layouts``, which compiles them when ``frames`` asks).
"""
