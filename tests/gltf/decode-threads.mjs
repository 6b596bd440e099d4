// How busy decoding keeps the browser viewer's threads, with the streams decoded in a
// Web Worker (the default), in two (`?workers=2`, the total over both) and on the
// page's own thread (`?decode=page`), and in a worker not handed its arrays back
// (`?recycle=0`): `clothcast
// serve` (the default database), `clothcast play` replaying CMU 131_03 on N avatars, and
// the viewer in headless Chromium, each way twice, 5 s each. Not a test: figures for the
// README ("Decoding off the page's thread").
//   node tests/gltf/decode-threads.mjs [AVATARS=10]   (CLOTHCAST_BIN: the binary)
import { chromium } from 'playwright-core';
import { spawn } from 'node:child_process';
import { join, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
const bin = process.env.CLOTHCAST_BIN ?? join(root, 'target', 'release', 'clothcast');
const avatars = Number(process.argv[2] ?? 10);

const srv = spawn(bin, ['serve', '--open', '--bind', '127.0.0.1:0'], { stdio: ['ignore', 'pipe', 'ignore'] });
const addr = await new Promise((ok, fail) => {
  let out = '';
  srv.stdout.on('data', (d) => { out += d; const m = out.match(/ws:\/\/([0-9.:]+)\/ws/); if (m) ok(m[1]); });
  srv.on('exit', (c) => fail(new Error(`server exited ${c}`)));
});
const play = spawn(bin, ['play', join(root, 'tests/fixtures/mocap/cmu_131_03.bvh'), '--url', `ws://${addr}/ws`, '--avatars', String(avatars), '--seconds', '600'], { stdio: 'ignore' });
const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM ?? '/usr/bin/chromium',
  args: ['--no-sandbox', '--disable-gpu', '--use-angle=swiftshader', '--enable-unsafe-swiftshader'],
});
try {
  const page = await browser.newPage({ viewport: { width: 320, height: 240 } });
  const query = { worker: 'decode=worker', 'workers=2': 'workers=2', page: 'decode=page', 'worker, recycle=0': 'decode=worker&recycle=0' };
  const how = { worker: 'a worker', 'workers=2': 'two workers', page: "the page's thread", 'worker, recycle=0': 'a worker, arrays not handed back' };
  for (const mode of ['worker', 'worker, recycle=0', 'workers=2', 'page', 'worker', 'worker, recycle=0', 'workers=2', 'page']) {
    await page.goto(`http://${addr}/?${query[mode]}`);
    await page.waitForFunction((n) => window.__clothcast?.avatars?.length === n && window.__clothcast.avatars.every((a) => a.frames > 30), avatars, { timeout: 120000 });
    const samples = [];
    for (let i = 0; i < 5; i++) {
      await page.waitForTimeout(1000);
      samples.push(await page.evaluate(() => window.__clothcast));
    }
    const mean = (k) => samples.reduce((s, x) => s + x[k], 0) / samples.length;
    console.log(`${avatars} avatars, decoding on ${how[mode]}: decoding ${(100 * mean('busy')).toFixed(1)} % of a thread, page's thread ${(100 * mean('page')).toFixed(1)} % on the stream, ${((samples[4].arraysMade - samples[0].arraysMade) / 4).toFixed(0)} arrays made a second (render ${mean('fps').toFixed(0)} fps, ${mean('kbps').toFixed(0)} kbit/s)`);
  }
} finally {
  await browser.close();
  play.kill();
  srv.kill();
}
