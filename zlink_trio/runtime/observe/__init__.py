"""Observability: structured log records, the metrics a node records, their exposition.

What operators read is documented in ``docs/observability.md`` (the logger tree, the
``extra`` fields of the records, every metric series).  Modules:

=====================  ==================================================================
``fields``             the names of the ``extra`` fields log records carry, the operation
                       kinds, and :func:`~.fields.outcome_of` (an outcome label)
``logs``               the logger hierarchy under ``zlink_trio`` (one logger per concern)
``recorder``           :class:`~.recorder.Recorder`: what the runtime reports; the base
                       class records nothing (metrics off, the default);
                       :func:`~.recorder.observe_operation` times and logs one operation
``metrics``            :class:`~.metrics.MetricsRecorder`: counters and histograms in
                       plain Python for one node, read by the collector on scrape
``prometheus``         the prometheus-client collector of a registry's nodes (imported
                       only when ``open_node(metrics=...)`` is given)
``exposition``         ``metrics_port=``: ``GET /metrics`` served by a small Trio server
=====================  ==================================================================
"""
