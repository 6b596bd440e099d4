"""clothcast.Viewer against a server that sends hostile messages: a WebSocket server of
this test's own (RFC 6455, by hand) that welcomes the viewer and streams the golden
stream as two avatars in JSON messages, with a bad message between frames. Each bad
message is refused by name in `errors()`, and both avatars stream on over the same
connection. A refused frame makes the viewer ask for a keyframe (`resync`), and ask
again while none comes; a server that never sends one is connected to again."""
import base64
import hashlib
import json
import math
import os
import socket
import struct
import threading
import time
import unittest

from harness import GOLDEN, clothcast
from test_decoder import records


class FakeServer:
    """Accepts WebSocket connections on 127.0.0.1 and lets the test send to the latest."""

    def __init__(self):
        self.listener = socket.socket()
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(4)
        self.url = f"ws://127.0.0.1:{self.listener.getsockname()[1]}/ws"
        self.conn = None
        self.conns = []
        self.connections = 0
        self.ready = threading.Event()
        # (connection number, payload) of every data message the clients sent
        self.received = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn):
        request = b""
        while b"\r\n\r\n" not in request:
            request += conn.recv(4096)
        key = next(line.split(b":", 1)[1].strip() for line in request.split(b"\r\n")
                   if line.lower().startswith(b"sec-websocket-key:"))
        accept = base64.b64encode(hashlib.sha1(key + b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11").digest())
        conn.sendall(b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                     b"Sec-WebSocket-Accept: " + accept + b"\r\n\r\n")
        self.conn = conn
        self.conns.append(conn)
        self.connections += 1
        number = self.connections
        self.ready.set()
        try:
            for opcode, payload in client_frames(conn):
                if opcode in (1, 2):
                    self.received.append((number, payload))
        except OSError:
            pass

    def resyncs(self, avatar, connection):
        """How many `resync` messages naming `avatar` (alone) came on `connection`."""
        name = bytes([0xa0 | len(avatar)]) + avatar.encode()  # a MessagePack fixstr
        return sum(1 for n, p in self.received if n == connection and b"resync" in p and name in p)

    def send(self, payload, text=True, conn=None):
        """One unmasked WebSocket frame (text, or binary) to `conn` (default: the latest
        connection)."""
        if isinstance(payload, str):
            payload = payload.encode()
        head = bytes([0x81 if text else 0x82])
        n = len(payload)
        if n < 126:
            head += bytes([n])
        elif n < 65536:
            head += bytes([126]) + struct.pack(">H", n)
        else:
            head += bytes([127]) + struct.pack(">Q", n)
        (conn or self.conn).sendall(head + payload)

    def close(self):
        for s in self.conns + [self.listener]:
            s.close()


def client_frames(conn):
    """The (opcode, unmasked payload) of each WebSocket frame a client sends on `conn`
    (RFC 6455 §5.2; the client's messages are single frames), until it closes."""
    buf = b""
    while True:
        data = conn.recv(65536)
        if not data:
            return
        buf += data
        while len(buf) >= 2:
            n, at = buf[1] & 0x7F, 2
            if n == 126:
                if len(buf) < 4:
                    break
                n, at = struct.unpack(">H", buf[2:4])[0], 4
            elif n == 127:
                if len(buf) < 10:
                    break
                n, at = struct.unpack(">Q", buf[2:10])[0], 10
            key = buf[at:at + 4] if buf[1] & 0x80 else b"\0\0\0\0"
            at += 4 if buf[1] & 0x80 else 0
            if len(buf) < at + n:
                break
            yield buf[0] & 0x0F, bytes(b ^ key[i % 4] for i, b in enumerate(buf[at:at + n]))
            buf = buf[at + n:]


def asset(hash, setup):
    return json.dumps({"type": "asset", "hash": hash, "garment": "tshirt", "setup": list(setup),
                       "body_positions": [], "body_triangles": [], "body_joints": [], "body_weights": [],
                       "skeleton": [], "parents": []})


def frame(avatar, seq, asset_hash, garment, world=(0, 0, 0, 1, 0, 0, 0)):
    return json.dumps({"type": "frame", "avatar": avatar, "seq": seq, "timestamp": seq / 30,
                       "pose_timestamp": seq / 30, "asset": asset_hash, "world": list(world),
                       "garment": list(garment)})


class HostileServer(unittest.TestCase):
    def test_bad_messages_are_refused_by_name_and_the_streams_go_on(self):
        d = os.path.join(GOLDEN, "v5")
        with open(os.path.join(d, "setup.bin"), "rb") as f:
            setup = f.read()
        recs = records(os.path.join(d, "stream.bin"))
        server = FakeServer()
        v = clothcast.Viewer(server.url)
        try:
            self.assertTrue(server.ready.wait(20), "the viewer connected")
            server.send(json.dumps({"type": "welcome", "version": 1, "tick_hz": 30.0}))
            server.send(asset("a1", setup))
            seq = 0

            def both_frames():
                """Sends frame `seq` of both avatars, waits until both are decoded, and
                returns the ids that `poll` reported updated meanwhile (sorted)."""
                nonlocal seq
                for avatar in ("x", "y"):
                    server.send(frame(avatar, seq, "a1", recs[seq]))
                seq += 1
                deadline = time.time() + 10
                updated = set()
                while time.time() < deadline:
                    if all(a in v.avatars and v.frame(a)["seq"] == seq - 1 for a in ("x", "y")):
                        updated.update(v.poll()[0])
                        return sorted(updated)
                    updated.update(v.poll()[0])
                    time.sleep(0.01)
                self.fail(f"frame {seq - 1} of both avatars did not come (errors: {v.errors()})")

            both_frames()
            self.assertEqual(v.errors(), [])
            self.assertIsNone(v.asset("a1")["body"], "an asset without a usable body")
            bad = [
                (b"\xc1", False, "MessagePack"),
                ("not json", True, "expected"),
                ('{"type": "frame"}', True, "missing field"),
                ('{"type": "launch"}', True, "unknown variant"),
                (frame("x", 99, "nope", recs[1]), True, "frame of x for unknown asset nope"),
                (frame("x", seq, "a1", recs[seq][:41]), True, "truncated"),
                (frame("x", seq, "a1", recs[seq], world=(0, 0, 0, 1, 0, 0)), True, "7"),
                (asset("a2", b"\1\2\3"), True, "truncated"),
                (json.dumps({"type": "error", "code": "rate", "message": "slow down"}), True, "rate: slow down"),
                (b"\x93" + b"\xa5frame" * 2, False, "compact frame: 3 entries"),
            ]
            for payload, text, named in bad:
                server.send(payload, text)
                updated = both_frames()
                errors = v.errors()
                print(f"{payload[:30]!r} refused: {errors[0]}")
                self.assertEqual(len(errors), 1, f"{payload[:40]!r}: {errors}")
                self.assertIn(named, errors[0], f"{payload[:40]!r}")
                self.assertEqual(v.error, errors[0])
            self.assertEqual(v.connections, 1, "one connection all along")
            self.assertTrue(v.connected)
            self.assertEqual(v.avatars, ["x", "y"])
            self.assertEqual(updated, ["x", "y"], "both avatars reported updated")
            self.assertEqual(v.poll(), ([], []), "nothing new since")
            with self.assertRaises(KeyError):
                v.asset("a2")
            out = v.garment("x")
            self.assertTrue(all(math.isfinite(c) for c in out))
            # a refused frame: the viewer asks for a keyframe of x, and x streams on
            # from it (here its stream starts again, from the golden stream's keyframe)
            # (the truncated frame among the bad messages above asked once already)
            asked = server.resyncs("x", 1)
            server.send(frame("x", seq, "a1", recs[seq][:41]))
            deadline = time.time() + 10
            while server.resyncs("x", 1) == asked and time.time() < deadline:
                time.sleep(0.02)
            time.sleep(0.2)
            self.assertEqual(server.resyncs("x", 1), asked + 1, "x's keyframe asked for, once")
            self.assertEqual(server.resyncs("y", 1), 0, "y was in step")
            v.poll()
            self.assertEqual(v.errors(), ["avatar x: frame refused: truncated frame payload"])
            for k in range(3):
                server.send(frame("x", seq + k, "a1", recs[k]))
                server.send(frame("y", seq + k, "a1", recs[seq + k]))
            # (y's last frame is sent after x's: wait for both, not for x alone)
            deadline = time.time() + 10
            while (v.frame("x")["seq"], v.frame("y")["seq"]) != (seq + 2, seq + 2) and time.time() < deadline:
                v.poll()
                time.sleep(0.02)
            self.assertEqual(v.frame("x")["seq"], seq + 2, "x decoded again from the keyframe")
            self.assertEqual(v.frame("y")["seq"], seq + 2)
            seq += 3
            self.assertEqual(v.errors(), [])
            self.assertEqual(v.connections, 1, "still the one connection")
            # a server that does not answer: the viewer asks again each second, and
            # after three seconds of undecodable frames it connects again, which
            # restarts the streams from keyframes
            first = server.conn
            server.send(frame("x", seq, "a1", recs[seq][:41]))
            server.ready.clear()
            deadline = time.time() + 10
            k = seq
            while server.connections < 2 and time.time() < deadline:
                try:
                    server.send(frame("x", seq + 1, "a1", recs[seq + 1]), conn=first)
                    if k < len(recs):
                        server.send(frame("y", k, "a1", recs[k]), conn=first)
                        k += 1
                except OSError:
                    pass  # the viewer dropped this connection
                v.poll()
                time.sleep(0.05)
            self.assertEqual(server.connections, 2, "the viewer connected again")
            self.assertGreaterEqual(server.resyncs("x", 1), 3, "asked again while no keyframe came")
            self.assertEqual(v.frame("x")["seq"], seq - 1, "x stood at its last good frame")
            self.assertGreater(v.frame("y")["seq"], seq, "y streamed on meanwhile")
            self.assertTrue(server.ready.wait(10))
            server.send(json.dumps({"type": "welcome", "version": 1, "tick_hz": 30.0}))
            server.send(asset("a1", setup))
            seq = 0
            both_frames()
            both_frames()
            self.assertEqual(v.connections, 2)
            self.assertIn("truncated", v.errors()[0])
        finally:
            v.close()
            server.close()


if __name__ == "__main__":
    unittest.main()
