"""`numa-agent status`: the running agent answers over a root-only unix socket next to
its CRI socket. document.py builds the JSON, render.py prints it for people,
server.py serves it (JSON over HTTP on AF_UNIX), client.py asks for it; cpu_map.py
and machine_map.py (with map_style.py) draw it as the machine map, one HTML page."""
