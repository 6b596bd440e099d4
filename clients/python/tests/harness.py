"""What the Python client's tests share: where the repository, the `clothcast` binary
and the built module are, running `clothcast serve`, `play` and `watch --record` as
child processes, and reading a recorded take back."""
import csv
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", "..", ".."))
BIN = os.environ.get("CLOTHCAST_BIN") or os.path.join(ROOT, "target", "debug", "clothcast")
# the module built by clients/python/build.sh; with CLOTHCAST_PYTHON_INSTALLED=1 the one
# installed in this Python (the wheel, as test.sh installs it), and MODULE_DIR is None
INSTALLED = os.environ.get("CLOTHCAST_PYTHON_INSTALLED") == "1"
MODULE_DIR = None if INSTALLED else (
    os.environ.get("CLOTHCAST_PYTHON_MODULE_DIR") or os.path.join(ROOT, "clients", "python", "build"))
DB = os.path.join(ROOT, "tests", "fixtures", "db", "v1", "small.ccdb")
CLIP = os.path.join(ROOT, "tests", "fixtures", "mocap", "cmu_131_03.bvh")
GOLDEN = os.path.join(ROOT, "tests", "fixtures", "codec")

if MODULE_DIR:
    sys.path.insert(0, MODULE_DIR)
sys.path.insert(0, os.path.join(ROOT, "tests", "usd"))
import clothcast  # noqa: E402
import pc2  # noqa: E402

if INSTALLED and not os.path.abspath(clothcast.__file__).startswith(sys.prefix):
    raise ImportError(f"clothcast was to come from this Python's packages ({sys.prefix}), not {clothcast.__file__}")

PUBLISHER_TOKEN = "python-test-publisher"
VIEWER_TOKEN = "python-test-viewer"


class Processes:
    """Child processes (output to files, so that no pipe fills), all killed on exit (or
    by stop_all, for a test that ends with os._exit). Their folder (logs, configs,
    recorded takes) goes when the `with` block ends without an exception and is kept,
    its path printed, when it raises (or a test leaves by os._exit)."""

    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="clothcast-python-")
        self.procs = []
        _LIVE.append(self)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()
        if exc[0] is None:
            shutil.rmtree(self.dir, ignore_errors=True)
        else:
            print(f"the child processes' logs are kept in {self.dir}", file=sys.stderr)
        return False

    def stop(self):
        for p, _ in self.procs:
            stop(p)

    def spawn(self, name, *args, tokens=True):
        log = os.path.join(self.dir, f"{name}-{len(self.procs)}.log")
        env = dict(os.environ)
        if tokens:
            env["CLOTHCAST_PUBLISHER_TOKEN"] = PUBLISHER_TOKEN
            env["CLOTHCAST_VIEWER_TOKEN"] = VIEWER_TOKEN
        with open(log, "wb") as out:
            p = subprocess.Popen([BIN, *args], stdout=out, stderr=subprocess.STDOUT, cwd=ROOT, env=env)
        self.procs.append((p, log))
        return p, log

    def serve(self, bind="127.0.0.1:0", config=None, tokens=True):
        """`clothcast serve` on `bind` (the small test database; `config`: TOML text of
        a config file instead); returns it and its address (host:port)."""
        args = ["serve", "--bind", bind]
        if config is None:
            args += ["--db", DB]
        else:
            path = os.path.join(self.dir, f"server-{len(self.procs)}.toml")
            with open(path, "w") as f:
                f.write(config)
            args += ["--config", path]
        p, log = self.spawn("serve", *args, tokens=tokens)
        deadline = time.time() + 60
        while time.time() < deadline:
            with open(log, errors="replace") as f:
                m = re.search(r"ws://([0-9.:]+)/ws", f.read())
            if m:
                return p, m.group(1)
            if p.poll() is not None:
                break
            time.sleep(0.1)
        stop(p)
        with open(log, errors="replace") as f:
            raise RuntimeError(f"the server did not say where it listens:\n{f.read()[-3000:]}")

    def play(self, addr, avatars=2, seconds=60, tokens=True):
        return self.spawn("play", "play", CLIP, "--url", f"ws://{addr}/ws", "--avatars", str(avatars),
                          "--seconds", str(seconds), tokens=tokens)[0]

    def record(self, addr, seconds, tokens=True):
        """`clothcast watch --record` for `seconds`; returns it and its folder."""
        d = os.path.join(self.dir, f"takes-{len(self.procs)}")
        p, _ = self.spawn("watch", "watch", "--url", f"ws://{addr}/ws", "--record", d, "--seconds", str(seconds),
                          tokens=tokens)
        return p, d


# every Processes made, for stop_all
_LIVE = []


def stop_all():
    """Stops the child processes of every Processes: what a test that leaves by
    os._exit (Blender's, whose verdict cannot wait for the interpreter's teardown) calls
    first, so that a failure leaves no server running."""
    for ps in _LIVE:
        ps.stop()


def stop(p):
    if p.poll() is None:
        p.kill()
    try:
        p.wait(5)
    except subprocess.TimeoutExpired:
        pass


def sample_of(directory, avatar):
    """{frame number (seq): sample index} of `avatar`'s take in a recording folder, for
    every frame the recorder received (missed frames repeat the sample before, with
    their times empty)."""
    out = {}
    with open(os.path.join(directory, avatar + ".timing.csv"), newline="") as f:
        for row in csv.DictReader(f):
            if row["server_seconds"]:
                out[int(row["frame"])] = int(row["sample"])
    return out


def recorded(directory, avatar):
    """The take of `avatar` in a recording folder: {frame number (seq): world-frame
    garment sample (flat x, y, z)} for every frame the recorder received."""
    samples = pc2.read_pc2(os.path.join(directory, avatar + ".garment.pc2"))
    return {seq: samples[k] for seq, k in sample_of(directory, avatar).items() if k < len(samples)}


def to_world(world, positions):
    """Canonical-frame positions (flat x, y, z) placed by a frame's `world` (qx, qy, qz,
    qw, tx, ty, tz), in f64: a list of (x, y, z)."""
    qx, qy, qz, qw, tx, ty, tz = world
    out = []
    for i in range(0, len(positions), 3):
        x, y, z = positions[i], positions[i + 1], positions[i + 2]
        # v + 2w (q × v) + 2 q × (q × v)
        cx, cy, cz = qy * z - qz * y, qz * x - qx * z, qx * y - qy * x
        dx, dy, dz = qy * cz - qz * cy, qz * cx - qx * cz, qx * cy - qy * cx
        out.append((x + 2 * (qw * cx + dx) + tx, y + 2 * (qw * cy + dy) + ty, z + 2 * (qw * cz + dz) + tz))
    return out


def median_distance(points, cloud):
    """Median and largest distance from each of `points` to its nearest in `cloud`
    (brute force over a grid of 5 cm cells)."""
    cell = 0.05
    grid = {}
    for p in cloud:
        grid.setdefault(tuple(int(c // cell) for c in p), []).append(p)
    ds = []
    for p in points:
        k = tuple(int(c // cell) for c in p)
        best = float("inf")
        for r in range(1, 6):
            for dx in range(-r, r + 1):
                for dy in range(-r, r + 1):
                    for dz in range(-r, r + 1):
                        for q in grid.get((k[0] + dx, k[1] + dy, k[2] + dz), ()):
                            best = min(best, sum((a - b) ** 2 for a, b in zip(p, q)))
            if best <= (r * cell) ** 2:
                break
        ds.append(best ** 0.5)
    ds.sort()
    return ds[len(ds) // 2], ds[-1]
