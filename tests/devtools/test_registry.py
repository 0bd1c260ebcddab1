"""The local registry serves one image under any name, by the distribution API's
paths, with digests that match the bytes."""

from __future__ import annotations

import hashlib
import json
import urllib.error
import urllib.request
from collections.abc import Iterator

import pytest

from devtools.oci_image import ImageBuildError, find_busybox
from devtools.registry import LocalRegistry


@pytest.fixture
def registry() -> Iterator[LocalRegistry]:
    try:
        find_busybox()
    except ImageBuildError as err:
        pytest.skip(str(err))
    served = LocalRegistry()
    yield served
    served.stop()


def _get(url: str) -> tuple[bytes, dict[str, str]]:
    with urllib.request.urlopen(url, timeout=10) as answer:
        return answer.read(), dict(answer.headers)


@pytest.mark.parametrize("name", ["e2e-test-images/busybox", "library/anything"])
def test_any_name_resolves_to_the_image_and_its_blobs(registry: LocalRegistry, name: str) -> None:
    assert _get(f"{registry.url}/v2/")[0] == b"{}"
    body, headers = _get(f"{registry.url}/v2/{name}/manifests/1.29-2")
    digest = "sha256:" + hashlib.sha256(body).hexdigest()
    assert headers["Docker-Content-Digest"] == digest
    manifest = json.loads(body)
    for descriptor in [manifest["config"], *manifest["layers"]]:
        blob, _ = _get(f"{registry.url}/v2/{name}/blobs/{descriptor['digest']}")
        assert "sha256:" + hashlib.sha256(blob).hexdigest() == descriptor["digest"]
    assert _get(f"{registry.url}/v2/{name}/manifests/{digest}")[0] == body


def test_each_name_is_its_own_image(registry: LocalRegistry) -> None:
    one = _get(f"{registry.url}/v2/a/busybox/manifests/1")[1]["Docker-Content-Digest"]
    two = _get(f"{registry.url}/v2/b/httpd/manifests/1")[1]["Docker-Content-Digest"]
    again = _get(f"{registry.url}/v2/a/busybox/manifests/2")[1]["Docker-Content-Digest"]
    assert one != two and one == again


def test_unknown_blobs_are_not_found(registry: LocalRegistry) -> None:
    with pytest.raises(urllib.error.HTTPError) as err:
        _get(f"{registry.url}/v2/x/blobs/sha256:{'0' * 64}")
    assert err.value.code == 404
