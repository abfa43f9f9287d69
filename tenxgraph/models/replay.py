"""Replay recorded agent conversations: a loader, a replay chat model and replay tools.

The recordings are JSON Lines files, one conversation per line, in the format described in
``tenxgraph/data/README.md`` (the bundled tau-bench and tau2-bench trajectories)::

    {"id": "...", "source": "...", "meta": {...},
     "messages": [{"role": ..., "content": str, "tool_calls": [{"id", "name", "arguments"}],
                   "tool_call_id": ..., "name": ...}, ...]}

* :func:`load_trajectories` turns each line into a :class:`Trajectory`: its messages become
  tenxgraph :class:`~tenxgraph.core.state.Message` s (tool calls as
  :class:`~tenxgraph.core.state.ToolCallBlock` s, tool-call ids as recorded) with deterministic
  ``message_id`` s, and its user turns are split into :class:`Turn` s.
* :class:`ReplayModel` is a chat model (``async agenerate(messages, tools=None, **kw)``) that is a
  **pure function of the recording and the conversation it is given**: it finds how many
  recorded messages the conversation already holds and returns the next recorded assistant
  message, with the message id ``"<trajectory id>:<position>"``. A worker killed mid-run and
  resumed, or another worker taking the next turn, therefore continues exactly where the thread
  stands, and two workers answering the same position produce the same message.
* :class:`ReplayTools` gives one tool function per tool name of the recording; each returns the
  recorded result of the call it is asked to run and appends one line per execution to a
  side-effect file, so a verifier can count how many times each call really ran.

How the recordings' particularities are handled (see ``tenxgraph/data/README.md``):

* **Openings.** Messages before the first user message are *seeded*: they are sent, with the
  first user message, as the input of the first turn (tau-bench's ``system`` policy, tau2's
  assistant greeting ``"Hi! How can I help you today?"``). They enter the thread as recorded; the
  model is first called after the first user message. (The alternative, producing the greeting
  as model output, would need a run without a user message, which no caller sends.)
* **Endings.** A user message that the recording does not answer (the user simulator's last
  message, ending with ``###STOP###`` or ``###TRANSFER###``) makes a *closing* turn: it is
  stored without running the agent (``update_state``), as the benchmark ends the episode there.
  A recording that ends on a ``tool`` message (tau-bench's ``transfer_to_human_agents``) ends the
  run after the tools: :meth:`ReplayModel.has_answer` is ``False`` there, and the graph's router
  after the tool node goes to ``END``. Asking the model anyway raises ``ModelError``.
* **Parallel calls** (tau2: 2-6 per message) are replayed as one assistant message with all its
  calls; each tool result is looked up by its assistant message and tool-call id.
* **Reused tool-call ids** (tau-bench): the data renames the later duplicate ``<id>__dup2``.
  ``load_trajectories(..., restore_original_ids=True)`` restores the originals, so one
  conversation holds two different calls with the same id: the ledger must run both (its key
  holds the assistant message id and a digest of the call, not only the tool-call id).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from tenxgraph.core.state import Message, TextBlock, ToolResultBlock
from tenxgraph.utils.decorators import tool

from .base import ModelError, assistant_message

__all__ = [
    "EffectRecord",
    "ReplayModel",
    "ReplayTools",
    "Trajectory",
    "Turn",
    "bundled_data_path",
    "compare_messages",
    "load_trajectories",
    "read_effects",
]

#: The suffix tau-bench's converter gave to a reused tool-call id.
DUP_SUFFIX = "__dup2"


def bundled_data_path() -> Path:
    """The folder of the trajectories shipped with the package (``tenxgraph/data``).

    Returns:
        A directory holding ``taubench_airline_gpt4o.jsonl`` and ``tau2_toolorchestra.jsonl``.
    """
    return Path(str(resources.files("tenxgraph") / "data"))


@dataclass(frozen=True, slots=True)
class Turn:
    """One user turn of a recording.

    Attributes:
        index: 0-based turn number within the conversation.
        inputs: positions of the messages the caller sends for this turn (oldest first): the
            user message, preceded on the first turn by the seeded opening messages.
        start: first position the graph produces in this turn (``inputs[-1] + 1``).
        end: one past the last position this turn produces (the next user message's position,
            or the recording's length).
    """

    index: int
    inputs: tuple[int, ...]
    start: int
    end: int

    @property
    def closing(self) -> bool:
        """``True`` when the recording has no answer to this turn (the user ended the episode):
        the turn only stores its input."""
        return self.start == self.end


@dataclass(frozen=True, slots=True)
class Trajectory:
    """A recorded conversation, ready to replay.

    Attributes:
        id: the recording's unique id (usable as a ``thread_id``).
        source: e.g. ``"tau-bench/airline/gpt-4o"``.
        meta: the recording's informational metadata (``domain``, ``task_id``, ``reward``...).
        messages: the conversation as tenxgraph messages, oldest first; ``message_id`` of
            position ``i`` is ``f"{id}:{i}"``; timestamps are ``None`` (recordings have none).
        turns: the user turns, in order.
        restored_ids: ``True`` when ``__dup2`` tool-call ids were mapped back to the originals.
    """

    id: str
    source: str
    meta: dict[str, Any]
    messages: tuple[Message, ...]
    turns: tuple[Turn, ...]
    restored_ids: bool = False
    _by_id: dict[str | int, int] = field(default_factory=dict, repr=False, compare=False)

    def message_id(self, position: int) -> str:
        """The deterministic ``message_id`` of the recorded message at ``position``."""
        return f"{self.id}:{position}"

    def position_of(self, message_id: str | int) -> int | None:
        """The position of the recorded message with this id, or ``None``."""
        return self._by_id.get(message_id)

    @property
    def tool_call_count(self) -> int:
        """How many tool calls the recording makes (count)."""
        return sum(len(m.tool_calls()) for m in self.messages if m.role == "assistant")

    @property
    def tool_names(self) -> list[str]:
        """The names of the tools the recording calls, sorted."""
        return sorted(
            {c.name for m in self.messages if m.role == "assistant" for c in m.tool_calls()}
        )

    @property
    def step_count(self) -> int:
        """Node executions a full replay performs (count): one per assistant message and one
        per assistant message with tool calls (its tool node)."""
        return sum(1 + (1 if m.tool_calls() else 0) for m in self.messages if m.role == "assistant")

    def position(self, messages: Sequence[Message]) -> int:
        """How many recorded messages ``messages`` holds, in order (the replay position).

        Leading ``system`` messages that the recording does not hold (an agent's own system
        prompt) are skipped. Every other message must equal the recorded message at its
        position (role, text, tool calls' ids / names / arguments, answered tool-call id).

        Args:
            messages: a conversation, oldest first (what an ``Agent`` sends its model, or a
                thread's ``state.context``).

        Returns:
            The number of recorded messages matched (``0`` .. ``len(self.messages)``).

        Raises:
            ModelError: ``MODEL_001`` when the conversation departs from the recording
                (``context``: ``trajectory_id``, ``position``, ``reason``).
        """
        pos = 0
        rec = self.messages
        leading = True
        for msg in messages:
            if leading and msg.role == "system" and (pos >= len(rec) or not _same(rec[pos], msg)):
                continue
            leading = False
            if pos >= len(rec):
                raise _diverged(
                    self,
                    pos,
                    f"the conversation is longer than the recording ({len(rec)} messages)",
                )
            why = _difference(rec[pos], msg)
            if why:
                raise _diverged(self, pos, why)
            pos += 1
        return pos

    def answer_at(self, position: int) -> Message | None:
        """The recorded assistant message at ``position``, or ``None`` when that position is
        past the end or holds another role."""
        if 0 <= position < len(self.messages) and self.messages[position].role == "assistant":
            return self.messages[position]
        return None

    def turn_at(self, position: int) -> Turn | None:
        """The turn whose span (its inputs up to ``end``) holds ``position``, or ``None``."""
        for t in self.turns:
            if t.inputs[0] <= position < max(t.end, t.start):
                return t
        return None

    def result_for(self, assistant_position: int, tool_call_id: str) -> Message:
        """The recorded tool message answering call ``tool_call_id`` of the assistant message at
        ``assistant_position``.

        Raises:
            KeyError: no such call at that position.
        """
        i = assistant_position + 1
        while i < len(self.messages) and self.messages[i].role == "tool":
            if self.messages[i].tool_call_id == tool_call_id:
                return self.messages[i]
            i += 1
        raise KeyError(
            f"{self.id}: no recorded result for call {tool_call_id!r} at {assistant_position}"
        )


# -- comparison -----------------------------------------------------------------------------------
def _calls(msg: Message) -> list[tuple[str, str, str]]:
    return [
        (c.id, c.name, json.dumps(c.args, sort_keys=True, ensure_ascii=False))
        for c in msg.tool_calls()
    ]


def _answered_id(msg: Message) -> str | None:
    if msg.tool_call_id:
        return msg.tool_call_id
    for b in msg.content:
        if isinstance(b, ToolResultBlock):
            return b.tool_call_id
    return None


def _difference(expected: Message, actual: Message) -> str | None:
    if expected.role != actual.role:
        return f"role {actual.role!r}, recorded {expected.role!r}"
    if expected.text() != actual.text():
        return f"{actual.role} text differs from the recording"
    if expected.role == "assistant" and _calls(expected) != _calls(actual):
        return "tool calls (ids, names or arguments) differ from the recording"
    if expected.role == "tool":
        if _answered_id(expected) != _answered_id(actual):
            return (
                f"tool result answers {_answered_id(actual)!r}, recorded {_answered_id(expected)!r}"
            )
        if any(isinstance(b, ToolResultBlock) and b.is_error for b in actual.content):
            return "tool result is an error, the recording's is not"
    return None


def _same(expected: Message, actual: Message) -> bool:
    return _difference(expected, actual) is None


def compare_messages(trajectory: Trajectory, messages: Sequence[Message]) -> list[str]:
    """Compare a thread's messages with its recording, message by message.

    Args:
        trajectory: the recording.
        messages: the thread's ``state.context``, oldest first.

    Returns:
        Human-readable differences (empty when the thread holds exactly the recorded
        sequence: roles, texts, tool calls' ids / names / arguments, tool results).
    """
    out: list[str] = []
    rec = trajectory.messages
    for i, (e, a) in enumerate(zip(rec, messages, strict=False)):
        why = _difference(e, a)
        if why:
            out.append(f"message {i}: {why}")
            if len(out) >= 5:
                break
    if len(messages) != len(rec):
        out.append(f"the thread holds {len(messages)} messages, the recording {len(rec)}")
    return out


def _diverged(traj: Trajectory, pos: int, why: str) -> ModelError:
    return ModelError(
        f"replay of {traj.id!r} diverged at message {pos}: {why}",
        context={"model": "replay", "trajectory_id": traj.id, "position": pos, "reason": why},
    )


# -- loading --------------------------------------------------------------------------------------
def _restore(call_id: str, renamed: dict[str, str]) -> str:
    return renamed.get(call_id, call_id)


def _to_message(traj_id: str, pos: int, raw: dict[str, Any], renamed: dict[str, str]) -> Message:
    mid = f"{traj_id}:{pos}"
    role = raw["role"]
    content = raw.get("content") or ""
    if role == "assistant":
        calls = [
            {
                "id": _restore(c["id"], renamed),
                "name": c["name"],
                "arguments": c.get("arguments") or {},
            }
            for c in raw.get("tool_calls") or ()
        ]
        msg = assistant_message(content or None, calls or None, message_id=mid)
    elif role == "tool":
        cid = _restore(raw["tool_call_id"], renamed)
        msg = Message(
            message_id=mid,
            role="tool",
            content=[ToolResultBlock(tool_call_id=cid, content=content)],
            tool_call_id=cid,
            metadata={"tool_name": raw.get("name")} if raw.get("name") else {},
        )
    else:
        msg = Message(message_id=mid, role=role, content=[TextBlock(text=content)])
    return msg.model_copy(update={"timestamp": None})


def _split_turns(messages: Sequence[Message]) -> tuple[Turn, ...]:
    users = [i for i, m in enumerate(messages) if m.role == "user"]
    turns = []
    for k, u in enumerate(users):
        inputs = tuple(range(0, u + 1)) if k == 0 else (u,)
        end = users[k + 1] if k + 1 < len(users) else len(messages)
        turns.append(Turn(index=k, inputs=inputs, start=u + 1, end=end))
    return tuple(turns)


def parse_trajectory(obj: dict[str, Any], *, restore_original_ids: bool = False) -> Trajectory:
    """Build a :class:`Trajectory` from one decoded JSON line.

    Args:
        obj: ``{"id", "source", "meta", "messages"}`` as in ``tenxgraph/data/README.md``.
        restore_original_ids: map ``<id>__dup2`` tool-call ids back to the original ids
            (``meta.renamed_tool_call_ids``), so the conversation reuses ids as the source did.

    Raises:
        ValueError: the object lacks ``id`` or ``messages``, has no user message, or a message
            has an unknown role.
    """
    try:
        traj_id = str(obj["id"])
        raw_msgs = obj["messages"]
    except (KeyError, TypeError):
        raise ValueError("a trajectory needs 'id' and 'messages'") from None
    meta = dict(obj.get("meta") or {})
    renamed: dict[str, str] = {}
    if restore_original_ids:
        renamed = {str(k): str(v) for k, v in (meta.get("renamed_tool_call_ids") or {}).items()}
    try:
        msgs = tuple(_to_message(traj_id, i, m, renamed) for i, m in enumerate(raw_msgs))
    except Exception as exc:  # pydantic ValidationError, KeyError
        raise ValueError(f"trajectory {traj_id!r}: invalid message: {exc}") from None
    if not any(m.role == "user" for m in msgs):
        raise ValueError(f"trajectory {traj_id!r} has no user message")
    return Trajectory(
        id=traj_id,
        source=str(obj.get("source", "")),
        meta=meta,
        messages=msgs,
        turns=_split_turns(msgs),
        restored_ids=bool(renamed),
        _by_id={m.message_id: i for i, m in enumerate(msgs)},
    )


def _files(path: Path) -> list[Path]:
    if path.is_dir():
        return sorted(p for p in path.iterdir() if p.suffix == ".jsonl" and p.is_file())
    return [path]


def load_trajectories(
    path: str | os.PathLike[str] | None = None,
    *,
    restore_original_ids: bool = False,
    limit: int | None = None,
) -> list[Trajectory]:
    """Load recorded conversations from a ``.jsonl`` file or a folder of them.

    Args:
        path: a ``.jsonl`` file, or a folder whose ``*.jsonl`` files are read in name order;
            ``None`` reads the trajectories bundled with the package (:func:`bundled_data_path`).
        restore_original_ids: see :func:`parse_trajectory`.
        limit: keep only the first ``limit`` conversations (count; ``None``: all).

    Returns:
        The trajectories, in file order; ids unique.

    Raises:
        FileNotFoundError: ``path`` does not exist or holds no ``.jsonl`` file.
        ValueError: a line is not valid JSON or not a valid trajectory (message names the file
            and line), or two trajectories share an id.
    """
    root = Path(path) if path is not None else bundled_data_path()
    if not root.exists():
        raise FileNotFoundError(f"no such file or folder: {root}")
    files = _files(root)
    if not files:
        raise FileNotFoundError(f"no .jsonl file in {root}")
    out: list[Trajectory] = []
    seen: set[str] = set()
    for f in files:
        with open(f, encoding="utf-8") as fh:
            for n, line in enumerate(fh, 1):
                if not line.strip():
                    continue
                try:
                    traj = parse_trajectory(
                        json.loads(line), restore_original_ids=restore_original_ids
                    )
                except ValueError as exc:
                    raise ValueError(f"{f}:{n}: {exc}") from None
                if traj.id in seen:
                    raise ValueError(f"{f}:{n}: duplicate trajectory id {traj.id!r}")
                seen.add(traj.id)
                out.append(traj)
                if limit is not None and len(out) >= limit:
                    return out
    return out


# -- the model ------------------------------------------------------------------------------------
class ReplayModel:
    """A chat model that replays one recorded conversation (implements ``ChatModel``).

    Pure: the answer depends only on the recording and on the ``messages`` given (the position
    is recomputed from them on every call, see :meth:`Trajectory.position`); the returned
    message is a copy of the recorded one with ``message_id == trajectory.message_id(pos)``.
    Calling it twice with the same conversation returns equal messages.

    Args:
        trajectory: the recording.

    Attributes:
        calls: how many times :meth:`agenerate` answered (count, this object only).
    """

    def __init__(self, trajectory: Trajectory) -> None:
        self.trajectory = trajectory
        self.calls = 0

    def __repr__(self) -> str:
        return f"ReplayModel({self.trajectory.id!r})"

    def has_answer(self, messages: Sequence[Message]) -> bool:
        """``True`` when the recording's next message after ``messages`` is an assistant
        message (the model has something to say); ``False`` at a user turn or the end.

        Raises:
            ModelError: ``MODEL_001`` when ``messages`` departs from the recording.
        """
        return self.trajectory.answer_at(self.trajectory.position(messages)) is not None

    async def agenerate(
        self, messages: list[Message], tools: list[dict[str, Any]] | None = None, **kwargs: Any
    ) -> Message:
        """The recorded assistant message that follows ``messages``.

        Args:
            messages: the conversation so far (an agent's system prompt first is allowed).
            tools: ignored (the recording decides which tools are called).
            **kwargs: ignored sampling parameters.

        Returns:
            A copy of the recorded assistant message (text and/or tool calls, ids as recorded).

        Raises:
            ModelError: ``MODEL_001`` when ``messages`` departs from the recording, or the
                recording holds no assistant message at this position (end of recording or a
                user turn); ``context``: ``trajectory_id``, ``position``, ``reason``.
        """
        pos = self.trajectory.position(messages)
        answer = self.trajectory.answer_at(pos)
        if answer is None:
            what = "ends" if pos >= len(self.trajectory.messages) else "expects a user message"
            raise _diverged(
                self.trajectory, pos, f"the recording {what} here; there is no answer to give"
            )
        self.calls += 1
        return answer.model_copy(deep=True)


# -- the tools ------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class EffectRecord:
    """One execution of a replay tool, as written to the side-effect file.

    Attributes:
        thread_id: the thread the call ran on.
        trajectory_id: the recording.
        position: position of the assistant message that made the call.
        tool_call_id: the call's id.
        tool: the tool's name.
        pid: the process that ran it.
        ledger_had_it: ``True`` when the ledger already held this call when the tool ran (the
            runtime should have answered from the ledger: a double execution).
    """

    thread_id: str
    trajectory_id: str
    position: int
    tool_call_id: str
    tool: str
    pid: int
    ledger_had_it: bool | None


def read_effects(path: str | os.PathLike[str]) -> list[EffectRecord]:
    """Read a side-effect file written by :class:`ReplayTools` (a missing file is empty).

    A torn last line (a process killed while writing it) is ignored.
    """
    out: list[EffectRecord] = []
    try:
        fh = open(path, encoding="utf-8")
    except FileNotFoundError:
        return out
    with fh:
        for line in fh:
            try:
                d = json.loads(line)
                out.append(
                    EffectRecord(d["t"], d["r"], d["p"], d["c"], d["n"], d["pid"], d.get("l"))
                )
            except (ValueError, KeyError):
                continue
    return out


class ReplayTools:
    """Tool functions that return a recording's tool results (one function per tool name).

    Each function accepts the recorded arguments, reads the call being executed from
    :func:`tenxgraph.core._context.current_tool_call` (its ``tool_call_id`` and ledger key,
    which names the assistant message that made the call, hence its position in the
    recording) and returns the recorded result as a ``str``. Arguments that differ from the
    recording raise ``ValueError`` (the tool node turns it into an error tool message, which
    verification then reports).

    Every execution is counted in :attr:`executions` (this process) and, when
    ``effects_path`` is given, appended as one JSON line to that file (``O_APPEND``, one
    ``write`` per line, so lines from several processes do not interleave): the side effect a
    verifier counts to prove that no call ran twice.

    Args:
        trajectory: the recording.
        effects_path: the side-effect file (``None``: count in memory only).
        check_ledger: before each execution, ask the run's checkpointer whether the ledger
            already holds this call (costs one ledger read per call); recorded as
            :attr:`EffectRecord.ledger_had_it`. A ``True`` there is a double execution.
    """

    def __init__(
        self,
        trajectory: Trajectory,
        effects_path: str | os.PathLike[str] | None = None,
        *,
        check_ledger: bool = False,
    ) -> None:
        self.trajectory = trajectory
        self.effects_path = os.fspath(effects_path) if effects_path is not None else None
        self.check_ledger = check_ledger
        self.executions: dict[tuple[int, str], int] = {}
        self._functions = [self._make(name) for name in trajectory.tool_names]

    def __iter__(self) -> Iterator[Any]:
        return iter(self._functions)

    def __len__(self) -> int:
        return len(self._functions)

    @property
    def functions(self) -> list[Any]:
        """The tool functions, one per tool name of the recording (sorted by name)."""
        return list(self._functions)

    def _locate(self, tool_call_id: str, call_key: str | None) -> int:
        """Position of the assistant message that made call ``tool_call_id``.

        The ledger key of the call (``ToolNode``: ``"<assistant message id>:<tool_call_id>:
        <digest>"``) names the assistant message; the replay model's message ids name their
        position. Without a key, the id must be unique in the recording.
        """
        traj = self.trajectory
        candidates = [
            i
            for i, m in enumerate(traj.messages)
            if m.role == "assistant" and any(c.id == tool_call_id for c in m.tool_calls())
        ]
        if call_key:
            for i in candidates:
                if call_key.startswith(f"{traj.message_id(i)}:{tool_call_id}:"):
                    return i
        if len(candidates) == 1:
            return candidates[0]
        if not candidates:
            raise ValueError(f"the recording {traj.id!r} has no tool call {tool_call_id!r}")
        raise ValueError(
            f"the recording {traj.id!r} makes several calls with id {tool_call_id!r} and the "
            "calling assistant message is not one of the replay model's"
        )

    def _make(self, name: str) -> Any:
        replay = self

        # Only **kwargs: recorded arguments may be named like ToolNode's injected parameters
        # (retail's address tools take a "state" argument); the call comes from the context.
        async def replayed(**kwargs: Any) -> str:
            return await replay._run(name, kwargs)

        replayed.__name__ = name
        replayed.__qualname__ = f"ReplayTools.{name}"
        return tool(name=name, description=f"Replays the recorded results of the tool {name!r}.")(
            replayed
        )

    async def _run(self, name: str, args: dict[str, Any]) -> str:
        from tenxgraph.core._context import current_tool_call

        current = current_tool_call()
        if current is None:
            raise RuntimeError(f"replay tool {name!r} must be run by a ToolNode")
        traj = self.trajectory
        tool_call_id = current.tool_call_id
        pos = self._locate(tool_call_id, current.call_key)
        call = next(c for c in traj.messages[pos].tool_calls() if c.id == tool_call_id)
        if call.name != name or _canon(call.args) != _canon(args):
            raise ValueError(
                f"call {tool_call_id!r} of {traj.id!r} was recorded as {call.name}({_canon(call.args)}), "
                f"not {name}({_canon(args)})"
            )
        result = traj.result_for(pos, tool_call_id)
        ledger_had_it: bool | None = None
        if self.check_ledger:
            ledger_had_it = await _ledger_holds_current_call()
        key = (pos, tool_call_id)
        self.executions[key] = self.executions.get(key, 0) + 1
        if self.effects_path is not None:
            self._append(pos, tool_call_id, name, ledger_had_it)
        return result.text()

    def _append(self, pos: int, tool_call_id: str, name: str, ledger_had_it: bool | None) -> None:
        assert self.effects_path is not None  # the only caller checks it
        from tenxgraph.core._context import current_run

        run = current_run()
        thread_id = str(run.config.get("thread_id")) if run is not None else ""
        line = json.dumps(
            {
                "t": thread_id,
                "r": self.trajectory.id,
                "p": pos,
                "c": tool_call_id,
                "n": name,
                "pid": os.getpid(),
                "l": ledger_had_it,
            },
            ensure_ascii=False,
        )
        fd = os.open(self.effects_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, (line + "\n").encode())
        finally:
            os.close(fd)


def _canon(args: Any) -> str:
    return json.dumps(args, sort_keys=True, ensure_ascii=False)


async def _ledger_holds_current_call() -> bool | None:
    from tenxgraph.core._context import current_run, current_tool_call

    run, call = current_run(), current_tool_call()
    if run is None or call is None:
        return None
    try:
        return await run.checkpointer.aledger_get(run.config, call.call_key) is not None
    except Exception:  # noqa: BLE001 - a verification aid; never fail the tool for it
        return None


def tool_call_total(trajectories: Iterable[Trajectory]) -> int:
    """Total tool calls of ``trajectories`` (count)."""
    return sum(t.tool_call_count for t in trajectories)
