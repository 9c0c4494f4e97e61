"""Peer (Quix Streams) sides of the DSL benchmarks; run in the Quix venv, not ours."""
