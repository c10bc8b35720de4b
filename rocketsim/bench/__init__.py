"""Benchmarks the project ships: ``python -m rocketsim.bench core|send|pipeline``."""
