"""The graph-level input check: the run's new user messages go through the callback
manager's input validators (``CallbackManager.register_input_validator``) before anything of
the run happens, whatever nodes the graph has (10xGraph's validation tutorial puts the
validators between the user's message and the first node).

A refusal raises before anything is read or written, so a refused message is never stored.
The validators get copies (a lenient validator may sanitise them); the copies are kept on the
run context so that an ``Agent`` sends them to its model instead of validating the same
messages a second time. Messages that reach a model another way (a resumed run, messages added
by nodes) are still checked by the ``Agent`` before its model call.
"""

from __future__ import annotations

from typing import Any

from tenxgraph.core.state import Message

__all__ = ["validate_input"]


async def validate_input(run_ctx: Any, graph: Any, input_msgs: list[Message]) -> None:
    """Run the input validators of ``graph`` on the user messages of ``input_msgs``.

    Args:
        run_ctx: the run's ``RunContext`` (receives the validated copies).
        graph: the compiled graph (its ``callback_manager``).
        input_msgs: the run's new input messages.

    Raises:
        tenxgraph.utils.validators.ValidationError: ``VALIDATION_002`` when a validator
            refuses them (or returns ``False``).
    """
    cbm = getattr(graph, "callback_manager", None)
    if cbm is None or not input_msgs or not cbm.validators:
        return
    users = [m for m in input_msgs if m.role == "user"]
    if not users:
        return
    copies = [m.model_copy(deep=True) for m in users]
    if not await cbm.execute_validators(copies):
        from tenxgraph.utils.validators import ValidationError as InputRefused

        raise InputRefused("an input validator refused the newest messages", "rejected")
    run_ctx.validated = {c.message_id: c for c in copies}
