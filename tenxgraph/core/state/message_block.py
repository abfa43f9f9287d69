"""Typed content blocks of a :class:`~tenxgraph.core.state.Message` (10xGraph's block catalogue).

Every block has a ``type`` discriminator, so a stored message decodes back to the same block
classes without naming any Python class in storage.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "AnnotationBlock",
    "AnnotationRef",
    "AudioBlock",
    "ContentBlock",
    "DataBlock",
    "DocumentBlock",
    "ErrorBlock",
    "ImageBlock",
    "MediaRef",
    "ReasoningBlock",
    "RemoteToolCallBlock",
    "TextBlock",
    "ToolCallBlock",
    "ToolResultBlock",
    "VideoBlock",
]


class _Block(BaseModel):
    model_config = ConfigDict(extra="forbid")


class MediaRef(_Block):
    """Reference to binary media: ``kind`` is ``url``, ``file_id`` or ``data`` (base64)."""

    kind: Literal["url", "file_id", "data"] = "url"
    url: str | None = None
    file_id: str | None = None
    data_base64: str | None = None
    mime_type: str | None = None
    size_bytes: int | None = None
    sha256: str | None = None
    filename: str | None = None
    width: int | None = None
    height: int | None = None
    duration_ms: int | None = None
    page: int | None = None


class AnnotationRef(_Block):
    """A citation: source ``url`` or ``file_id``, ``page``, ``index``, ``title``."""

    url: str | None = None
    file_id: str | None = None
    page: int | None = None
    index: int | None = None
    title: str | None = None


class TextBlock(_Block):
    """Plain text (``type="text"``)."""

    type: Literal["text"] = "text"
    text: str
    annotations: list[AnnotationRef] = Field(default_factory=list)


class ImageBlock(_Block):
    """An image (``type="image"``)."""

    type: Literal["image"] = "image"
    media: MediaRef
    alt_text: str | None = None
    bbox: list[float] | None = None


class AudioBlock(_Block):
    """Audio (``type="audio"``); ``sample_rate`` in Hz."""

    type: Literal["audio"] = "audio"
    media: MediaRef
    transcript: str | None = None
    sample_rate: int | None = None
    channels: int | None = None


class VideoBlock(_Block):
    """Video (``type="video"``)."""

    type: Literal["video"] = "video"
    media: MediaRef
    thumbnail: MediaRef | None = None


class DocumentBlock(_Block):
    """A document (``type="document"``)."""

    type: Literal["document"] = "document"
    media: MediaRef | None = None
    text: str | None = None
    pages: list[int] | None = None
    excerpt: str | None = None


class DataBlock(_Block):
    """Opaque data with a MIME type (``type="data"``)."""

    type: Literal["data"] = "data"
    mime_type: str
    data_base64: str | None = None
    media: MediaRef | None = None


class ToolCallBlock(_Block):
    """A tool call requested by the model (``type="tool_call"``): ``id``, ``name``, ``args``."""

    type: Literal["tool_call"] = "tool_call"
    id: str
    name: str
    args: dict[str, Any] = Field(default_factory=dict)
    tool_type: str | None = None


class RemoteToolCallBlock(_Block):
    """A tool call to be run by a remote client (``type="remote_tool_call"``)."""

    type: Literal["remote_tool_call"] = "remote_tool_call"
    id: str
    name: str
    args: dict[str, Any] = Field(default_factory=dict)
    tool_type: str = "remote"


class ToolResultBlock(_Block):
    """The result of a tool call (``type="tool_result"``); ``is_error`` when the tool failed."""

    type: Literal["tool_result"] = "tool_result"
    tool_call_id: str
    content: str | list[Any] | dict[str, Any] | None = None
    is_error: bool = False


class ReasoningBlock(_Block):
    """A reasoning trace (``type="reasoning"``)."""

    type: Literal["reasoning"] = "reasoning"
    thinking: str
    signature: str | None = None


class AnnotationBlock(_Block):
    """A structured citation (``type="annotation"``)."""

    type: Literal["annotation"] = "annotation"
    annotation: AnnotationRef


class ErrorBlock(_Block):
    """An error during execution (``type="error"``)."""

    type: Literal["error"] = "error"
    error: str
    code: str | None = None


ContentBlock = Annotated[
    TextBlock
    | ImageBlock
    | AudioBlock
    | VideoBlock
    | DocumentBlock
    | DataBlock
    | ToolCallBlock
    | RemoteToolCallBlock
    | ToolResultBlock
    | ReasoningBlock
    | AnnotationBlock
    | ErrorBlock,
    Field(discriminator="type"),
]
"""Any content block, discriminated by its ``type`` field (``"text"``, ``"image"`` ...)."""
