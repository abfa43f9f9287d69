"""``MediaProcessor``: checks and reshapes inline images before they reach a provider.

Pixel work uses Pillow (``pip install -e '.[media]'``). Without Pillow the size and type checks
still run and the pixel operations return the block unchanged (nothing to decode with).
Only inline blocks (``media.kind == "data"``) are touched; URL and file-id references are
returned as they are. Each operation returns a new block and never mutates its argument.
"""

from __future__ import annotations

import base64
import binascii
import io
import logging
from types import ModuleType
from typing import Any

from tenxgraph.core.exceptions import ValidationError
from tenxgraph.core.state.message_block import ImageBlock

from .config import MultimodalConfig

__all__ = ["MediaProcessor"]

logger = logging.getLogger(__name__)

_FORMATS = {"image/jpeg": "JPEG", "image/png": "PNG", "image/webp": "WEBP", "image/gif": "GIF"}
_MIMES = {fmt: mime for mime, fmt in _FORMATS.items()}
_EXIF_ORIENTATION = 0x0112


def _pil_format(mime_type: str | None) -> str:
    """Pillow's format name for ``mime_type``; ``"PNG"`` for anything else (or ``None``)."""
    return _FORMATS.get((mime_type or "").lower(), "PNG")


def _pil() -> tuple[ModuleType, ModuleType] | None:
    """``(PIL.Image, PIL.ImageOps)``, or ``None`` when Pillow is not installed."""
    try:
        from PIL import Image, ImageOps
    except ImportError:
        return None
    return Image, ImageOps


class MediaProcessor:
    """Validates, resizes, re-encodes and re-orients :class:`ImageBlock` s.

    Args:
        config: the limits (default :class:`MultimodalConfig()`).
    """

    def __init__(self, config: MultimodalConfig | None = None) -> None:
        self.config = config or MultimodalConfig()

    # -- checks -------------------------------------------------------------------------------
    def validate_image(self, block: ImageBlock) -> None:
        """Refuse an image of an unsupported type or over ``max_image_size_mb``.

        The type is ``media.mime_type`` (``image/png`` when absent); the size is
        ``media.size_bytes`` when given, and the decoded size of inline data.

        Raises:
            ValidationError: ``VALIDATION_000`` (a ``ValueError``): "Unsupported image type",
                "Image too large" or "Image data too large".
        """
        media = block.media
        mime = (media.mime_type or "image/png").lower()
        if mime not in self.config.supported_image_types:
            raise ValidationError(
                f"Unsupported image type: {mime} (accepted: "
                f"{', '.join(sorted(self.config.supported_image_types))})",
                context={"field": "mime_type", "reason": "unsupported"},
            )
        limit = int(self.config.max_image_size_mb * 1024 * 1024)
        if media.size_bytes is not None and media.size_bytes > limit:
            raise ValidationError(
                f"Image too large: {media.size_bytes} bytes, limit {limit}",
                context={"field": "size_bytes", "reason": "too large"},
            )
        if media.data_base64:
            decoded = len(media.data_base64) * 3 // 4
            if decoded > limit:
                raise ValidationError(
                    f"Image data too large: about {decoded} bytes decoded, limit {limit}",
                    context={"field": "data_base64", "reason": "too large"},
                )

    # -- helpers ------------------------------------------------------------------------------
    def _open(self, block: ImageBlock) -> tuple[Any, ModuleType, ModuleType] | None:
        if block.media.kind != "data" or not block.media.data_base64:
            return None
        pil = _pil()
        if pil is None:
            logger.info("Pillow is not installed; image left as it is")
            return None
        image_mod, ops = pil
        try:
            raw = base64.b64decode(block.media.data_base64, validate=True)
            img = image_mod.open(io.BytesIO(raw))
            img.load()
        except (binascii.Error, ValueError, OSError, image_mod.DecompressionBombError) as exc:
            raise ValidationError(
                f"image data could not be decoded: {type(exc).__name__}",
                context={"field": "data_base64", "reason": "undecodable"},
            ) from None
        return img, image_mod, ops

    @staticmethod
    def _encode(block: ImageBlock, img: Any, fmt: str, **save: Any) -> ImageBlock:
        if fmt == "JPEG" and img.mode not in ("RGB", "L"):
            img = img.convert("RGB")
        buf = io.BytesIO()
        img.save(buf, format=fmt, **save)
        raw = buf.getvalue()
        media = block.media.model_copy(
            update={
                "data_base64": base64.b64encode(raw).decode(),
                "mime_type": _MIMES.get(fmt, block.media.mime_type),
                "width": img.width,
                "height": img.height,
                "size_bytes": len(raw),
                "sha256": None,
            }
        )
        return block.model_copy(update={"media": media})

    # -- operations ---------------------------------------------------------------------------
    def resize_image(self, block: ImageBlock) -> ImageBlock:
        """Scale an inline image down so neither side exceeds ``max_image_dimension``
        (aspect ratio kept, same format); ``block`` itself when already small enough, not
        inline, or Pillow is missing.

        Raises:
            ValidationError: ``VALIDATION_000`` when the inline data is not an image.
        """
        opened = self._open(block)
        if opened is None:
            return block
        img, image_mod, _ = opened
        limit = self.config.max_image_dimension
        if max(img.width, img.height) <= limit:
            return block
        img.thumbnail((limit, limit), image_mod.Resampling.LANCZOS)
        return self._encode(block, img, _pil_format(block.media.mime_type))

    def process(self, block: ImageBlock) -> ImageBlock:
        """:meth:`validate_image`, then :meth:`resize_image`."""
        self.validate_image(block)
        return self.resize_image(block)

    def generate_thumbnail(self, block: ImageBlock, max_dim: int = 256) -> ImageBlock:
        """A JPEG thumbnail whose sides are at most ``max_dim`` pixels; ``block`` itself when
        it is already that small, not inline, or Pillow is missing."""
        opened = self._open(block)
        if opened is None:
            return block
        img, image_mod, _ = opened
        if max(img.width, img.height) <= max_dim:
            return block
        img.thumbnail((max_dim, max_dim), image_mod.Resampling.LANCZOS)
        return self._encode(block, img, "JPEG", quality=85)

    def optimize_image(
        self, block: ImageBlock, target_format: str = "JPEG", quality: int = 85
    ) -> ImageBlock:
        """Re-encode an inline image as ``target_format`` (``"JPEG"``, ``"PNG"``,
        ``"WEBP"``; ``quality`` 1-95 for lossy formats); ``block`` itself when not inline or
        Pillow is missing. Transparency is flattened for JPEG."""
        fmt = target_format.upper()
        if fmt not in _MIMES:
            raise ValidationError(
                f"unsupported target_format {target_format!r}; use JPEG, PNG, WEBP or GIF",
                context={"field": "target_format", "reason": "unsupported"},
            )
        opened = self._open(block)
        if opened is None:
            return block
        img = opened[0]
        save: dict[str, Any] = {"optimize": True}
        if fmt in ("JPEG", "WEBP"):
            save["quality"] = quality
        return self._encode(block, img, fmt, **save)

    def fix_orientation(self, block: ImageBlock) -> ImageBlock:
        """Apply an EXIF ``Orientation`` tag to the pixels (a photo taken sideways comes out
        upright, width and height swapped as needed); ``block`` itself when there is no such
        tag, it says "upright", the block is not inline, or Pillow is missing."""
        opened = self._open(block)
        if opened is None:
            return block
        img, _, ops = opened
        orientation = img.getexif().get(_EXIF_ORIENTATION, 1)
        if orientation in (None, 1):
            return block
        fmt = img.format or _pil_format(block.media.mime_type)
        fixed = ops.exif_transpose(img)
        return self._encode(block, fixed, fmt)

    def full_process(self, block: ImageBlock) -> ImageBlock:
        """:meth:`validate_image`, :meth:`fix_orientation`, then :meth:`resize_image`."""
        self.validate_image(block)
        return self.resize_image(self.fix_orientation(block))
