"""Observability: structured log records, the metrics a node records, their exposition.

What operators read is documented in ``docs/observability.md`` (the logger tree, the
``extra`` fields of the records, every metric series).  Modules:

=====================  ==================================================================
``fields``             the names of the ``extra`` fields log records carry, the operation
                       kinds, and :func:`~.fields.outcome_of` (an outcome label)
``logs``               the logger hierarchy under ``zlink_trio`` (one logger per concern)
``recorder``           :class:`~.recorder.Recorder`: what the runtime reports; the base
                       class records nothing (metrics off, the default)
``operations``         :func:`~.operations.observe_operation`: time, count and log one
                       create, cold activation, close or relocation (and trace it)
``tracing``            :class:`~.tracing.Tracing`: OpenTelemetry spans of calls,
                       operations, turns and follow hops; the base class makes none
``events``             the one-line reports: resolve results, follow hops and drops, stale
                       classification, an incarnation's end
``metrics``            :class:`~.metrics.MetricsRecorder`: counters and histograms in
                       plain Python for one node, read by the collector on scrape
``prometheus``         the prometheus-client collector of a registry's nodes (imported
                       only when ``open_node(metrics=...)`` is given)
``exposition``         ``metrics_port=``: ``GET /metrics`` served by a small Trio server
``setup``              ``ObservabilityOptions``, ``open_node``'s metrics options: validated,
                       bound, attached, served
=====================  ==================================================================
"""
