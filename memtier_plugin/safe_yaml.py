"""Bounded YAML: the one safe loader for config files, override values, hooks files and learned files.

Everything memtier reads as YAML may come from a hand edit or from an untrusted
file, so :func:`parse_yaml` composes the document within bounds before any
object is built: no nesting deeper than ``MAX_DEPTH``, no aliases that expand
beyond ``MAX_NODES`` values (a "billion laughs" file would otherwise grow to
gigabytes), no alias that refers to itself, no scalar longer than ``MAX_TEXT``
characters, no key given twice, no control character. Every problem is one
:class:`~memtier_plugin.errors.ConfigError` line naming the file, the key path
and the line.
"""

from __future__ import annotations

from typing import Any, Callable

import yaml

from .errors import ConfigError

MAX_DEPTH = 12  # nesting levels (a real config needs 4)
MAX_NODES = 10_000  # values after alias expansion
MAX_TEXT = 4096  # characters in one value (PATH_MAX)


def show(value: Any, width: int = 60) -> str:
    """repr() of a bad value, cut so that a 400-digit number or a huge list stays one short line."""
    text = repr(value)
    return text if len(text) <= width else f"{text[:width - 1]}… ({len(text)} characters)"


class BoundedLoader(yaml.SafeLoader):
    """yaml.SafeLoader that bounds nesting while composing and names the key of a value it cannot build."""

    def __init__(self, stream: str, where: str, max_depth: int = MAX_DEPTH, max_nodes: int = MAX_NODES):
        super().__init__(stream)
        self.where = where
        self.max_depth, self.max_nodes = max_depth, max_nodes
        self.path: list[str] = []  # key path of the node being composed
        self.names: dict[int, str] = {}  # id(node) -> its key path, filled by _check_graph
        self.scalars: list = []  # (scalar node, key path), filled by _check_graph
        self.checkpoint: Callable[[], None] | None = None  # called at every node (a background parse yields)

    def compose_node(self, parent, index):
        if self.checkpoint is not None:
            self.checkpoint()
        if isinstance(index, yaml.ScalarNode):
            self.path.append(str(index.value)[:40])
        elif isinstance(index, int):
            self.path.append(f"[{index}]")
        else:
            self.path.append("")  # the document root, or a mapping key being composed
        try:
            if len(self.path) > self.max_depth:
                mark = self.peek_event().start_mark
                raise ConfigError(f"{self.where}: {_dotted(self.path)}: nested deeper than {self.max_depth} levels "
                                  f"(line {mark.line + 1})")
            return super().compose_node(parent, index)
        finally:
            self.path.pop()

    def construct_object(self, node, deep=False):
        if self.checkpoint is not None:
            self.checkpoint()
        try:
            return super().construct_object(node, deep)
        except (ValueError, OverflowError) as exc:  # e.g. a date like 2024-13-45
            key = self.names.get(id(node)) or f"line {node.start_mark.line + 1}"
            raise ConfigError(f"{self.where}: {key}: cannot read {show(getattr(node, 'value', ''), 40)}: "
                              f"{str(exc).splitlines()[0] if str(exc) else type(exc).__name__}") from None


def _dotted(path: list[str]) -> str:
    out = ""
    for part in path:
        if part:
            out += part if part.startswith("[") or not out else "." + part
    return out or "top level"


def _check_graph(loader: BoundedLoader, root) -> None:
    """Refuse a composed document whose aliases expand too far, loop, or hide an over-long value.

    Aliased nodes are shared in the graph, so this walk is memoised by node:
    linear in the file, however far the aliases would expand when built.
    """
    where, max_depth, max_nodes = loader.where, loader.max_depth, loader.max_nodes
    memo: dict[int, tuple[int, int]] = {}  # id(node) -> (values after expansion, height)
    open_nodes: set[int] = set()

    def walk(node, path: list[str]) -> tuple[int, int]:
        key = id(node)
        if key in memo:
            size, height = memo[key]
            if len(path) + height > max_depth:
                raise ConfigError(f"{where}: {_dotted(path)}: aliases nest deeper than {max_depth} levels")
            return size, height
        if key in open_nodes:
            raise ConfigError(f"{where}: {_dotted(path)}: an alias refers to itself")
        if len(path) >= max_depth:
            raise ConfigError(f"{where}: {_dotted(path)}: aliases nest deeper than {max_depth} levels")
        loader.names.setdefault(key, _dotted(path))
        if isinstance(node, yaml.ScalarNode):
            if len(node.value) > MAX_TEXT:
                raise ConfigError(f"{where}: {_dotted(path)}: value too long ({len(node.value)} characters; "
                                  f"at most {MAX_TEXT})")
            loader.scalars.append((node, _dotted(path)))
            memo[key] = (1, 1)
            return memo[key]
        open_nodes.add(key)
        size, height = 1, 1
        if isinstance(node, yaml.MappingNode):
            seen: dict[str, int] = {}
            for k, v in node.value:
                label = str(k.value)[:40] if isinstance(k, yaml.ScalarNode) else "?"
                if isinstance(k, yaml.ScalarNode) and k.tag != "tag:yaml.org,2002:merge":
                    if k.value in seen:
                        raise ConfigError(f"{where}: {_dotted(path + [label])}: given twice "
                                          f"(lines {seen[k.value]} and {k.start_mark.line + 1})")
                    seen[k.value] = k.start_mark.line + 1
                for child in (k, v):
                    s, h = walk(child, path + [label])
                    size, height = size + s, max(height, h + 1)
                    if size > max_nodes:
                        break
                if size > max_nodes:
                    break
        else:
            for i, child in enumerate(node.value):
                s, h = walk(child, path + [f"[{i}]"])
                size, height = size + s, max(height, h + 1)
                if size > max_nodes:
                    break
        open_nodes.discard(key)
        if size > max_nodes:
            raise ConfigError(f"{where}: {_dotted(path)}: expands to more than {max_nodes} values "
                              "(aliases: a config needs a few dozen)")
        memo[key] = (size, height)
        return memo[key]

    walk(root, [])


class NotYaml(ConfigError):
    """The text is not YAML at all (an override value then stays plain text)."""


def parse_yaml(text: str, where: str, *, max_depth: int = MAX_DEPTH, max_nodes: int = MAX_NODES,
               checkpoint: Callable[[], None] | None = None) -> Any:
    """Safe-load one YAML document within the bounds above; every problem is one ConfigError line.

    ``max_depth`` and ``max_nodes`` default to a config's bounds; other YAML data (hooks files) passes its own.
    ``checkpoint`` is called at every node composed and built (a parse in a background thread pauses there,
    so the threads serving events are not kept waiting for the interpreter lock).
    """
    bad = yaml.reader.Reader.NON_PRINTABLE.search(text)
    if bad is not None:  # PyYAML refuses these too, without naming a line or key
        line = text.count("\n", 0, bad.start()) + 1
        key = key_at(text, bad.start())
        raise NotYaml(f"{where}: {key + ': ' if key else ''}control character {bad.group()!r} is not allowed "
                       f"(line {line})")
    loader = BoundedLoader(text, where, max_depth, max_nodes)
    loader.checkpoint = checkpoint
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        _check_graph(loader, node)
        return loader.construct_document(node)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        at = f" line {mark.line + 1}:" if mark is not None else ""
        problem = getattr(exc, "problem", None) or (str(exc).splitlines() or [type(exc).__name__])[0]
        raise NotYaml(f"{where}:{at} not valid YAML: {problem}") from None
    finally:
        loader.dispose()


def key_at(text: str, index: int) -> str | None:
    """The key path of the value holding character ``index`` of ``text`` (None when none or not YAML)."""
    loader = BoundedLoader(yaml.reader.Reader.NON_PRINTABLE.sub(" ", text), "")  # same length, same indexes
    try:
        node = loader.get_single_node()
        if node is not None:
            _check_graph(loader, node)
    except (yaml.YAMLError, ConfigError):
        return None
    finally:
        loader.dispose()
    return next((key for node, key in loader.scalars
                 if node.start_mark.index <= index < max(node.end_mark.index, node.start_mark.index + 1)), None)
