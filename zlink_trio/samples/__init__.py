"""Sample applications, built only on the public API (``import zlink_trio as zl``).

Run ``python -m zlink_trio.samples.demo`` (also ``zlink-trio demo``). Modules, one concept each:

- ``spots``     -- the sample Spots both demos run (Counter, Room), their messages, ``Events``
- ``demo``      -- the demo story on one node, told and checked line by line (``--nodes N``)
- ``demo_mesh`` -- the same story over N node processes on one SQLite file: driver and node
- ``shoppingmall/`` -- the ShoppingMall sample: ``python -m zlink_trio.samples.shoppingmall``
  (``docs/shoppingmall.md``)
- ``chatrooms/``  -- users as Actors in rooms, a drain while they post:
  ``python -m zlink_trio.samples.chatrooms`` (``docs/actors.md``)

This is the top layer: a sample imports only what ``zlink_trio`` exports, and other
samples (``tests/test_layers.py`` enforces it).
"""
