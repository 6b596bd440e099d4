"""Type stubs of the module `clothcast` (built from src/*.rs by PyO3; the docstrings
there are the reference). Positions are in the avatar's canonical frame: metres, +Y
up, facing +Z; a frame's `world` (qx, qy, qz, qw, tx, ty, tz) places them."""

from types import TracebackType
from typing import Any, Literal, TypedDict

from collections.abc import Buffer

FORMAT_VERSION: int
"""The garment stream format this build decodes."""
PROTOCOL_VERSION: int
"""The server protocol version this build speaks."""
JOINT_NAMES: list[str]
"""The canonical skeleton's 22 joints, in bone order (the order of `bones()`)."""

Bone = list[float]
"""[qx, qy, qz, qw, tx, ty, tz]: a rigid transform (a bone's skinning transform, rest
pose to the frame's pose; or a frame's `world`), canonical frame, metres."""

class CodecError(ValueError):
    """A garment setup or frame refused by the decoder."""

    code: str
    """`empty`, `truncated`, `trailing-bytes`, `bad-magic`, `unsupported-version`,
    `bad-kind`, `too-large`, `mismatch`, `invalid`, `corrupt`, `wrong-setup`,
    `missing-reference` or `checksum`, as the JavaScript and C# decoders name them."""

class ClientError(ConnectionError):
    """The server refused the viewer in a way that retrying cannot change (a wrong
    token, an unsupported protocol version)."""

class FrameHeader(TypedDict):
    kind: Literal["key", "delta"]
    frame: int
    reference: int
    stream: int
    setup: int
    vertices: int
    bones: int
    checksum: int
    bytes: int

class Decoder:
    """Decodes one garment stream (keyframes and deltas, in order), bit-exact with the
    server's encoder. A refused frame raises `CodecError` and changes nothing."""

    def __init__(self, setup: bytes) -> None: ...
    @property
    def vertex_count(self) -> int: ...
    @property
    def bone_count(self) -> int: ...
    @property
    def triangles(self) -> memoryview:
        """3 × triangles uint32 vertex indices, counter-clockwise seen from outside."""
    @property
    def setup_id(self) -> int: ...
    @property
    def last_frame(self) -> int | None: ...
    def decode(self, frame: bytes, out: Buffer) -> FrameHeader:
        """Decodes `frame` into `out`, a writable buffer of 3 × vertex_count float32."""
    def bones(self) -> list[Bone]: ...
    def reset(self) -> None:
        """Forgets the stream: the next frame must be a keyframe."""

class FrameInfo(TypedDict):
    seq: int
    timestamp: float
    pose_timestamp: float
    world: Bone
    assets: list[str]
    frames: int

class Body(TypedDict):
    positions: memoryview
    triangles: memoryview
    joints: memoryview
    weights: memoryview
    skeleton: memoryview
    parents: list[int]

class AssetInfo(TypedDict):
    garment: str
    vertices: int
    triangles: memoryview
    body: Body | None

class Viewer:
    """A viewer connected to a clothcast server, on a thread of its own: it connects,
    subscribes, reconnects, asks for keyframes after a refused frame, and keeps each
    avatar's latest frame for `poll()` and the readers below."""

    def __init__(self, url: str, token: str | None = None, avatars: list[str] | None = None) -> None: ...
    def poll(self) -> tuple[list[str], list[str]]:
        """(updated, gone) since the last call; raises `ClientError` once refused for good."""
    def errors(self) -> list[str]:
        """What was wrong with each server message refused since the last call."""
    @property
    def connected(self) -> bool: ...
    @property
    def connections(self) -> int: ...
    @property
    def error(self) -> str | None: ...
    @property
    def tick_hz(self) -> float: ...
    @property
    def avatars(self) -> list[str]: ...
    def frame(self, avatar: str) -> FrameInfo: ...
    def garment(self, avatar: str, layer: int = 0, out: Buffer | None = None) -> Any:
        """The garment's positions (3 × vertices float32): into `out` and returned, or
        a new memoryview."""
    def body(self, avatar: str, out: Buffer | None = None) -> Any:
        """The body posed by the latest frame's bones (3 × body vertices float32)."""
    def bones(self, avatar: str) -> list[Bone]: ...
    def asset(self, hash: str) -> AssetInfo: ...
    def close(self) -> None: ...
    def __enter__(self) -> Viewer: ...
    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None: ...
