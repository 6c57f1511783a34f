"""``gpurt demo`` (``make demo``): the demo's workload on a local platform, and its report.

The demo sits above the runtime because its report draws with the Python API's plots (``gpurt.client.plots``),
the same pictures a notebook gets from ``result.plot()``: ``workload`` is the batch of risk jobs, ``run``
publishes it and gathers the results, ``report`` writes the Markdown and HTML report with its figures.
"""
