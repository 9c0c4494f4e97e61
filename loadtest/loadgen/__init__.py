"""Load generator for the query path (``python -m loadtest.loadgen --help``): gRPC through the
routing client or REST through the gateway, open-loop at a rate (latency from the intended send
time, so a stall is not hidden: coordinated omission) or closed-loop with N workers, uniform or
Zipf keys; HDR latency percentiles, errors by status, stale answers; JSON plus a PNG plot.

keys.py      which key each request asks for (uniform, Zipf)
recorder.py  what each answer tells: HDR histograms overall and per second, errors, staleness
targets.py   one query through the async gRPC client or the REST gateway
drive.py     open-loop and closed-loop drivers
plot.py      throughput and latency over time (the figure; plot_events.py: the events numbered,
             their key; plot_text.py: the summary box and what a stale answer is)
"""

from loadtest.loadgen.drive import LoadSpec, run_load
from loadtest.loadgen.recorder import Recorder

__all__ = ["LoadSpec", "Recorder", "run_load"]
