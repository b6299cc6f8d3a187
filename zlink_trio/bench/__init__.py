"""The benchmark: ``python -m zlink_trio.bench`` (also ``zlink-trio bench``).

Every figure beside its physical baseline, measured in the same run; the keys are a
contract (``docs/performance.md`` names each one). Modules, one concept each:

- ``suite``  -- the whole run: :func:`~zlink_trio.bench.suite.run` measures every figure,
  ``main`` prints a table or (``--json``) one JSON line;
- ``local``  -- local requests beside a raw Trio memory channel, get-or-create
  convergence, memory per idle Spot; the benchmark Spots;
- ``cold``   -- cold activations per store backend, with the store calls and the
  Reserve / CommitReady latency behind them;
- ``stores`` -- private stores per backend, store-call counting, transaction figures
  (``python -m zlink_trio.bench.stores``);
- ``remote`` -- Spot requests between two processes beside a raw websocket echo
  (``python -m zlink_trio.bench.remote``);
- ``peer``   -- the other process of the remote figures (``python -m
  zlink_trio.bench.peer``, started by ``remote``);
- ``raw_ws`` -- the raw websocket echo baseline, the only user of trio-websocket (the
  ``bench`` extra); without it the raw figures are ``null``;
- ``output`` -- how every benchmark program prints its figures;
- ``__main__`` -- ``python -m zlink_trio.bench``.

This layer sits above the public API: it may import it and the layers below, never
the command line or the samples. Nothing here is a test: no figure is asserted.
"""
