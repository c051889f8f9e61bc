"""goodbench: goodput benchmarking and load testing for LLM serving."""

__version__ = "0.1.0"
