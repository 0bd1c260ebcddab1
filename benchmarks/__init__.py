"""Benchmarks: what the relay costs, how fast and how good placement is (`make bench`)."""
