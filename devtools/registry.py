"""A local, read-only OCI registry for tests on machines with no network: it
serves a busybox image (every applet of Debian's busybox-static) under any
repository name and tag (one image per name), so a containerd pointed at it
(hosts.toml) can pull the images conformance suites name. Development only.
"""

from __future__ import annotations

import json
import re
import subprocess
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from devtools.oci_image import Blob, find_busybox, image_blobs, layer_blob

_MANIFEST = re.compile(r"^/v2/(.+)/manifests/([^/]+)$")
_BLOB = re.compile(r"^/v2/(.+)/blobs/(sha256:[0-9a-f]{64})$")


def busybox_layer() -> Blob:
    """One layer: Debian's busybox-static with every applet it has."""
    binary = find_busybox()
    listed = subprocess.run([str(binary), "--list"], capture_output=True, text=True, check=True)
    applets = tuple(sorted(set(listed.stdout.split()) - {"busybox"}))
    return layer_blob(binary.read_bytes(), applets)


def image_for(name: str, layer: Blob) -> tuple[Blob, Blob]:
    """The manifest and config of repository `name`: one layer shared by all, and a
    config naming the repository, so each name is its own image (its own digest), as
    a real registry's images are."""
    return image_blobs(layer, cmd=("/bin/sh",), labels={"repository": name})


class LocalRegistry:
    """Serves on 127.0.0.1 (a free port) until `stop`."""

    def __init__(self) -> None:
        layer = busybox_layer()
        blobs = {layer.digest: layer}
        lock = threading.Lock()

        def manifest_of(name: str) -> Blob:
            manifest, config = image_for(name, layer)
            with lock:
                blobs[manifest.digest] = manifest
                blobs[config.digest] = config
            return manifest

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *_args: object) -> None:
                pass

            def do_HEAD(self) -> None:
                self._answer(body=False)

            def do_GET(self) -> None:
                self._answer(body=True)

            def _answer(self, body: bool) -> None:
                path = self.path.split("?", 1)[0]
                blob: Blob | None = None
                if path in ("/v2", "/v2/"):
                    blob = Blob("application/json", b"{}")
                elif (m := _MANIFEST.match(path)) is not None:
                    ref = m.group(2)
                    if ref.startswith("sha256:"):
                        with lock:
                            blob = blobs.get(ref)
                    else:
                        blob = manifest_of(m.group(1))
                elif (m := _BLOB.match(path)) is not None:
                    with lock:
                        blob = blobs.get(m.group(2))
                if blob is None:
                    data = json.dumps({"errors": [{"code": "NOT_FOUND"}]}).encode()
                    self.send_response(404)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    if body:
                        self.wfile.write(data)
                    return
                self.send_response(200)
                self.send_header("Content-Type", blob.media_type)
                self.send_header("Content-Length", str(len(blob.data)))
                self.send_header("Docker-Content-Digest", blob.digest)
                self.end_headers()
                if body:
                    self.wfile.write(blob.data)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def write_hosts(self, config_path: Path, registries: tuple[str, ...]) -> None:
        """containerd's hosts.toml per registry name, all pointing here."""
        for name in registries:
            d = config_path / name
            d.mkdir(parents=True, exist_ok=True)
            hosts = f'server = "{self.url}"\n\n[host."{self.url}"]\n'
            (d / "hosts.toml").write_text(hosts + '  capabilities = ["pull", "resolve"]\n')

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(5)
