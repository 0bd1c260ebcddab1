"""Reading the YAML files people hand the agent (configuration, scenarios, pod
manifests): safe loading only, and errors that say which file and why."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml


class YamlFileError(ValueError):
    """A file that cannot be read or is not YAML; the message names it."""


def read_yaml_file(path: str | Path, what: str, *, all_documents: bool = False) -> Any:
    """The file's YAML (a list of its documents with `all_documents`).

    `what` names the kind of file in messages: "cannot read scenario x.yaml: ...".
    """
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as err:
        raise YamlFileError(f"cannot read {what} {path}: {err.strerror or err}") from None
    try:
        return list(yaml.safe_load_all(text)) if all_documents else yaml.safe_load(text)
    except yaml.YAMLError as err:
        raise YamlFileError(f"{what} {path} is not valid YAML: {err}") from None
