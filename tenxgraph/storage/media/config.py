"""``MultimodalConfig``: how an agent validates media and hands it to its provider (10xGraph's
``agentflow.storage.media.config``)."""

from __future__ import annotations

from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["DocumentHandling", "ImageHandling", "MultimodalConfig"]


class ImageHandling(StrEnum):
    """How images reach the provider: inline base64, a URL, or a provider file id."""

    BASE64 = "base64"
    URL = "url"
    FILE_ID = "file_id"


class DocumentHandling(StrEnum):
    """What happens to documents: their extracted text is sent (``EXTRACT_TEXT``), the raw
    file is forwarded (``FORWARD_RAW``, value ``"pass_raw"`` as in 10xGraph), or they are
    dropped (``SKIP``)."""

    EXTRACT_TEXT = "extract_text"
    FORWARD_RAW = "pass_raw"
    SKIP = "skip"


def _image_types() -> set[str]:
    return {"image/jpeg", "image/png", "image/webp", "image/gif"}


def _doc_types() -> set[str]:
    return {
        "application/pdf",
        "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
    }


class MultimodalConfig(BaseModel):
    """Limits and delivery choices for media (a Pydantic model; unknown fields are refused).

    Attributes:
        image_handling: :class:`ImageHandling` (default ``BASE64``).
        document_handling: :class:`DocumentHandling` (default ``EXTRACT_TEXT``).
        max_image_size_mb: largest accepted image in MiB (default 10.0).
        max_image_dimension: images whose width or height exceeds this many pixels are scaled
            down, keeping the aspect ratio (default 2048).
        supported_image_types: accepted image MIME types (default JPEG, PNG, WebP, GIF).
        supported_doc_types: accepted document MIME types (default PDF and DOCX).
    """

    model_config = ConfigDict(extra="forbid")

    image_handling: ImageHandling = ImageHandling.BASE64
    document_handling: DocumentHandling = DocumentHandling.EXTRACT_TEXT
    max_image_size_mb: float = Field(default=10.0, gt=0)
    max_image_dimension: int = Field(default=2048, gt=0)
    supported_image_types: set[str] = Field(default_factory=_image_types)
    supported_doc_types: set[str] = Field(default_factory=_doc_types)
