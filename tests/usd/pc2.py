"""Reading PC2 point caches (the `.garment.pc2` of `clothcast watch --record`), for the
checks in this folder."""
import struct


def read_pc2(path):
    """Every sample of the cache at `path`: a flat tuple of x, y, z per point. Raises
    ValueError when the file is not a PC2 cache."""
    with open(path, "rb") as f:
        head = f.read(32)
        if len(head) < 32:
            raise ValueError(f"{path}: shorter than a PC2 header")
        magic, version, points, _start, _rate, samples = struct.unpack("<12siiffi", head)
        if magic != b"POINTCACHE2\0" or version != 1:
            raise ValueError(f"{path}: not a PC2 file")
        data = f.read()
    floats = struct.unpack(f"<{len(data) // 4}f", data)
    n = 3 * points
    return [floats[k * n:(k + 1) * n] for k in range(samples)]
