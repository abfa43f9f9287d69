"""The deployment config file shared by ``tenxgraph serve`` and ``tenxgraph worker``.

10xGraph's API server reads a JSON file (``agentflow.json``; tenxgraph also looks for
``10xgraph.json``) whose ``"agent"`` names the compiled graph as ``"module:attr"``; the attribute
is a ``CompiledGraph``, or a function (sync or async) that returns one. tenxgraph reads the same
file so that a team's existing config works unchanged:

* ``agent`` (required): ``"module:attr"``, imported with the config file's folder first on
  ``sys.path`` (10xGraph's server runs from that folder).
* ``env``: a ``.env`` file (relative to the config file) whose ``KEY=value`` lines are set in
  ``os.environ`` before the graph is imported; variables already set win, as with
  python-dotenv's default.
* ``auth``: ``null`` / absent (no authentication), ``"jwt"`` (a shared secret from the
  ``JWT_SECRET_KEY`` and ``JWT_ALGORITHM`` variables, as 10xGraph documents), or
  ``{"method": "custom", "path": "module:attr"}`` naming a ``BaseAuth`` subclass.
* Any other key is kept in :attr:`AppConfig.extra` for the component that understands it
  (the server validates its own keys and refuses what it does not implement).

This module is neutral: it imports nothing of the server or the worker, which both import it.
"""

from __future__ import annotations

import importlib
import inspect
import json
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tenxgraph.core.exceptions import ConfigError

if TYPE_CHECKING:
    from tenxgraph.core.graph.compiled_graph import CompiledGraph

__all__ = [
    "CONFIG_FILE_NAMES",
    "AppConfig",
    "apply_env",
    "find_config",
    "import_attr",
    "load_config",
    "load_graph",
]

#: File names looked for, in order, when no path is given.
CONFIG_FILE_NAMES: tuple[str, ...] = ("10xgraph.json", "agentflow.json")


@dataclass(frozen=True)
class AppConfig:
    """A parsed deployment config file.

    Attributes:
        path: the config file (absolute).
        agent: the graph's import spec, ``"module:attr"``.
        env_file: the ``.env`` file named by ``env`` (absolute), or ``None``.
        auth: the ``auth`` value as written (``None``, ``"jwt"`` or a dict).
        extra: every other top-level key, as written.
    """

    path: Path
    agent: str
    env_file: Path | None = None
    auth: str | dict[str, Any] | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def folder(self) -> Path:
        """The folder holding the config file (modules are imported from there)."""
        return self.path.parent


def find_config(folder: str | os.PathLike[str] = ".") -> Path:
    """The first of :data:`CONFIG_FILE_NAMES` present in ``folder``.

    Raises:
        ConfigError: ``CONFIG_001`` when neither file exists.
    """
    base = Path(folder)
    for name in CONFIG_FILE_NAMES:
        if (base / name).is_file():
            return (base / name).resolve()
    raise ConfigError(
        f"no {' or '.join(CONFIG_FILE_NAMES)} in {str(base.resolve())!r}; pass --config PATH",
        context={"key": "config"},
    )


def _spec(value: Any, key: str) -> str:
    if not isinstance(value, str) or value.count(":") != 1 or not all(value.split(":")):
        raise ConfigError(
            f"{key!r} must be 'module:attribute' (e.g. 'graph.react:app'), got {value!r}",
            context={"key": key},
        )
    return value


def load_config(path: str | os.PathLike[str]) -> AppConfig:
    """Read and check a config file; nothing is imported yet.

    Args:
        path: the JSON file (``10xgraph.json`` or ``agentflow.json``, any name accepted).

    Returns:
        The parsed config.

    Raises:
        ConfigError: ``CONFIG_001`` when the file is missing, is not a JSON object, has no
            valid ``agent``, names an ``env`` file that does not exist, or an ``auth`` value of
            another shape than documented above.
    """
    p = Path(path).resolve()
    try:
        raw = json.loads(p.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"config file {str(p)!r} not found", context={"key": "config"}) from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ConfigError(
            f"config file {str(p)!r} is not readable JSON: {exc}", context={"key": "config"}
        ) from None
    if not isinstance(raw, dict):
        raise ConfigError(
            f"config file {str(p)!r} must hold a JSON object", context={"key": "config"}
        )
    data = dict(raw)
    agent = _spec(data.pop("agent", None), "agent")
    env_file: Path | None = None
    env = data.pop("env", None)
    if env is not None:
        if not isinstance(env, str) or not env:
            raise ConfigError("'env' must name a .env file", context={"key": "env"})
        env_file = (p.parent / env).resolve()
        if not env_file.is_file():
            raise ConfigError(f"env file {str(env_file)!r} not found", context={"key": "env"})
    auth = data.pop("auth", None)
    if auth is not None and auth != "jwt":
        if not (
            isinstance(auth, dict)
            and auth.get("method") == "custom"
            and set(auth) <= {"method", "path"}
        ):
            raise ConfigError(
                '\'auth\' must be null, "jwt" or {"method": "custom", "path": '
                f'"module:attr"}}, got {auth!r}',
                context={"key": "auth"},
            )
        _spec(auth.get("path"), "auth.path")
    return AppConfig(path=p, agent=agent, env_file=env_file, auth=auth, extra=data)


def _apply_env_file(env_file: Path) -> None:
    for n, line in enumerate(env_file.read_text(encoding="utf-8").splitlines(), 1):
        text = line.strip()
        if not text or text.startswith("#"):
            continue
        if text.startswith("export "):
            text = text[len("export ") :].lstrip()
        key, sep, value = text.partition("=")
        key = key.strip()
        if not sep or not key.isidentifier():
            raise ConfigError(
                f"{str(env_file)!r} line {n} is not KEY=value", context={"key": "env"}
            )
        value = value.strip()
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
            value = value[1:-1]
        os.environ.setdefault(key, value)


def apply_env(config: AppConfig) -> None:
    """Set the variables of the config's ``env`` file in ``os.environ`` (those already set
    win); nothing when it names none. :func:`load_graph` calls it first; the server calls it
    before reading auth settings (``JWT_SECRET_KEY``) from the environment.

    Raises:
        ConfigError: ``CONFIG_001`` for a line that is not ``KEY=value``.
    """
    if config.env_file is not None:
        _apply_env_file(config.env_file)


def import_attr(spec: str, folder: Path | None = None) -> Any:
    """Import ``"module:attr"`` (``folder`` first on ``sys.path`` when given).

    Raises:
        ConfigError: ``CONFIG_001`` when the module or the attribute cannot be imported (the
            message names which; the import error's own text follows).
    """
    module_name, attr = _spec(spec, "agent").split(":")
    if folder is not None and str(folder) not in sys.path:
        sys.path.insert(0, str(folder))
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ConfigError(
            f"cannot import module {module_name!r} of {spec!r}: {exc}", context={"key": "agent"}
        ) from exc
    try:
        return getattr(module, attr)
    except AttributeError:
        raise ConfigError(
            f"module {module_name!r} has no attribute {attr!r}", context={"key": "agent"}
        ) from None


async def load_graph(config: AppConfig | str) -> CompiledGraph[Any]:
    """Import the compiled graph a config names (its ``env`` file applied first).

    Args:
        config: a parsed config, or a bare ``"module:attr"`` spec (imported from the current
            folder and ``sys.path``).

    Returns:
        The ``CompiledGraph``; a function found there is called (awaited when async) and must
        return one.

    Raises:
        ConfigError: ``CONFIG_001`` when the import fails or what it yields is not a
            ``CompiledGraph``.
    """
    from tenxgraph.core.graph.compiled_graph import CompiledGraph

    if isinstance(config, AppConfig):
        apply_env(config)
        spec, folder = config.agent, config.folder
    else:
        spec, folder = config, None
    obj = import_attr(spec, folder)
    if callable(obj) and not isinstance(obj, CompiledGraph):
        obj = obj()
        if inspect.isawaitable(obj):
            obj = await obj
    if not isinstance(obj, CompiledGraph):
        raise ConfigError(
            f"{spec!r} is a {type(obj).__name__}, not a compiled graph (StateGraph.compile())",
            context={"key": "agent"},
        )
    return obj
