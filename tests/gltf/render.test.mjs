// Renders clothcast's animated glTF in a real glTF viewer (three.js in headless
// Chromium) at two times: the picture is not blank, and the person moves.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { renderGlb } from './render.mjs';

const root = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
const bin = process.env.CLOTHCAST_BIN ?? join(root, 'target', 'debug', 'clothcast');
const out = process.env.CLOTHCAST_RENDER_DIR ?? mkdtempSync(join(tmpdir(), 'clothcast-render-'));

import { pngPixels } from './png.mjs';

function lumaStats({ w, h, bpp, px }) {
  let s = 0, s2 = 0;
  for (let i = 0; i < w * h; i++) {
    const l = 0.299 * px[i * bpp] + 0.587 * px[i * bpp + 1] + 0.114 * px[i * bpp + 2];
    s += l; s2 += l * l;
  }
  const m = s / (w * h);
  return { mean: m, std: Math.sqrt(s2 / (w * h) - m * m) };
}

test('an animated avatar renders in three.js and moves', async () => {
  const clip = join(root, 'tests', 'fixtures', 'mocap', 'cmu_131_01.bvh');
  const glb = join(out, 'walk.glb');
  execFileSync(bin, ['retarget', clip, '--out', glb, '--garments', '--fps', '15', '--body-vertices', '3000', '--garment-vertices', '1500'], { stdio: 'inherit' });
  const a = await renderGlb(glb, join(out, 'walk_t1.png'), 1.0);
  const b = await renderGlb(glb, join(out, 'walk_t4.png'), 4.0);
  assert.equal(a.skinned, 3, 'body, T-shirt and pants are skinned meshes');
  assert.equal(a.animations, 1);
  const pa = pngPixels(a.png), pb = pngPixels(b.png);
  const sa = lumaStats(pa);
  assert.ok(sa.std > 10, `picture has contrast (std ${sa.std})`);
  let changed = 0;
  for (let i = 0; i < pa.px.length; i += pa.bpp) if (Math.abs(pa.px[i] - pb.px[i]) > 30) changed++;
  assert.ok(changed > 2000, `${changed} pixels changed between t=1 s and t=4 s`);
  // the person walked: the model's centre moved
  const moved = Math.hypot(a.center[0] - b.center[0], a.center[2] - b.center[2]);
  assert.ok(moved > 0.1, `centre moved ${moved} m`);
  // passed: the pictures in a folder of our own go (a failure keeps them for a look)
  if (!process.env.CLOTHCAST_RENDER_DIR) rmSync(out, { recursive: true, force: true });
});
