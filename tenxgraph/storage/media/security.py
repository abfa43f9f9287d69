"""Checks for uploaded media: the bytes match the claimed type, file names are safe to store,
sizes stay under a limit."""

from __future__ import annotations

import re
import unicodedata

from tenxgraph.core.exceptions import ValidationError

__all__ = ["enforce_file_size", "sanitize_filename", "validate_magic_bytes"]

#: Leading bytes ("magic numbers") of the formats whose signature is fixed, per MIME type.
_SIGNATURES: dict[str, tuple[bytes, ...]] = {
    "image/png": (b"\x89PNG\r\n\x1a\n",),
    "image/jpeg": (b"\xff\xd8\xff",),
    "image/gif": (b"GIF87a", b"GIF89a"),
    "image/bmp": (b"BM",),
    "image/tiff": (b"II*\x00", b"MM\x00*"),
    "application/pdf": (b"%PDF-",),
    "application/zip": (b"PK\x03\x04",),
    "application/vnd.openxmlformats-officedocument.wordprocessingml.document": (b"PK\x03\x04",),
    "audio/mpeg": (b"ID3", b"\xff\xfb", b"\xff\xf3", b"\xff\xf2"),
    "audio/mp3": (b"ID3", b"\xff\xfb", b"\xff\xf3", b"\xff\xf2"),
    "audio/flac": (b"fLaC",),
    "audio/ogg": (b"OggS",),
}

#: RIFF containers: bytes 0-3 are ``RIFF``, bytes 8-11 name the format.
_RIFF: dict[str, bytes] = {
    "image/webp": b"WEBP",
    "audio/wav": b"WAVE",
    "audio/x-wav": b"WAVE",
    "audio/wave": b"WAVE",
}

_MAX_NAME = 255
_UNSAFE = re.compile(r"[^A-Za-z0-9._() \[\]-]")


def validate_magic_bytes(data: bytes, mime_type: str) -> bool:
    """Whether ``data`` starts with the signature of ``mime_type``.

    Args:
        data: the file's bytes.
        mime_type: the claimed type, e.g. ``"image/png"``.

    Returns:
        ``False`` for empty data or a signature mismatch; ``True`` when the signature
        matches, or when the type has no fixed signature (``application/octet-stream``,
        ``text/plain``...), which this check cannot judge.
    """
    if not data:
        return False
    mime = mime_type.lower().split(";", 1)[0].strip()
    if mime in _RIFF:
        return data[:4] == b"RIFF" and data[8:12] == _RIFF[mime]
    if mime in ("video/mp4", "video/quicktime", "audio/mp4", "audio/m4a"):
        return data[4:8] == b"ftyp"
    signatures = _SIGNATURES.get(mime)
    if signatures is None:
        return True
    return any(data.startswith(sig) for sig in signatures)


def sanitize_filename(filename: str) -> str:
    """A file name safe to store or show: no directory part, no ``..``, no control or NUL
    characters, at most 255 characters (the extension kept).

    Args:
        filename: a client-supplied name such as ``"../../etc/passwd"``.

    Returns:
        The cleaned name; ``"unnamed"`` when nothing usable is left.
    """
    name = unicodedata.normalize("NFKC", filename or "")
    name = "".join(ch for ch in name if ch.isprintable())
    name = name.replace("\\", "/").rsplit("/", 1)[-1]
    name = _UNSAFE.sub("_", name)
    while ".." in name:
        name = name.replace("..", ".")
    name = name.strip(" .")
    if not name:
        return "unnamed"
    if len(name) > _MAX_NAME:
        stem, dot, ext = name.rpartition(".")
        if dot and 0 < len(ext) <= 16:
            name = stem[: _MAX_NAME - len(ext) - 1] + "." + ext
        else:
            name = name[:_MAX_NAME]
    return name


def enforce_file_size(data: bytes, max_mb: float) -> None:
    """Refuse ``data`` larger than ``max_mb`` MiB.

    Args:
        data: the file's bytes.
        max_mb: the limit in MiB (1 MiB = 1,048,576 bytes).

    Raises:
        ValidationError: ``VALIDATION_000`` (a ``ValueError``) when the data exceeds the
            limit; ``context`` has ``size_bytes`` and ``max_bytes``.
    """
    limit = int(max_mb * 1024 * 1024)
    if len(data) > limit:
        raise ValidationError(
            f"file of {len(data)} bytes exceeds maximum of {max_mb} MB",
            context={"size_bytes": len(data), "max_bytes": limit},
        )
