"""The YAML loader of profile files: safe_load that refuses a key given twice in one mapping.

(PyYAML keeps the last of two equal keys, so `ladder:` written twice silently dropped the first.)
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

import yaml
from yaml.constructor import ConstructorError
from yaml.nodes import MappingNode, Node

MERGE_TAG = "tag:yaml.org,2002:merge"


class UniqueKeyLoader(yaml.SafeLoader):
    """yaml.SafeLoader whose mappings refuse a duplicate key (merge keys `<<` may still be overridden)."""

    def construct_mapping(self, node: Node, deep: bool = False) -> dict[Hashable, Any]:
        if isinstance(node, MappingNode):
            seen: set[Any] = set()
            for key_node, _ in node.value:
                if key_node.tag == MERGE_TAG:
                    continue
                key = self.construct_object(key_node, deep=True)
                try:
                    dup = key in seen
                except TypeError:
                    continue  # unhashable: the base constructor says so
                if dup:
                    raise ConstructorError(None, None, f"duplicate key {key!r} (each key may appear once)",
                                           key_node.start_mark)
                seen.add(key)
        return super().construct_mapping(node, deep)


def load_unique(text: str) -> Any:
    """yaml.safe_load, refusing a key given twice in one mapping (a yaml.YAMLError naming the key and line)."""
    return yaml.load(text, Loader=UniqueKeyLoader)  # noqa: S506 - UniqueKeyLoader is a SafeLoader
