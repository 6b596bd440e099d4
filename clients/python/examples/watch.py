"""A terminal viewer of a clothcast server in Python: once a second, each avatar's frame
rate, last frame number, garment size and where it stands (the translation of its
frame's `world`, metres, +Y up); the start of a program of your own on the `clothcast`
module.

    python3 clients/python/examples/watch.py ws://127.0.0.1:8470/ws [--token T] [--seconds S]

The module (`clothcast.so`, clients/python/build.sh) must be importable: by default
this looks in clients/python/build beside it. Exits 1 with the reason when the server
refuses the viewer for good (a wrong token)."""
import argparse
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "build"))
import clothcast  # noqa: E402


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("url")
    p.add_argument("--token", default=os.environ.get("CLOTHCAST_VIEWER_TOKEN"))
    p.add_argument("--seconds", type=float, default=None, help="stop after this long")
    a = p.parse_args()
    frames = {}
    start = last = time.monotonic()
    with clothcast.Viewer(a.url, token=a.token) as v:
        while a.seconds is None or time.monotonic() - start < a.seconds:
            try:
                updated, gone = v.poll()
            except clothcast.ClientError as e:
                print(f"refused: {e}", file=sys.stderr)
                return 1
            for avatar in updated:
                frames[avatar] = frames.get(avatar, 0) + 1
            for avatar in gone:
                frames.pop(avatar, None)
                print(f"{avatar} left")
            for problem in v.errors():
                print(f"refused a message: {problem}", file=sys.stderr)
            now = time.monotonic()
            if now - last >= 1.0:
                state = "connected" if v.connected else f"connecting ({v.error})"
                print(f"-- {a.url}: {state}, {len(v.avatars)} avatars")
                for avatar in v.avatars:
                    f = v.frame(avatar)
                    vertices = sum(v.asset(h)["vertices"] for h in f["assets"])
                    x, y, z = f["world"][4:]
                    fps = frames.get(avatar, 0) / (now - last)
                    print(f"{avatar:>20} {fps:5.1f} fps  frame {f['seq']:6d}  {vertices:6d} vertices  "
                          f"at ({x:+.2f}, {y:+.2f}, {z:+.2f}) m")
                frames = {k: 0 for k in frames}
                last = now
            time.sleep(0.01)
    return 0


if __name__ == "__main__":
    sys.exit(main())
