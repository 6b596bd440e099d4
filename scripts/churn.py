#!/usr/bin/env python3
"""Churn soak for a running clothcast server: viewers, publishers and hostile clients
connect and leave at random (4 new connections every 0.1 s), for DURATION seconds,
while the server's resident memory is printed every 15 s.

    pip install websockets msgpack        # in a virtual environment
    clothcast serve --open --bind 127.0.0.1:8573 &
    python3 scripts/churn.py ws://127.0.0.1:8573/ws 240 $!

Viewers subscribe to all or three avatars, with or without the body pose, as maps or
compact frames, some to one shard of the avatars and some naming assets they hold
(`have`: the hashes the welcome listed, or made-up ones), some subscribing again
mid-stream; they read a few frames and leave, half of them without a close; publishers drive 1-4 of 1 000 avatar ids for up to 30 poses, with
calibrations and Kinect body frames among them; hostile clients send random bytes,
random messages after hello, a 5 000-name subscription, subscriptions with bad options
(shards that do not exist, a `have` too long or of huge strings, options of the wrong
type), or never say hello. Afterwards
read the server's /metrics (tick panics, frame errors) and its log.
"""
import asyncio, json, os, random, sys, time

import msgpack
import websockets

URL = sys.argv[1]; DUR = float(sys.argv[2]); PID = int(sys.argv[3])
def rss():
    return int(open(f"/proc/{PID}/status").read().split("VmRSS:")[1].split()[0])
stats = {"viewer": 0, "pub": 0, "hostile": 0, "err": 0}
def subscription(assets):
    """A random subscription with the options a viewer may give."""
    m = {"type": "subscribe"}
    if random.random() < 0.5:
        m["avatars"] = [f"p{random.randrange(50)}" for _ in range(3)]
    if random.random() < 0.5:
        m["compact"] = True
    if random.random() < 0.5:
        m["pose"] = False
    if random.random() < 0.3:
        n = random.randrange(1, 5)
        m["shard"] = [random.randrange(n), n]
    if random.random() < 0.3:
        m["have"] = assets[:random.randrange(len(assets) + 1)] + ["%024x" % random.getrandbits(96)]
    return m
async def viewer():
    async with websockets.connect(URL, max_size=None) as ws:
        await ws.send(json.dumps({"type": "hello", "version": 1, "role": "viewer"}))
        w = await ws.recv()  # in the hello's encoding: JSON here
        welcome = json.loads(w) if isinstance(w, str) else msgpack.unpackb(w)
        assets = welcome.get("assets") or []
        await ws.send(json.dumps(subscription(assets)))
        for i in range(random.randrange(1, 40)):
            try: await asyncio.wait_for(ws.recv(), 0.2)
            except asyncio.TimeoutError: break
            if random.random() < 0.03:
                await ws.send(json.dumps(subscription(assets)))
        if random.random() < 0.5:
            ws.transport.abort()  # vanish without a close
    stats["viewer"] += 1
async def pub():
    async with websockets.connect(URL) as ws:
        await ws.send(msgpack.packb({"type": "hello", "version": 1, "role": "publisher"}))
        await ws.recv()
        ids = [f"p{random.randrange(1000)}" for _ in range(random.randrange(1, 5))]
        for i in range(random.randrange(1, 30)):
            for a in ids:
                ang = random.uniform(-1, 1)
                await ws.send(msgpack.packb({"type": "pose", "avatar": a, "profile": "canonical", "timestamp": time.time(),
                    "root": [0.0, 0.0, 0.0], "joints": [{"name": "left_shoulder", "rotation": [0.0, 0.0, ang*0.4, (1-(ang*0.4)**2)**0.5]}]}))
            if random.random() < 0.1:
                await ws.send(msgpack.packb({"type": "calibrate", "avatar": random.choice(ids + ["nobody"+str(random.randrange(10**6))])}))
            if random.random() < 0.1:
                await ws.send(json.dumps({"bodies": [{"trackingId": random.randrange(10**12), "joints": []}]}))
            await asyncio.sleep(1/30)
        if random.random() < 0.5:
            ws.transport.abort()
    stats["pub"] += 1
async def hostile():
    kind = random.randrange(5)
    async with websockets.connect(URL, max_size=None) as ws:
        if kind == 0:
            await ws.send(os.urandom(random.randrange(1, 5000)))
        elif kind == 1:
            await ws.send(msgpack.packb({"type": "hello", "version": 1, "role": "publisher"}))
            await ws.recv()
            for _ in range(20):
                await ws.send(os.urandom(random.randrange(1, 300)))
        elif kind == 2:
            await ws.send("{\"type\": \"hello\", \"version\": 1, \"role\": \"viewer\"}")
            await ws.send("{\"type\": \"subscribe\", \"avatars\": [" + ",".join('"x%d"' % i for i in range(5000)) + "]}")
        elif kind == 3:
            await ws.send(msgpack.packb({"type": "hello", "version": 1, "role": "viewer"}))
            bad = random.choice([{"shard": [5, 2]}, {"shard": [0, 0]}, {"shard": [0, 10**6]}, {"shard": [-1, 2]},
                {"shard": "half"}, {"have": ["%024x" % i for i in range(1000)]}, {"have": ["x" * 100000]},
                {"have": [1, 2]}, {"compact": "yes"}, {"pose": 3}, {"shard": [0, 2, 3]}])
            await ws.send(msgpack.packb({"type": "subscribe", **bad}))
        else:
            await asyncio.sleep(0.3)  # never says hello
        try:
            while True: await asyncio.wait_for(ws.recv(), 1)
        except Exception: pass
    stats["hostile"] += 1
async def run(f):
    try: await f()
    except Exception as e:
        stats["err"] += 1
async def main():
    t0 = time.time(); last = 0; tasks = set()
    while time.time() - t0 < DUR:
        for _ in range(4):
            t = asyncio.create_task(run(random.choice([viewer, viewer, pub, pub, hostile])))
            tasks.add(t); t.add_done_callback(tasks.discard)
        await asyncio.sleep(0.1)
        if time.time() - last > 15:
            last = time.time(); print(f"t={time.time()-t0:.0f} rss={rss()} open={len(tasks)} {stats}", flush=True)
    await asyncio.gather(*tasks, return_exceptions=True)
    await asyncio.sleep(2)
    print(f"end rss={rss()} {stats}", flush=True)
asyncio.run(main())
