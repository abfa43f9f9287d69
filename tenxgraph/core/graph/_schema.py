"""JSON schemas and argument validators for tools, from type hints and docstrings.

A tool is described to the model in OpenAI's function-calling shape::

    {"type": "function",
     "function": {"name": ..., "description": ..., "parameters": {JSON schema}}}

The description is the docstring's description part (everything before its first section:
``Args:``, ``Returns:``, a NumPy ``Parameters`` header...), paragraphs kept, lines of one
paragraph joined with spaces. Each argument's description comes from the ``Args:`` section
(Google style), the ``Parameters`` section (NumPy style) or ``:param name:`` lines (Sphinx).

Type hints map to JSON Schema (draft 2020-12 keywords, which OpenAI, vLLM, Ollama and
llama.cpp accept):

=========================  ==============================================================
hint                       schema
=========================  ==============================================================
``str`` ``int``            ``{"type": "string"}``, ``{"type": "integer"}``
``float`` ``bool``         ``{"type": "number"}``, ``{"type": "boolean"}``
``None``                   ``{"type": "null"}``
``Enum`` subclass          ``{"type": "string", "enum": [values]}`` (``integer`` for int values)
``Literal[...]``           same as an enum of its values
``list[T]`` ``set[T]``     ``{"type": "array", "items": schema(T)}`` (``uniqueItems`` for sets)
``tuple[T, ...]``          ``{"type": "array", "items": schema(T)}``
``dict[str, T]``           ``{"type": "object", "additionalProperties": schema(T)}``
``T | None``               ``{"type": [t, "null"]}`` for a scalar ``T``, else ``anyOf``
``A | B``                  ``{"anyOf": [schema(A), schema(B)]}``
Pydantic model             the model's own ``model_json_schema()`` (``$defs`` moved to the root)
``datetime`` ``date``      ``{"type": "string", "format": "date-time"}`` / ``"date"``
``UUID``                   ``{"type": "string", "format": "uuid"}``
``Any`` / no hint          ``{}`` (any value)
``Annotated[T, "text"]``   schema(T) with ``description`` "text" (or a ``Field(description=)``)
anything else              pydantic's ``TypeAdapter(T).json_schema()``, else ``{}``
=========================  ==============================================================

A parameter with a default is not ``required``; a JSON-representable default is written as
``"default"``. Parameters named ``tool_call_id``, ``state`` and ``config`` are injected by
``ToolNode`` and never appear in the schema, nor do ``*args`` / ``**kwargs``.

Arguments sent by the model are validated by a Pydantic model built once per tool with
:func:`pydantic.create_model` from the same signature (lax mode, so ``"3"`` is accepted for an
``int`` the way Pydantic documents; unknown arguments are refused unless the function takes
``**kwargs``).
"""

from __future__ import annotations

import datetime as _dt
import enum
import functools
import inspect
import re
import types
import typing
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal

import pydantic
from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, create_model
from pydantic.fields import FieldInfo

from ._inject import injections_of, is_marker

__all__ = [
    "INJECTED_PARAMS",
    "ToolSpec",
    "build_tool_spec",
    "format_validation_error",
    "parse_docstring",
    "type_schema",
]

#: Parameter names ``ToolNode`` fills in itself; never shown to the model.
INJECTED_PARAMS: frozenset[str] = frozenset({"tool_call_id", "state", "config", "emit"})

_SECTION_RE = re.compile(
    r"^\s*(Args|Arguments|Parameters|Params|Keyword Args|Keyword Arguments|Kwargs|Returns|Return|"
    r"Yields|Yield|Raises|Raise|Except|Exceptions|Examples|Example|Notes|Note|Attributes|"
    r"See Also|References|Warnings|Warning|Todo)\s*:?\s*$",
    re.IGNORECASE,
)
_ARG_SECTIONS = {
    "args",
    "arguments",
    "parameters",
    "params",
    "keyword args",
    "keyword arguments",
    "kwargs",
}
_NUMPY_UNDERLINE = re.compile(r"^\s*-{3,}\s*$")
_GOOGLE_ARG = re.compile(
    r"^\*{0,2}(?P<name>[A-Za-z_][A-Za-z0-9_]*)\s*(\([^)]*\))?\s*:\s*(?P<desc>.*)$"
)
_NUMPY_ARG = re.compile(r"^\*{0,2}(?P<name>[A-Za-z_][A-Za-z0-9_]*)\s*(:\s*.*)?$")
_SPHINX_ARG = re.compile(
    r"^\s*:param\s+(?:[^:]*\s)?(?P<name>[A-Za-z_][A-Za-z0-9_]*)\s*:\s*(?P<desc>.*)$"
)


# -- docstrings ------------------------------------------------------------------------------------
def _join_paragraphs(lines: list[str]) -> str:
    paragraphs: list[str] = []
    current: list[str] = []
    for line in lines:
        if line.strip():
            current.append(line.strip())
        elif current:
            paragraphs.append(" ".join(current))
            current = []
    if current:
        paragraphs.append(" ".join(current))
    return "\n\n".join(paragraphs)


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def parse_docstring(doc: str | None) -> tuple[str, dict[str, str]]:
    """Split a docstring into its description and per-argument descriptions.

    Understands Google style (``Args:`` with ``name (type): text`` entries and indented
    continuation lines), NumPy style (a ``Parameters`` header underlined with dashes, then
    ``name : type`` lines with indented text) and Sphinx ``:param name: text`` lines.

    Args:
        doc: the raw docstring (``None`` is treated as empty).

    Returns:
        ``(description, {arg_name: description})``: the description is the text before the
        first section, paragraphs separated by a blank line and the lines of one paragraph
        joined with single spaces; argument descriptions are single-spaced one-liners.
    """
    if not doc:
        return "", {}
    lines = inspect.cleandoc(doc).splitlines()
    desc_lines: list[str] = []
    args: dict[str, str] = {}
    i = 0
    n = len(lines)
    # Description: up to the first section header (Google, NumPy or Sphinx).
    while i < n:
        line = lines[i]
        numpy_header = i + 1 < n and _NUMPY_UNDERLINE.match(lines[i + 1]) and line.strip()
        if _SECTION_RE.match(line) or numpy_header or line.lstrip().startswith(":"):
            break
        desc_lines.append(line)
        i += 1
    while i < n:
        line = lines[i]
        sphinx = _SPHINX_ARG.match(line)
        if sphinx:
            text = [sphinx.group("desc").strip()]
            i += 1
            while i < n and lines[i].strip() and not lines[i].lstrip().startswith(":"):
                text.append(lines[i].strip())
                i += 1
            args[sphinx.group("name")] = " ".join(t for t in text if t)
            continue
        header = line.strip().rstrip(":").strip().lower()
        is_numpy = i + 1 < n and bool(_NUMPY_UNDERLINE.match(lines[i + 1])) and bool(line.strip())
        if is_numpy:
            i += 2
            body_start = i
            while i < n and not (
                i + 1 < n and _NUMPY_UNDERLINE.match(lines[i + 1]) and lines[i].strip()
            ):
                i += 1
            if header in _ARG_SECTIONS:
                args.update(_parse_numpy_args(lines[body_start:i]))
            continue
        if _SECTION_RE.match(line):
            base = _indent(line)
            i += 1
            body_start = i
            while i < n and (not lines[i].strip() or _indent(lines[i]) > base):
                i += 1
            if header in _ARG_SECTIONS:
                args.update(_parse_google_args(lines[body_start:i]))
            continue
        i += 1
    return _join_paragraphs(desc_lines), args


def _parse_google_args(body: list[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    entries = [line for line in body if line.strip()]
    if not entries:
        return out
    base = min(_indent(line) for line in entries)
    name: str | None = None
    text: list[str] = []
    for line in body:
        if not line.strip():
            continue
        m = _GOOGLE_ARG.match(line.strip()) if _indent(line) == base else None
        if m:
            if name is not None:
                out[name] = " ".join(t for t in text if t)
            name, text = m.group("name"), [m.group("desc").strip()]
        elif name is not None:
            text.append(line.strip())
    if name is not None:
        out[name] = " ".join(t for t in text if t)
    return out


def _parse_numpy_args(body: list[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    entries = [line for line in body if line.strip()]
    if not entries:
        return out
    base = min(_indent(line) for line in entries)
    names: list[str] = []
    text: list[str] = []

    def flush() -> None:
        for nm in names:
            out[nm] = " ".join(t for t in text if t)

    for line in body:
        if not line.strip():
            continue
        if _indent(line) == base:
            flush()
            head = line.strip().split(":", 1)[0]
            names = [p.strip().lstrip("*") for p in head.split(",") if p.strip()]
            names = [nm for nm in names if _NUMPY_ARG.match(nm)]
            text = []
        else:
            text.append(line.strip())
    flush()
    return out


# -- type hints -> JSON schema ---------------------------------------------------------------------
_SCALARS: dict[Any, dict[str, Any]] = {
    str: {"type": "string"},
    int: {"type": "integer"},
    float: {"type": "number"},
    bool: {"type": "boolean"},
    type(None): {"type": "null"},
    bytes: {"type": "string"},
    _dt.datetime: {"type": "string", "format": "date-time"},
    _dt.date: {"type": "string", "format": "date"},
    _dt.time: {"type": "string", "format": "time"},
    uuid.UUID: {"type": "string", "format": "uuid"},
}


def _json_type_of(values: Sequence[Any]) -> str | None:
    kinds = set()
    for v in values:
        if isinstance(v, bool):
            kinds.add("boolean")
        elif isinstance(v, int):
            kinds.add("integer")
        elif isinstance(v, float):
            kinds.add("number")
        elif isinstance(v, str):
            kinds.add("string")
        elif v is None:
            kinds.add("null")
        else:
            return None
    return kinds.pop() if len(kinds) == 1 else None


def _enum_schema(values: list[Any]) -> dict[str, Any]:
    jtype = _json_type_of(values)
    out: dict[str, Any] = {}
    if jtype is not None:
        out["type"] = jtype
    out["enum"] = values
    return out


def _hoist(schema: dict[str, Any], defs: dict[str, Any]) -> dict[str, Any]:
    """Move ``$defs`` of a sub-schema into ``defs`` (refs stay ``#/$defs/Name``)."""
    inner = schema.pop("$defs", None)
    if inner:
        defs.update(inner)
    return schema


def type_schema(hint: Any, defs: dict[str, Any] | None = None) -> dict[str, Any]:
    """The JSON schema of one type hint (table in the module docstring).

    Args:
        hint: a type hint, as returned by ``typing.get_type_hints(..., include_extras=True)``.
        defs: collects the ``$defs`` of Pydantic models met on the way (name -> schema); the
            caller puts them at the root of the parameters schema. ``None``: a throw-away dict.

    Returns:
        A new JSON-schema dict (never shared with other calls).
    """
    if defs is None:
        defs = {}
    if hint is inspect.Parameter.empty or hint is Any or hint is object:
        return {}
    origin = typing.get_origin(hint)
    if origin is Annotated:
        base, *meta = typing.get_args(hint)
        out: dict[str, Any] = type_schema(base, defs)
        for m in meta:
            if isinstance(m, str):
                out["description"] = m
            elif isinstance(m, FieldInfo) and m.description:
                out["description"] = m.description
        return out
    try:
        scalar = _SCALARS.get(hint)
    except TypeError:  # an unhashable hint
        scalar = None
    if scalar is not None:
        return dict(scalar)
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        return _enum_schema([m.value for m in hint])
    if isinstance(hint, type) and issubclass(hint, BaseModel):
        return _hoist(hint.model_json_schema(), defs)
    if origin is Literal:
        values = [v.value if isinstance(v, enum.Enum) else v for v in typing.get_args(hint)]
        return _enum_schema(values)
    if origin is typing.Union or origin is types.UnionType:
        members = typing.get_args(hint)
        non_null = [m for m in members if m is not type(None)]
        schemas = [type_schema(m, defs) for m in non_null]
        if len(non_null) < len(members):  # Optional
            if len(schemas) == 1:
                only = schemas[0]
                if set(only) == {"type"} and isinstance(only["type"], str):
                    return {"type": [only["type"], "null"]}
                return {"anyOf": [only, {"type": "null"}]}
            return {"anyOf": [*schemas, {"type": "null"}]}
        return {"anyOf": schemas}
    if hint in (list, set, frozenset, tuple) or origin in (
        list,
        set,
        frozenset,
        tuple,
        Sequence,
        typing.Sequence,
    ):
        container = origin or hint
        args = typing.get_args(hint)
        out = {"type": "array"}
        if container is tuple and args and not (len(args) == 2 and args[1] is Ellipsis):
            out["prefixItems"] = [type_schema(a, defs) for a in args]
            out["minItems"] = out["maxItems"] = len(args)
            return out
        if args:
            out["items"] = type_schema(args[0], defs)
        if container in (set, frozenset):
            out["uniqueItems"] = True
        return out
    if hint is dict or origin in (dict, Mapping, typing.Mapping):
        args = typing.get_args(hint)
        out = {"type": "object"}
        if len(args) == 2 and args[1] is not Any:
            out["additionalProperties"] = type_schema(args[1], defs)
        return out
    try:
        return _hoist(TypeAdapter(hint).json_schema(), defs)
    except Exception:  # noqa: BLE001 - an exotic hint: accept any value rather than fail
        return {}


def _json_default(value: Any) -> tuple[bool, Any]:
    """``(ok, json_value)`` for a parameter default that JSON can show."""
    if isinstance(value, enum.Enum):
        value = value.value
    if value is None or isinstance(value, (str, bool, int, float)):
        return True, value
    if isinstance(value, (list, tuple)) and all(
        v is None or isinstance(v, (str, bool, int, float)) for v in value
    ):
        return True, list(value)
    return False, None


# -- per-tool spec -----------------------------------------------------------------------------------
@dataclass(slots=True)
class ToolSpec:
    """Everything ``ToolNode`` needs to present and call one tool (built once per function).

    Attributes:
        name: the tool's name as the model sees it.
        description: from ``@tool(description=)`` or the docstring.
        parameters: the JSON schema of the arguments (``{"type": "object", "properties": ...,
            "required": [...]}``; ``required`` omitted when empty).
        func: the callable.
        is_async: ``True`` when calling ``func`` returns an awaitable (run on the event loop);
            ``False``: run in a worker thread.
        injected: the injected parameters the function declares (subset of
            :data:`INJECTED_PARAMS`).
        arg_model: Pydantic model validating the model's arguments (``None`` for a signature
            that cannot be inspected: arguments are then passed as they are).
        var_kwargs: the function takes ``**kwargs`` (unknown arguments are passed through).
        arg_names: the schema's parameter names in signature order (``arg_model`` field ``a{i}``
            validates ``arg_names[i]``).
        tags: tags from ``@tool(tags=...)`` and a ``__tags__`` attribute (for
            ``ToolNode.all_tools(tags=...)`` and ``Agent(tools_tags=...)``).
        metadata: the full ``@tool`` metadata dict (empty for a plain function).
        di: the ``Inject[T]`` parameters ``(name, key, optional)``, resolved from the graph's
            InjectQ container at each call and hidden from the model.
    """

    name: str
    description: str
    parameters: dict[str, Any]
    func: Callable[..., Any]
    is_async: bool
    injected: frozenset[str]
    arg_model: type[BaseModel] | None
    var_kwargs: bool = False
    arg_names: tuple[str, ...] = ()
    tags: frozenset[str] = frozenset()
    metadata: dict[str, Any] = field(default_factory=dict)
    di: tuple[Any, ...] = ()

    def validate_args(self, args: dict[str, Any]) -> dict[str, Any]:
        """Validate and coerce the model's arguments into keyword arguments for ``func``.

        Only the arguments the model sent are returned (the function's own defaults apply to
        the others); Pydantic-model and Enum parameters arrive as instances.

        Raises:
            pydantic.ValidationError: an argument is missing, of the wrong type, or unknown
                (unless the function takes ``**kwargs``); render it with
                :func:`format_validation_error`.
        """
        if self.arg_model is None:
            return dict(args)
        obj = self.arg_model.model_validate(args)
        out: dict[str, Any] = {}
        for i, pname in enumerate(self.arg_names):
            internal = f"a{i}"
            if internal in obj.model_fields_set:
                out[pname] = getattr(obj, internal)
        if obj.model_extra:
            out.update(obj.model_extra)
        return out

    def openai_schema(self) -> dict[str, Any]:
        """``{"type": "function", "function": {"name", "description", "parameters"}}``."""
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": self.parameters,
            },
        }


def _is_async_callable(func: Any) -> bool:
    target = func
    while isinstance(target, functools.partial):
        target = target.func
    if inspect.iscoroutinefunction(target):
        return True
    call = getattr(target, "__call__", None)  # noqa: B004 - callable objects
    return call is not None and not inspect.isfunction(target) and inspect.iscoroutinefunction(call)


def _func_name(func: Any) -> str:
    name = getattr(func, "__name__", None)
    while name is None and isinstance(func, functools.partial):
        func = func.func
        name = getattr(func, "__name__", None)
    return name or type(func).__name__


def _explicit_parameters(schema: dict[str, Any]) -> tuple[dict[str, Any], str | None, str | None]:
    """Accept a full OpenAI tool spec, its ``function`` part, or a bare parameters schema."""
    if schema.get("type") == "function" and isinstance(schema.get("function"), dict):
        schema = schema["function"]
    if "parameters" in schema and isinstance(schema["parameters"], dict):
        return dict(schema["parameters"]), schema.get("name"), schema.get("description")
    return dict(schema), None, None


def _annotation_holder(name: str, annotation: str) -> Callable[[], None]:
    """A function object whose only annotation is ``name: annotation`` (for get_type_hints)."""

    def holder() -> None:
        return None

    holder.__annotations__ = {name: annotation}
    return holder


def _resolve_hints(target: Any, sig: inspect.Signature | None) -> dict[str, Any]:
    """Type hints of ``target``; with unresolvable forward references, each one on its own."""
    try:
        return typing.get_type_hints(target, include_extras=True)
    except Exception:  # noqa: BLE001 - e.g. a type defined in a local scope
        pass
    out: dict[str, Any] = {}
    if sig is None:
        return out
    namespace = dict(getattr(target, "__globals__", {}) or {})
    for pname, param in sig.parameters.items():
        ann = param.annotation
        if isinstance(ann, str):
            # Resolve this one annotation the way typing.get_type_hints does, in the tool's
            # module namespace, so one unresolvable sibling does not hide the others.
            holder = _annotation_holder(pname, ann)
            try:
                ann = typing.get_type_hints(holder, globalns=namespace, include_extras=True)[pname]
            except Exception:  # noqa: BLE001
                ann = Any
        out[pname] = ann
    return out


def build_tool_spec(func: Callable[..., Any]) -> ToolSpec:
    """Inspect ``func`` (and its ``@tool`` metadata) into a :class:`ToolSpec`.

    Args:
        func: a sync or async function, a bound method, a ``functools.partial`` or a callable
            object, optionally decorated with ``tenxgraph.utils.tool``.

    Returns:
        The spec: name, description, parameters schema and argument validator.

    Raises:
        TypeError: ``func`` is not callable.
    """
    if not callable(func):
        raise TypeError(f"a tool must be callable, got {type(func).__name__}")
    meta: dict[str, Any] = dict(getattr(func, "__tenxgraph_tool__", None) or {})
    target: Any = func
    while isinstance(target, functools.partial):  # docs and hints of the wrapped function
        target = target.func
    if not (inspect.isfunction(target) or inspect.ismethod(target)) and not inspect.isbuiltin(
        target
    ):
        if callable(target) and not isinstance(target, type):
            target = target.__call__  # a callable object: its __call__
    doc = inspect.getdoc(target)
    if not doc and not isinstance(func, functools.partial):
        doc = inspect.getdoc(func)
    doc_desc, arg_docs = parse_docstring(doc)
    try:
        sig = inspect.signature(func)
    except (TypeError, ValueError):
        sig = None
    hints = _resolve_hints(target, sig)

    properties: dict[str, Any] = {}
    required: list[str] = []
    defs: dict[str, Any] = {}
    fields: dict[str, Any] = {}
    injected: set[str] = set()
    arg_names: list[str] = []
    var_kwargs = False
    if sig is not None:
        for pname, param in sig.parameters.items():
            if param.kind is param.VAR_KEYWORD:
                var_kwargs = True
                continue
            if param.kind is param.VAR_POSITIONAL:
                continue
            if pname in INJECTED_PARAMS:
                injected.add(pname)
                continue
            if param.default is not param.empty and is_marker(param.default):
                continue  # an Inject[T] service: resolved at call time, not the model's
            hint = hints.get(pname, param.annotation)
            if isinstance(hint, str):  # unresolved forward reference
                hint = Any
            prop = type_schema(hint, defs)
            if pname in arg_docs and arg_docs[pname] and "description" not in prop:
                prop["description"] = arg_docs[pname]
            if param.default is not param.empty:
                ok, value = _json_default(param.default)
                if ok:
                    prop["default"] = value
            else:
                required.append(pname)
            properties[pname] = prop
            annotation = Any if hint is inspect.Parameter.empty else hint
            default = ... if param.default is param.empty else param.default
            # Internal field names avoid clashes with BaseModel attributes (``json``, ``copy``);
            # the alias is the parameter's name, as the model sends it.
            fields[f"a{len(fields)}"] = (annotation, Field(default, alias=pname))
            arg_names.append(pname)

    name = meta.get("name") or _func_name(func)
    description = meta.get("description") or doc_desc
    if meta.get("schema") is not None:
        parameters, sname, sdesc = _explicit_parameters(meta["schema"])
        name = meta.get("name") or sname or name
        description = meta.get("description") or sdesc or description
    else:
        parameters = {"type": "object", "properties": properties}
        if required:
            parameters["required"] = required
        if defs:
            parameters["$defs"] = defs

    arg_model: type[BaseModel] | None = None
    if sig is not None:
        config = ConfigDict(
            extra="allow" if var_kwargs else "forbid",
            arbitrary_types_allowed=True,
            protected_namespaces=(),
        )
        try:
            arg_model = create_model(f"{name}_arguments", __config__=config, **fields)
        except Exception:  # noqa: BLE001 - a hint pydantic cannot validate: pass args unchecked
            arg_model = None
    return ToolSpec(
        name=name,
        description=description,
        parameters=parameters,
        func=func,
        is_async=_is_async_callable(func),
        injected=frozenset(injected),
        arg_model=arg_model,
        var_kwargs=var_kwargs,
        arg_names=tuple(arg_names),
        tags=frozenset(meta.get("tags") or ()) | _legacy_tags(func),
        metadata=meta,
        di=injections_of(func),
    )


def _legacy_tags(func: Any) -> frozenset[str]:
    """Tags set as a ``__tags__`` attribute (the way 10xGraph's tools reference tags a plain
    function), merged with those of ``@tool(tags=...)``."""
    raw = getattr(func, "__tags__", None)
    if isinstance(raw, str):
        return frozenset({raw})
    if isinstance(raw, (set, frozenset, list, tuple)):
        return frozenset(str(t) for t in raw)
    return frozenset()


def format_validation_error(tool_name: str, exc: pydantic.ValidationError) -> str:
    """A short, model-readable text for arguments that failed validation.

    Example: ``invalid arguments for tool 'add': a: Input should be a valid integer, unable
    to parse string as an integer (got 'x'); b: Field required``.
    """
    parts = []
    for err in exc.errors(include_url=False):
        loc = ".".join(str(p) for p in err.get("loc", ())) or "(arguments)"
        msg = err.get("msg", "invalid value")
        if err.get("type") == "extra_forbidden":
            msg = "unexpected argument"
        elif err.get("type") != "missing" and "input" in err:
            shown = repr(err["input"])
            if len(shown) > 60:
                shown = shown[:57] + "..."
            msg = f"{msg} (got {shown})"
        parts.append(f"{loc}: {msg}")
    return f"invalid arguments for tool {tool_name!r}: " + "; ".join(parts)
