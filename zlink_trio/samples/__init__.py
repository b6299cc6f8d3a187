"""Sample applications on zlink_trio, built only on the public API (``import zlink_trio``).

Run ``python -m zlink_trio.samples.demo`` (also ``zlink-trio demo``). Modules, one
concept each:

- ``spots``     -- the sample Spots and messages both demos run: ``Counter`` (an Instance
  Spot: ``Add`` -> ``Total``), ``Room`` (a User Spot: ``RoomSpec`` -> ``Welcome``), and
  ``Events``, where they report what a demo checks;
- ``demo``      -- the demo story on one node, told and checked line by line
  (``--nodes N`` for several processes, ``--render DIR`` for the statechart pages);
- ``demo_mesh`` -- the same story over N node processes on one SQLite file: the driver
  and one node process (``python -m zlink_trio.samples.demo_mesh --serve NAME``).

The ShoppingMall sample will live beside them. This is the top layer: samples import
only names ``zlink_trio`` exports, and one another (``tests/test_layers.py`` enforces it).
"""
