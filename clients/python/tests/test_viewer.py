"""clothcast.Viewer against a real server: `clothcast serve` (tokens on) with the small
test database, `clothcast play` of CMU 131_03 on two avatars, and `clothcast watch
--record` alongside as the independent record of what the server sent."""
import array
import os
import re
import socket
import subprocess
import sys
import time
import unittest

from harness import MODULE_DIR, ROOT, VIEWER_TOKEN, Processes, clothcast, median_distance, recorded, stop, to_world


def poll_until(viewer, done, seconds, what):
    """Polls `viewer` every 20 ms until `done(updated, gone)` is true; returns every
    avatar id seen updated."""
    seen = set()
    deadline = time.time() + seconds
    while time.time() < deadline:
        updated, gone = viewer.poll()
        seen.update(updated)
        if done(updated, gone):
            return seen
        time.sleep(0.02)
    raise AssertionError(f"timed out after {seconds} s waiting for {what} (viewer error: {viewer.error})")


class Live(unittest.TestCase):
    def test_two_avatars_stream_as_the_recorder_saw_them_and_come_back_after_a_restart(self):
        with Processes() as ps:
            srv, addr = ps.serve()
            recorder, takes = ps.record(addr, seconds=6)
            player = ps.play(addr, avatars=2, seconds=60)
            with clothcast.Viewer(f"ws://{addr}/ws", token=VIEWER_TOKEN) as v:
                poll_until(v, lambda u, g: len(v.avatars) == 2, 30, "two avatars")
                self.assertTrue(v.connected)
                self.assertEqual(v.tick_hz, 30.0)
                self.assertIsNone(v.error)
                ids = v.avatars
                # snapshots of both avatars at several moments, while the recorder runs
                shots = []
                start = {a: v.frame(a)["frames"] for a in ids}
                t = time.time()
                while time.time() - t < 3:
                    updated, _ = v.poll()
                    for a in updated:
                        if len(shots) < 40 and (v.frame(a)["seq"] % 7 == 0):
                            f = v.frame(a)
                            g = v.garment(a)
                            shots.append((a, f, g.tobytes(), v.body(a).tobytes(), v.bones(a)))
                    time.sleep(0.01)
                # 30 Hz each: ~90 frames in 3 s; decoded as they come, none queued up
                for a in ids:
                    got = v.frame(a)["frames"] - start[a]
                    self.assertGreater(got, 60, f"{a}: {got} frames in 3 s")
                self.assertGreaterEqual(len(shots), 6)
                # the recorder ends its takes; compare each snapshot with its sample
                recorder.wait(30)
                takes_of = {a: recorded(takes, a) for a in ids}
                compared = 0
                for a, f, g, body, bones in shots:
                    sample = takes_of[a].get(f["seq"])
                    if sample is None:
                        continue  # after the recorder stopped
                    self.assertEqual(len(f["assets"]), 1)
                    asset = v.asset(f["assets"][0])
                    garment = array.array("f", g)
                    self.assertEqual(len(garment), 3 * asset["vertices"])
                    world = to_world(f["world"], garment)
                    off = max(abs(p - s) for pt, i in zip(world, range(0, len(sample), 3))
                              for p, s in zip(pt, sample[i:i + 3]))
                    self.assertLess(off, 1e-4, f"{a} frame {f['seq']}: {off * 1000:.3f} mm off the recording")
                    # the body posed by the frame's bones lies under the garment
                    body = to_world(f["world"], array.array("f", body))
                    self.assertEqual(len(body), len(asset["body"]["positions"]) // 3)
                    median, worst = median_distance(world, body)
                    self.assertLess(median, 0.04, f"{a} frame {f['seq']}: garment {median:.3f} m (median) from the body")
                    self.assertLess(worst, 0.15)
                    self.assertEqual(len(bones), 22)
                    compared += 1
                self.assertGreaterEqual(compared, 4, "snapshots within the recording")
                # the server restarts on the same address: the viewer comes back by itself
                # (the player stops too, or it would bring both avatars back)
                stop(player)
                stop(srv)
                poll_until(v, lambda u, g: not v.connected, 30, "the viewer to notice")
                self.assertIsNotNone(v.error)
                ps.serve(bind=addr)
                # one avatar comes back; the other, gone while the link was down, is
                # reported gone a few seconds after the reconnection
                ps.play(addr, avatars=1, seconds=60)
                back, left = ids
                before = v.frame(back)["frames"]
                gone = set()

                def done(updated, g):
                    gone.update(g)
                    return back in v.avatars and v.frame(back)["frames"] > before + 10 and left in gone

                poll_until(v, done, 60, "frames after the restart, and the other avatar gone")
                self.assertEqual(v.avatars, [back])
                self.assertEqual(gone, {left})
                with self.assertRaises(KeyError):
                    v.frame(left)
                self.assertEqual(v.connections, 2)
                self.assertTrue(v.connected)
            # closed: the link is down and closing again does nothing
            self.assertFalse(v.connected)
            v.close()

    def test_the_example_viewer_prints_both_avatars_at_the_tick_rate(self):
        example = os.path.join(ROOT, "clients", "python", "examples", "watch.py")
        env = dict(os.environ, PYTHONPATH=MODULE_DIR) if MODULE_DIR else None
        with Processes() as ps:
            _, addr = ps.serve()
            ps.play(addr, avatars=2, seconds=60)
            out = subprocess.run([sys.executable, example, f"ws://{addr}/ws", "--token", VIEWER_TOKEN,
                                  "--seconds", "5"], capture_output=True, text=True, timeout=60, env=env)
            self.assertEqual(out.returncode, 0, out.stderr)
            rows = re.findall(r"(performer-\d) +([0-9.]+) fps +frame +(\d+) +(\d+) vertices", out.stdout)
            last = {avatar: (float(fps), int(n)) for avatar, fps, _, n in rows}
            self.assertEqual(sorted(last), ["performer-0", "performer-1"], out.stdout)
            for avatar, (fps, vertices) in last.items():
                self.assertGreater(fps, 20, f"{avatar}: {out.stdout}")
                self.assertEqual(vertices, 900)
            refused = subprocess.run([sys.executable, example, f"ws://{addr}/ws", "--token", "wrong",
                                      "--seconds", "20"], capture_output=True, text=True, timeout=60, env=env)
            self.assertEqual(refused.returncode, 1)
            self.assertIn("4001", refused.stderr)

    def test_a_wrong_token_is_refused_for_good(self):
        with Processes() as ps:
            _, addr = ps.serve()
            v = clothcast.Viewer(f"ws://{addr}/ws", token="not-the-token")
            deadline = time.time() + 20
            with self.assertRaises(clothcast.ClientError) as refused:
                while time.time() < deadline:
                    v.poll()
                    time.sleep(0.02)
            self.assertIn("4001", str(refused.exception))
            self.assertIsInstance(refused.exception, ConnectionError)
            self.assertFalse(v.connected)
            self.assertEqual(v.connections, 0)
            self.assertIn("4001", v.error)
            v.close()

    def test_nobody_listening_is_retried_and_said(self):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        s.close()
        v = clothcast.Viewer(f"ws://127.0.0.1:{port}/ws")
        deadline = time.time() + 10
        while v.error is None and time.time() < deadline:
            self.assertEqual(v.poll(), ([], []))
            time.sleep(0.05)
        self.assertIn("refused", v.error.lower())
        self.assertFalse(v.connected)
        self.assertEqual(v.avatars, [])
        with self.assertRaises(KeyError):
            v.garment("nobody")
        with self.assertRaises(KeyError):
            v.asset("0123")
        v.close()

    def test_bad_arguments_are_refused_at_once(self):
        with self.assertRaisesRegex(ValueError, "ws://"):
            clothcast.Viewer("http://127.0.0.1:8470/ws")
        with self.assertRaisesRegex(ValueError, "avatar id"):
            clothcast.Viewer("ws://127.0.0.1:8470/ws", avatars=["a b\n"])
        with self.assertRaises(TypeError):
            clothcast.Viewer("ws://127.0.0.1:8470/ws", avatars="performer-0")


if __name__ == "__main__":
    unittest.main()
