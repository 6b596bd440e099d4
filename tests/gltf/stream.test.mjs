// End to end in a real browser: `clothcast serve` with a database, `clothcast play`
// publishing a CMU clip on two avatars, and the built-in viewer page in headless
// Chromium (WebGL2 through SwiftShader). The garment vertices change between frames,
// the canvas is not blank, and the overlay's numbers are live.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { join, dirname, normalize, extname } from 'node:path';
import { createServer } from 'node:http';
import { createHash } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { writeFileSync, mkdtempSync, existsSync, readFileSync, statSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { chromium } from 'playwright-core';
import { pngPixels } from './png.mjs';

const root = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
const bin = process.env.CLOTHCAST_BIN ?? join(root, 'target', 'debug', 'clothcast');
const shot = process.env.CLOTHCAST_SCREENSHOT ?? join(mkdtempSync(join(tmpdir(), 'clothcast-view-')), 'viewer.png');

/** A static file server for a folder (the three.js example and its node_modules). */
function serveDir(dir) {
  const types = { '.html': 'text/html', '.md': 'text/plain', '.js': 'text/javascript', '.mjs': 'text/javascript', '.json': 'application/json' };
  const server = createServer((req, res) => {
    const path = normalize(decodeURIComponent(new URL(req.url, 'http://x').pathname));
    const file = join(dir, path);
    if (!file.startsWith(dir) || !existsSync(file) || !statSync(file).isFile()) { res.writeHead(404); res.end(); return; }
    res.writeHead(200, { 'content-type': types[extname(file)] ?? 'application/octet-stream' });
    res.end(readFileSync(file));
  });
  return new Promise((ok) => server.listen(0, '127.0.0.1', () => ok(server)));
}

function startServer(bind = '127.0.0.1:0', more = []) {
  const srv = spawn(bin, ['serve', '--db', join(root, 'tests/fixtures/db/v1/small.ccdb'), ...more, '--open', '--bind', bind], { stdio: ['ignore', 'pipe', 'inherit'] });
  return new Promise((ok, fail) => {
    let out = '';
    srv.stdout.on('data', (d) => {
      out += d;
      const m = out.match(/ws:\/\/([0-9.:]+)\/ws/);
      if (m) ok({ srv, addr: m[1] });
    });
    srv.on('exit', (c) => fail(new Error(`server exited ${c}`)));
  });
}

/** Headless Chromium with WebGL2 through SwiftShader. */
function launchBrowser() {
  return chromium.launch({
    executablePath: process.env.CHROMIUM ?? '/usr/bin/chromium',
    args: ['--no-sandbox', '--disable-gpu', '--use-angle=swiftshader', '--enable-unsafe-swiftshader', '--disable-background-networking', '--disable-component-update', '--disable-sync', '--no-first-run'],
  });
}

/** `clothcast play` of CMU 131_03 on `avatars` avatars for a minute, against the server at `addr`. */
function playClip(addr, avatars) {
  return spawn(bin, ['play', join(root, 'tests/fixtures/mocap/cmu_131_03.bvh'), '--url', `ws://${addr}/ws`, '--avatars', String(avatars), '--seconds', '60'], { stdio: 'ignore' });
}

/** A new page of `browser` and the script errors it raises. */
async function pageWithErrors(browser, viewport) {
  const page = await browser.newPage({ viewport });
  const errors = [];
  page.on('pageerror', (e) => errors.push(String(e)));
  return { page, errors };
}

/** `clothcast wear AVATAR GARMENT...` against the server at `addr`. */
function wear(addr, avatar, garments) {
  return new Promise((ok, fail) => {
    const p = spawn(bin, ['wear', avatar, ...garments, '--url', `ws://${addr}/ws`], { stdio: 'ignore' });
    p.on('exit', (c) => (c === 0 ? ok() : fail(new Error(`clothcast wear exited ${c}`))));
  });
}

test('the viewer page shows streamed avatars with live garments', { timeout: 120000 }, async () => {
  // two garments served: performer-0 is dressed in the pants with the shirt over them
  const { srv, addr } = await startServer('127.0.0.1:0', ['--db', join(root, 'tests/fixtures/db/v1/small-pants.ccdb')]);
  const play = playClip(addr, 2);
  const browser = await launchBrowser();
  try {
    const { page, errors } = await pageWithErrors(browser, { width: 800, height: 600 });
    // the browser's own complaints too (a missing file, a WebGL error)
    page.on('console', (m) => { if (m.type() === 'error') errors.push(m.text() + ' ' + m.location().url); });
    await page.goto(`http://${addr}/`);
    await page.waitForFunction(() => window.__clothcast?.avatars?.length === 2 && window.__clothcast.avatars.every((a) => a.frames > 10), null, { timeout: 60000 });
    await wear(addr, 'performer-0', ['pants', 'tshirt']);
    await page.waitForFunction(() => window.__clothcast.avatars.find((a) => a.id === 'performer-0')?.layers.length === 1
      && window.__clothcast.avatars.every((a) => a.frames > 10), null, { timeout: 60000 });
    const a = await page.evaluate(() => window.__clothcast);
    // a snapshot ten frames on (the page refreshes it once a second at most)
    await page.waitForFunction((before) => window.__clothcast.avatars.every((x) => x.frames > (before.find((y) => y.id === x.id)?.frames ?? Infinity) + 10), a.avatars, { timeout: 60000 });
    const b = await page.evaluate(() => window.__clothcast);
    assert.deepEqual(errors, []);
    for (const av of b.avatars) {
      const before = a.avatars.find((x) => x.id === av.id);
      assert.ok(av.frames > before.frames, `${av.id}: no new frames`);
      assert.notDeepEqual(av.sample, before.sample, `${av.id}: garment vertices did not change`);
      assert.ok(av.sample.every(Number.isFinite));
      for (const [i, l] of av.layers.entries()) {
        assert.notDeepEqual(l.sample, before.layers[i].sample, `${av.id}: ${l.garment} did not move`);
        assert.ok(l.sample.every(Number.isFinite));
      }
    }
    assert.deepEqual(b.avatars.find((x) => x.id === 'performer-0').layers.map((l) => l.garment), ['tshirt']);
    assert.deepEqual(b.avatars.find((x) => x.id === 'performer-1').layers, []);
    assert.ok(b.kbps > 0 && b.fps > 0, `overlay not live: ${JSON.stringify({ fps: b.fps, kbps: b.kbps })}`);
    // the stream is decoded in a worker: the worker is busy, the page's thread hardly
    assert.equal(b.decode, 'worker');
    assert.ok(b.busy > 0, `the worker decoded nothing: ${b.busy}`);
    const overlay = await page.locator('#overlay').innerText();
    assert.match(overlay, /performer-0/);
    assert.match(overlay, /kbit\/s/);
    assert.match(overlay, /decoding [0-9.]+ % of a worker/);
    const png = await page.screenshot({ path: shot });
    const { w, h, bpp, px } = pngPixels(png);
    // not blank: many pixels differ from the background, in many colours
    let lit = 0;
    const colours = new Set();
    for (let i = 0; i < w * h; i++) {
      const r = px[i * bpp], g = px[i * bpp + 1], bl = px[i * bpp + 2];
      if (Math.abs(r - 29) + Math.abs(g - 33) + Math.abs(bl - 38) > 30) lit++;
      colours.add((r >> 3) << 10 | (g >> 3) << 5 | (bl >> 3));
    }
    writeFileSync(shot.replace(/\.png$/, '.json'), JSON.stringify({ lit: lit / (w * h), colours: colours.size, overlay }, null, 1));
    assert.ok(lit > 0.02 * w * h, `only ${lit} lit pixels`);
    assert.ok(colours.size > 50, `only ${colours.size} colours`);
    // ?decode=page: the same page decoding on its own thread
    await page.goto(`http://${addr}/?decode=page`);
    await page.waitForFunction(() => window.__clothcast?.avatars?.length === 2 && window.__clothcast.avatars.every((a) => a.frames > 10) && window.__clothcast.busy > 0, null, { timeout: 60000 });
    const c = await page.evaluate(() => window.__clothcast);
    // (the page refreshes window.__clothcast once a second at most, later when it draws
    // slowly: wait for a snapshot ten frames on)
    await page.waitForFunction((before) => window.__clothcast.avatars.every((a) => a.frames > (before.find((x) => x.id === a.id)?.frames ?? Infinity) + 10), c.avatars, { timeout: 60000 });
    const d = await page.evaluate(() => window.__clothcast);
    assert.equal(d.decode, 'page');
    for (const av of d.avatars) assert.notDeepEqual(av.sample, c.avatars.find((x) => x.id === av.id).sample, `${av.id}: no live garment decoding on the page`);
    // the figures of both ways, for the record (two avatars, one in two garments)
    console.log(`decoding in a worker: ${(100 * b.busy).toFixed(1)} % of the worker, ${(100 * b.page).toFixed(2)} % of the page's thread; on the page: ${(100 * d.busy).toFixed(1)} % of the page's thread`);
    assert.deepEqual(errors, []);
    // mirror mode: one avatar, no UI chrome
    await page.goto(`http://${addr}/?mirror=1&avatar=performer-1`);
    await page.waitForFunction(() => window.__clothcast?.avatars?.length === 1 && window.__clothcast.avatars[0].frames > 5, null, { timeout: 60000 });
    assert.equal(await page.locator('#overlay').isVisible(), false);
    assert.equal((await page.evaluate(() => window.__clothcast)).avatars[0].id, 'performer-1');
    // the three.js integration example, served from clients/web with its own npm install
    const web = await serveDir(join(root, 'clients/web'));
    try {
      await page.goto(`http://127.0.0.1:${web.address().port}/examples/threejs/index.html?url=ws://${addr}/ws`);
      // three garments: performer-0's pants and shirt, performer-1's shirt; two bodies
      await page.waitForFunction(() => window.__example?.avatars === 2 && window.__example.bodies === 2 && window.__example.meshes === 3 && window.__example.frames > 5, null, { timeout: 60000 });
      const ex = pngPixels(await page.screenshot({ path: shot.replace(/\.png$/, '-threejs.png') }));
      let [blue, skin] = [0, 0];
      for (let i = 0; i < ex.w * ex.h; i++) {
        const [r, g, b] = [ex.px[i * ex.bpp], ex.px[i * ex.bpp + 1], ex.px[i * ex.bpp + 2]];
        if (b > r + 40) blue++;
        // the body's skin: warm, brighter than the grey grid and background
        if (r > b + 30 && r > g && r > 90) skin++;
      }
      assert.ok(blue > 500, `the three.js example shows no garment (${blue} blue pixels)`);
      assert.ok(skin > 500, `the three.js example shows no body (${skin} skin pixels)`);
      assert.deepEqual(errors, []);
    } finally {
      web.close();
    }
    // passed: the screenshots in a folder of our own go (a failure keeps them)
    if (!process.env.CLOTHCAST_SCREENSHOT) rmSync(dirname(shot), { recursive: true, force: true });
  } finally {
    await browser.close();
    play.kill();
    srv.kill();
  }
});

test('the client poses the body from the codec frames as from the body pose', { timeout: 120000 }, async () => {
  const { srv, addr } = await startServer();
  const play = playClip(addr, 1);
  const browser = await launchBrowser();
  try {
    const { page, errors } = await pageWithErrors(browser, { width: 400, height: 300 });
    await page.goto(`http://${addr}/`);
    // two clients of the page's own module: one asks for the body pose too
    const r = await page.evaluate(async (url) => {
      const { ClothcastClient, boneMatrices, skinningMatrices } = await import('/clothcast.js');
      const run = (options) => new Promise((ok) => {
        const c = new ClothcastClient(url, options);
        const gaps = [];
        c.addEventListener('frame', (e) => {
          const av = e.detail;
          if (options.pose) {
            // each bone's world matrix both ways, applied to its rest joint and half a
            // metre out from it along each axis
            const s = av.asset.skeleton, n = av.asset.parents.length;
            const a = skinningMatrices(av.pose, s, av.asset.parents, new Float32Array(16 * n));
            const b = boneMatrices(av.bones, av.world, new Float32Array(16 * n));
            let worst = 0;
            for (let j = 0; j < n; j++) {
              for (const d of [[0, 0, 0], [0.5, 0, 0], [0, 0.5, 0], [0, 0, 0.5]]) {
                const p = [0, 1, 2].map((k) => s[3 * j + k] + d[k]);
                const at = (m) => [0, 1, 2].map((k) => m[16 * j + k] * p[0] + m[16 * j + 4 + k] * p[1] + m[16 * j + 8 + k] * p[2] + m[16 * j + 12 + k]);
                const [x, y] = [at(a), at(b)];
                worst = Math.max(worst, Math.hypot(x[0] - y[0], x[1] - y[1], x[2] - y[2]));
              }
            }
            gaps.push(worst);
          }
          if (av.frames >= 30) {
            c.close();
            ok({ gaps, pose: Array.from(av.pose), travelled: Math.hypot(av.world[4], av.world[6]) });
          }
        });
        c.connect();
      });
      return { posed: await run({ pose: true }), lean: await run({}) };
    }, `ws://${addr}/ws`);
    assert.deepEqual(errors, []);
    assert.ok(r.posed.gaps.length >= 30, `${r.posed.gaps.length} frames compared`);
    const worst = Math.max(...r.posed.gaps);
    assert.ok(worst < 2e-3, `the bones pose the body ${worst} m away from the pose`);
    // the frames carried the pose to the one client and not to the other
    assert.ok(r.posed.pose.some((x) => x !== 0), 'the client that asked got the pose');
    assert.ok(r.lean.pose.every((x) => x === 0), 'the client that did not ask got no pose');
  } finally {
    await browser.close();
    play.kill();
    srv.kill();
  }
});

test('the worker client decodes the same garments (and normals) as the page client, frame by frame', { timeout: 120000 }, async () => {
  const { srv, addr } = await startServer();
  const play = playClip(addr, 1);
  const browser = await launchBrowser();
  try {
    const { page, errors } = await pageWithErrors(browser, { width: 400, height: 300 });
    await page.goto(`http://${addr}/?decode=page`);
    const r = await page.evaluate(async (url) => {
      const { ClothcastClient, vertexNormals } = await import('/clothcast.js');
      const { ClothcastWorkerClient } = await import('/worker-client.js');
      // each client's garment, bones and world by frame number; the normals the worker
      // computed, and those computed here from the page's garment. The three run side by
      // side until each has 40 frames and the worker clients have 30 frames in common with
      // the page client (on a loaded machine one may start several frames after another),
      // or until one has 200; then all stop at once.
      const clients = [];
      let stop;
      const stopped = new Promise((ok) => { stop = ok; });
      const common = (a, b) => a.seen.size && [...a.seen.keys()].filter((seq) => b.seen.has(seq)).length;
      const check = () => {
        const [page, worker, recycled] = clients;
        if (clients.length === 3 && ((clients.every((c) => c.seen.size >= 40) && common(page, worker) >= 30 && common(page, recycled) >= 30)
          || clients.some((c) => c.seen.size >= 200))) stop();
      };
      const run = (Client, more = {}) => {
        const c = new Client(url, { normals: true, ...more });
        const mine = { client: c, seen: new Map(), first: null, madeAt: [] };
        clients.push(mine);
        c.addEventListener('frame', (e) => {
          const av = e.detail;
          mine.first ??= av.garment;
          const normals = av.normals ?? vertexNormals(av.garment, av.asset.setup.triangles, new Float32Array(av.garment.length));
          // (copies: the page client decodes into the same arrays every frame)
          mine.seen.set(av.seq, { garment: Array.from(av.garment), normals: Array.from(normals), fromWorker: !!av.normals, bones: Array.from(av.bones), world: Array.from(av.world), vertices: av.asset.setup.vertexCount });
          mine.madeAt.push(c.arraysMade ?? null);
          check();
        });
        c.connect();
        return mine;
      };
      // the worker client as it comes, and handing each frame's arrays back (recycle)
      const [page, worker, recycled] = [run(ClothcastClient), run(ClothcastWorkerClient), run(ClothcastWorkerClient, { recycle: true })];
      await stopped;
      for (const { client } of clients) client.close();
      const compare = (other) => {
        let same = 0;
        const differ = [];
        for (const [seq, f] of page.seen) {
          const g = other.seen.get(seq);
          if (!g) continue;
          const equal = f.garment.length === g.garment.length && f.garment.every((x, i) => x === g.garment[i])
            && f.normals.every((x, i) => x === g.normals[i])
            && f.bones.every((x, i) => x === g.bones[i]) && f.world.every((x, i) => x === g.world[i]);
          if (equal) same++; else differ.push(seq);
        }
        return { same, differ };
      };
      const { same, differ } = compare(worker);
      const w0 = worker.seen.values().next().value;
      return { same, differ, recycledVsPage: compare(recycled), frames: clients.map((c) => c.seen.size),
        made: [worker.client.arraysMade, recycled.client.arraysMade], recycledMadeAt: recycled.madeAt,
        firstLength: [worker.first.length, recycled.first.length],
        vertices: page.seen.values().next().value.vertices, lengths: [page.seen.values().next().value.garment.length, w0.garment.length],
        workerNormals: [...worker.seen.values()].every((f) => f.fromWorker) && ![...page.seen.values()].some((f) => f.fromWorker),
        normalsLit: w0.normals.some((x) => x !== 0) && w0.normals.every(Number.isFinite), workerPageMs: worker.client.pageMs, workerBusyMs: worker.client.busyMs };
    }, `ws://${addr}/ws`);
    assert.deepEqual(errors, []);
    assert.deepEqual(r.differ, [], `frames decoded differently: ${r.differ}`);
    // handing the arrays back changes nothing decoded, and stops the worker making new
    // ones. As it comes: 5 a frame (garment, normals, bones, pose, world). Recycled: the
    // sets out of the pool are the frame the page holds and those on their way to it
    // (at most two: decode-relay.js's IN_FLIGHT_MAX), so three sets make a whole stream,
    // however the page keeps pace
    assert.deepEqual(r.recycledVsPage.differ, [], `recycled frames decoded differently: ${r.recycledVsPage.differ}`);
    assert.ok(r.recycledVsPage.same >= 30, `only ${r.recycledVsPage.same} recycled frames in common (frames: ${r.frames})`);
    assert.ok(r.made[0] >= 5 * r.frames[1], `the worker made only ${r.made[0]} arrays in ${r.frames[1]} frames without recycling`);
    assert.ok(r.made[1] > 0 && r.made[1] <= 15, `the recycling worker made ${r.made[1]} arrays in ${r.recycledMadeAt.length} frames (made by frame: ${r.recycledMadeAt})`);
    assert.deepEqual(r.firstLength, [3 * r.vertices, 0], 'the first frame\'s garment: kept as it came, handed back when recycling');
    // where no module worker can start, the worker client decodes on the page instead
    const fallback = await page.evaluate(async (url) => {
      const { ClothcastWorkerClient } = await import('/worker-client.js');
      const real = window.Worker;
      const run = (options = {}) => new Promise((ok, fail) => {
        const c = new ClothcastWorkerClient(url, options);
        c.addEventListener('error', (e) => fail(e.detail));
        c.addEventListener('frame', (e) => {
          if (e.detail.frames >= 10) { c.close(); ok({ inWorker: c.inWorker, finite: Array.from(e.detail.garment).every(Number.isFinite), busyMs: c.busyMs }); }
        });
        c.connect();
      });
      try {
        // a browser without workers at all, and one whose worker fails to load
        window.Worker = undefined;
        const none = await run();
        window.Worker = class extends real { constructor(_, o) { super('data:text/javascript,import "./nowhere.js";', o); } };
        const broken = await run();
        // two workers that both fail: one fallback, and no error from the second
        const brokenTwo = await run({ workers: 2 });
        return { none, broken, brokenTwo };
      } finally {
        window.Worker = real;
      }
    }, `ws://${addr}/ws`);
    for (const [how, f] of Object.entries(fallback)) {
      assert.equal(f.inWorker, false, `${how}: still in a worker`);
      assert.ok(f.finite && f.busyMs > 0, `${how}: ${JSON.stringify(f)}`);
    }
    assert.ok(r.same >= 30, `only ${r.same} frames in common (frames: ${r.frames})`);
    assert.deepEqual(r.lengths, [3 * r.vertices, 3 * r.vertices]);
    assert.ok(r.workerNormals, 'the worker client carried normals and the page client none');
    assert.ok(r.normalsLit, 'the normals are zero or not finite');
    assert.ok(r.workerBusyMs > 0, 'the worker reported no decoding time');
  } finally {
    await browser.close();
    play.kill();
    srv.kill();
  }
});

test('a worker client whose page falls behind gets each avatar\'s latest frame, not a backlog', { timeout: 120000 }, async () => {
  const { srv, addr } = await startServer();
  const play = playClip(addr, 2);
  const browser = await launchBrowser();
  try {
    const { page, errors } = await pageWithErrors(browser, { width: 400, height: 300 });
    await page.goto(`http://${addr}/?decode=page`);
    const r = await page.evaluate(async (url) => {
      const { ClothcastWorkerClient } = await import('/worker-client.js');
      // two avatars streaming; once each has 10 frames this thread stalls for 1.5 s (45
      // ticks) in a frame handler, then takes frames in until each has 15 more
      const c = new ClothcastWorkerClient(url, { recycle: true });
      const events = [];
      let stallEnd = null;
      await new Promise((ok) => {
        c.addEventListener('frame', (e) => {
          const av = e.detail;
          events.push({ t: performance.now(), id: av.id, seq: av.seq, skipped: av.skipped });
          const count = (after) => {
            const per = new Map();
            for (const ev of events) if (after === null || ev.t > after) per.set(ev.id, (per.get(ev.id) ?? 0) + 1);
            return per.size === 2 ? Math.min(...per.values()) : 0;
          };
          if (stallEnd === null && count(null) >= 10) {
            const until = performance.now() + 1500;
            while (performance.now() < until) { /* the page's thread busy */ }
            stallEnd = performance.now();
          } else if (stallEnd !== null && count(stallEnd) >= 15) {
            c.close();
            ok();
          }
        });
        c.connect();
      });
      return { events, stallEnd, made: c.arraysMade, inWorker: c.inWorker };
    }, `ws://${addr}/ws`);
    assert.deepEqual(errors, []);
    assert.equal(r.inWorker, true);
    const ids = [...new Set(r.events.map((e) => e.id))];
    assert.equal(ids.length, 2);
    for (const id of ids) {
      const mine = r.events.filter((e) => e.id === id);
      const after = mine.filter((e) => e.t > r.stallEnd);
      // right after the stall: the (at most two) frames that were on their way, the one
      // that waited, and perhaps a tick's new frame; not the ~45 decoded meanwhile
      const burst = after.filter((e) => e.t - r.stallEnd < 30);
      assert.ok(burst.length <= 5, `${id}: ${burst.length} frames in the 30 ms after the stall: ${JSON.stringify(burst)}`);
      const last = after.at(-1);
      assert.ok(last.skipped >= 20, `${id}: only ${last.skipped} frames skipped over a 1.5 s stall`);
      // newer frames only, each passed on or counted as skipped
      for (let i = 1; i < mine.length; i++) assert.ok(mine[i].seq > mine[i - 1].seq, `${id}: frame ${mine[i].seq} after ${mine[i - 1].seq}`);
      const jump = after[0].seq - mine.filter((e) => e.t <= r.stallEnd).at(-1).seq;
      assert.ok(after.length >= 15 && jump <= 3, `${id}: the first frame after the stall is ${jump} frames on (${after.length} after)`);
      const late = after.filter((e) => e.t - r.stallEnd >= 30);
      assert.ok(late.some((e) => e.seq - after[0].seq >= 30), `${id}: no frame from after the stall`);
    }
    // three sets of 5 arrays per avatar, stall or not
    assert.ok(r.made > 0 && r.made <= 2 * 15, `the recycling worker made ${r.made} arrays for 2 avatars`);
  } finally {
    await browser.close();
    play.kill();
    srv.kill();
  }
});

test('a worker client on two workers splits the avatars between them and decodes them as the page client does', { timeout: 120000 }, async () => {
  const { srv, addr } = await startServer();
  // performer-0, -2, -3 fall in shard 0 of 2, performer-1 in shard 1 (the server's shard_of)
  const play = playClip(addr, 4);
  const browser = await launchBrowser();
  try {
    const { page, errors } = await pageWithErrors(browser, { width: 400, height: 300 });
    await page.goto(`http://${addr}/?workers=2`);
    // the viewer page on two workers: every avatar streams, through two connections
    await page.waitForFunction(() => window.__clothcast?.workers === 2 && window.__clothcast.avatars.length === 4 && window.__clothcast.avatars.every((a) => a.frames > 5), null, { timeout: 60000 });
    const viewer = await page.evaluate(() => ({ connections: window.__clothcast.connections, text: document.getElementById('overlay').textContent }));
    assert.equal(viewer.connections, 2);
    assert.match(viewer.text, /in 2 workers/);
    const r = await page.evaluate(async (url) => {
      const { ClothcastClient } = await import('/clothcast.js');
      const { ClothcastWorkerClient } = await import('/worker-client.js');
      // each client's garments by avatar and frame number, side by side until each has 12
      // frames of each of the 4 avatars and the two have 30 frames in common (the worker
      // client's second worker starts once the first has the assets, so it may begin
      // several frames later on a loaded machine), or until one has 400; then both stop
      const clients = [];
      let stop;
      const stopped = new Promise((ok) => { stop = ok; });
      const check = () => {
        const enough = (c) => {
          const per = new Map();
          for (const k of c.seen.keys()) per.set(k.split('#')[0], (per.get(k.split('#')[0]) ?? 0) + 1);
          return per.size === 4 && [...per.values()].every((n) => n >= 12);
        };
        const [a, b] = clients;
        if (clients.length === 2 && ((enough(a) && enough(b) && [...a.seen.keys()].filter((k) => b.seen.has(k)).length >= 30)
          || clients.some((c) => c.seen.size >= 400))) stop();
      };
      const run = (Client, options) => {
        const c = new Client(url, options);
        const mine = { client: c, seen: new Map() };
        clients.push(mine);
        c.addEventListener('frame', (e) => {
          const av = e.detail;
          mine.seen.set(`${av.id}#${av.seq}`, Array.from(av.garment).concat(Array.from(av.bones), Array.from(av.world)));
          check();
        });
        c.connect();
        return mine;
      };
      const [here, there] = [run(ClothcastClient, {}), run(ClothcastWorkerClient, { workers: 2 })];
      await stopped;
      here.client.close();
      there.client.close();
      Object.assign(there, { slots: there.client.slots.map((s) => ({ connections: s.connections, busyMs: s.busyMs, assets: s.assets })), inWorker: there.client.inWorker, assets: there.client.assets.size });
      let same = 0;
      const differ = [];
      for (const [k, f] of here.seen) {
        const g = there.seen.get(k);
        if (!g) continue;
        if (f.length === g.length && f.every((x, i) => x === g[i])) same++; else differ.push(k);
      }
      return { same, differ, slots: there.slots, inWorker: there.inWorker, assets: there.assets, frames: [here.seen.size, there.seen.size] };
    }, `ws://${addr}/ws`);
    assert.deepEqual(errors, []);
    assert.deepEqual(r.differ, [], `frames decoded differently: ${r.differ}`);
    assert.ok(r.same >= 30, `only ${r.same} frames in common (frames: ${r.frames})`);
    assert.equal(r.inWorker, true);
    assert.equal(r.slots.length, 2);
    for (const [i, s] of r.slots.entries()) assert.ok(s.connections === 1 && s.busyMs > 0, `worker ${i}: ${JSON.stringify(s)}`);
    // the garments' assets came once, on the first worker's connection: the second was
    // handed them and said so (`have`)
    assert.ok(r.assets >= 1 && r.slots[0].assets === r.assets && r.slots[1].assets === 0, `assets: ${JSON.stringify(r)}`);
  } finally {
    await browser.close();
    play.kill();
    srv.kill();
  }
});

test('the viewer page reconnects by itself when the server restarts', { timeout: 120000 }, async () => {
  let { srv, addr } = await startServer();
  const publish = () => playClip(addr, 1);
  let play = publish();
  const browser = await launchBrowser();
  try {
    const { page, errors } = await pageWithErrors(browser, { width: 400, height: 300 });
    await page.goto(`http://${addr}/`);
    await page.waitForFunction(() => window.__clothcast?.avatars?.length === 1 && window.__clothcast.avatars[0].frames > 5, null, { timeout: 60000 });
    // the server goes away: the page drops the avatar and says it is retrying
    const stopped = new Promise((ok) => srv.once('exit', ok));
    play.kill();
    srv.kill('SIGINT');
    await stopped;
    await page.waitForFunction(() => window.__clothcast?.avatars?.length === 0 && /retrying/.test(window.__clothcast.link), null, { timeout: 20000 });
    // back on the same address: the same page streams again, from a keyframe
    ({ srv } = await startServer(addr));
    play = publish();
    await page.waitForFunction(() => window.__clothcast?.connections >= 2 && window.__clothcast.link === 'connected'
      && window.__clothcast.avatars.length === 1 && window.__clothcast.avatars[0].frames > 5, null, { timeout: 60000 });
    const after = await page.evaluate(() => window.__clothcast);
    assert.ok(after.avatars[0].sample.every(Number.isFinite));
    assert.match(await page.locator('#overlay').innerText(), /connected/);
    assert.deepEqual(errors, []);
  } finally {
    await browser.close();
    play.kill();
    srv.kill();
  }
});

/**
 * A WebSocket "server" that welcomes and then says nothing more, nor answers anything:
 * a host that vanished without closing. Collects the client's text messages.
 */
function silentServer() {
  const received = [];
  const server = createServer();
  server.on('upgrade', (req, sock) => {
    const accept = createHash('sha1').update(req.headers['sec-websocket-key'] + '258EAFA5-E914-47DA-95CA-C5AB0DC85B11').digest('base64');
    sock.write(`HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: ${accept}\r\n\r\n`);
    const welcome = Buffer.from('{"type":"welcome","version":1,"tick_hz":30}');
    sock.write(Buffer.concat([Buffer.from([0x81, welcome.length]), welcome]));
    // the client's frames: small and masked (RFC 6455 §5.2); text ones recorded
    let buf = Buffer.alloc(0);
    sock.on('data', (d) => {
      buf = Buffer.concat([buf, d]);
      while (buf.length >= 6 && (buf[1] & 0x7f) < 126 && buf.length >= 6 + (buf[1] & 0x7f)) {
        const len = buf[1] & 0x7f, mask = buf.subarray(2, 6);
        const payload = Buffer.from(buf.subarray(6, 6 + len).map((b, i) => b ^ mask[i % 4]));
        if ((buf[0] & 0x0f) === 1) received.push(payload.toString());
        buf = buf.subarray(6 + len);
      }
    });
    sock.on('error', () => {});
  });
  return new Promise((ok) => server.listen(0, '127.0.0.1', () => ok({ server, received })));
}

/** In `page`, a ClothcastClient on `url` with short watchdog times, watched for `ms`. */
function watchClient(page, url, ms) {
  return page.evaluate(async ([url, ms]) => {
    const { ClothcastClient } = await import('/clothcast.js');
    const events = [];
    const c = new ClothcastClient(url, { pingAfterMs: 200, deadAfterMs: 1500 });
    c.addEventListener('welcome', () => events.push({ type: 'welcome' }));
    c.addEventListener('close', (e) => events.push({ type: 'close', ...e.detail }));
    c.connect();
    const t0 = performance.now();
    await new Promise((ok) => { const i = setInterval(() => { if (events.some((e) => e.type === 'close') || performance.now() - t0 > ms) { clearInterval(i); ok(); } }, 20); });
    const waited = performance.now() - t0;
    c.close();
    return { events, waited };
  }, [url, ms]);
}

test('the client drops a link gone silent and keeps one that answers its pings', { timeout: 120000 }, async () => {
  const { server: fake, received } = await silentServer();
  const { srv, addr } = await startServer();
  const web = await serveDir(join(root, 'clients/web'));
  const browser = await launchBrowser();
  try {
    const page = await browser.newPage();
    // a page of the same origin as the module (any file of the folder will do)
    await page.goto(`http://127.0.0.1:${web.address().port}/README.md`);
    const silent = await watchClient(page, `ws://127.0.0.1:${fake.address().port}/ws`, 10000);
    assert.equal(silent.events[0]?.type, 'welcome', JSON.stringify(silent));
    const closed = silent.events.find((e) => e.type === 'close');
    assert.ok(closed, `the silent server was not noticed in ${silent.waited} ms`);
    assert.equal(closed.code, 1006);
    assert.match(closed.reason, /no word from the server/);
    assert.ok(closed.retryMs > 0, 'it would reconnect');
    assert.ok(silent.waited >= 1400, `gave up after ${silent.waited} ms`);
    assert.ok(received.includes('{"type":"ping"}'), `no ping among ${JSON.stringify(received)}`);
    // the real server, with nothing to stream, answers the pings: the link stays
    const live = await watchClient(page, `ws://${addr}/ws`, 4000);
    assert.deepEqual(live.events.map((e) => e.type), ['welcome'], JSON.stringify(live));
  } finally {
    await browser.close();
    web.close();
    fake.close();
    srv.kill();
  }
});

test('a client whose frame was refused asks for a keyframe and decodes on as another client does', { timeout: 120000 }, async () => {
  const { srv, addr } = await startServer();
  const play = playClip(addr, 1);
  const browser = await launchBrowser();
  try {
    const { page, errors } = await pageWithErrors(browser, { width: 400, height: 300 });
    await page.goto(`http://${addr}/?decode=page`);
    const r = await page.evaluate(async (url) => {
      const { ClothcastClient } = await import('/clothcast.js');
      // the reference: a client that decodes every frame, its garments kept by number
      const reference = new ClothcastClient(url);
      const refSeen = new Map();
      reference.addEventListener('frame', (e) => refSeen.set(e.detail.seq, Array.from(e.detail.garment)));
      reference.connect();
      // the client under test: one of its frames has its checksum spoiled on the way
      const c = new ClothcastClient(url);
      const sent = [], refusals = [];
      let spoil = false, spoiled = null;
      const handle = c.handle.bind(c);
      c.handle = (m, size) => {
        if (spoil && m.type === 'frame') {
          spoil = false;
          spoiled = m.seq;
          m.garment = Uint8Array.from(m.garment);
          m.garment[32] ^= 0x55;
        }
        return handle(m, size);
      };
      c.addEventListener('welcome', () => {
        const send = c.ws.send.bind(c.ws);
        c.ws.send = (data) => { sent.push(String(data)); send(data); };
      });
      c.addEventListener('error', (e) => refusals.push({ code: e.detail.code, message: e.detail.message }));
      const result = await new Promise((ok) => {
        let atRefusal = null;
        c.addEventListener('frame', (e) => {
          const av = e.detail;
          if (av.frames === 10) spoil = true;
          if (spoiled !== null && atRefusal === null) atRefusal = { frames: av.frames, seq: av.seq };
          // ten frames decoded after it: in step again
          if (spoiled !== null && av.frames >= 20) {
            const garment = Array.from(av.garment), seq = av.seq;
            const wait = () => {
              if (refSeen.has(seq) || performance.now() > deadline) {
                c.close();
                reference.close();
                const want = refSeen.get(seq);
                ok({ seq, spoiled, atRefusal, same: !!want && want.every((x, i) => x === garment[i]), dropped: av.dropped, resyncAsked: av.resyncAsked });
              } else setTimeout(wait, 20);
            };
            const deadline = performance.now() + 5000;
            wait();
          }
        });
        c.connect();
      });
      return { ...result, sent, refusals, connections: c.connections };
    }, `ws://${addr}/ws`);
    assert.deepEqual(errors, []);
    // the spoiled frame refused by name, once; the frames after it up to the keyframe
    // skipped for want of their reference, silently
    assert.equal(r.refusals.length, 1, JSON.stringify(r.refusals));
    assert.equal(r.refusals[0].code, 'checksum');
    assert.match(r.refusals[0].message, /^avatar performer-0: frame refused: checksum/);
    // one resync asked for it, on the same connection, and the stream went on
    const resyncs = r.sent.filter((s) => s.includes('"resync"'));
    assert.deepEqual(resyncs, ['{"type":"resync","avatars":["performer-0"]}']);
    assert.equal(r.connections, 1);
    assert.ok(r.dropped >= 1, `dropped ${r.dropped}`);
    assert.equal(r.resyncAsked, null, 'in step again');
    assert.ok(r.seq > r.spoiled, `frame ${r.seq} after the spoiled ${r.spoiled}`);
    assert.ok(r.same, `frame ${r.seq} decodes as the reference client's`);
  } finally {
    await browser.close();
    play.kill();
    srv.kill();
  }
});

test('a client that lost an asset asks for it again and decodes on as another client does', { timeout: 120000 }, async () => {
  const { srv, addr } = await startServer();
  const play = playClip(addr, 1);
  const browser = await launchBrowser();
  try {
    const { page, errors } = await pageWithErrors(browser, { width: 400, height: 300 });
    await page.goto(`http://${addr}/?decode=page`);
    const r = await page.evaluate(async (url) => {
      const { ClothcastClient } = await import('/clothcast.js');
      const reference = new ClothcastClient(url);
      const refSeen = new Map();
      reference.addEventListener('frame', (e) => refSeen.set(e.detail.seq, Array.from(e.detail.garment)));
      reference.connect();
      // the client under test: the server's first `asset` message lost on the way
      const c = new ClothcastClient(url);
      const sent = [], refusals = [];
      let lost = null;
      const handle = c.handle.bind(c);
      c.handle = (m, size) => {
        if (m.type === 'asset' && lost === null) {
          lost = m.hash;
          return undefined;
        }
        return handle(m, size);
      };
      c.addEventListener('welcome', () => {
        const send = c.ws.send.bind(c.ws);
        c.ws.send = (data) => { sent.push(String(data)); send(data); };
      });
      c.addEventListener('error', (e) => refusals.push(e.detail.message));
      const result = await new Promise((ok) => {
        c.addEventListener('frame', (e) => {
          const av = e.detail;
          if (av.frames < 10) return;
          c.close();
          const garment = Array.from(av.garment), seq = av.seq;
          const deadline = performance.now() + 5000;
          const wait = () => {
            if (refSeen.has(seq) || performance.now() > deadline) {
              reference.close();
              const want = refSeen.get(seq);
              ok({ seq, same: !!want && want.every((x, i) => x === garment[i]), missing: [...c.missingAssets.keys()] });
            } else setTimeout(wait, 20);
          };
          wait();
        });
        c.connect();
      });
      return { ...result, lost, sent, refusals, connections: c.connections };
    }, `ws://${addr}/ws`);
    assert.deepEqual(errors, []);
    // said once, however many frames named it before it came again
    assert.equal(r.refusals.length, 1, JSON.stringify(r.refusals));
    assert.equal(r.refusals[0], `frame of performer-0 for unknown asset ${r.lost} (asked for again)`);
    const resyncs = r.sent.filter((s) => s.includes('"resync"'));
    assert.equal(resyncs[0], `{"type":"resync","avatars":["performer-0"],"assets":["${r.lost}"]}`);
    assert.ok(resyncs.length <= 2, JSON.stringify(resyncs));
    assert.equal(r.connections, 1, 'on the same connection');
    assert.deepEqual(r.missing, []);
    assert.ok(r.same, `frame ${r.seq} decodes as the reference client's`);
  } finally {
    await browser.close();
    play.kill();
    srv.kill();
  }
});
