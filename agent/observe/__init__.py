"""What a running agent tells about itself: Prometheus metrics (metrics.py, served by
server.py) and its own process's CPU time and memory (process.py)."""
