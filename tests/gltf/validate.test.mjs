// Runs `clothcast assets`, `clothcast retarget` and `clothcast watch --record` and checks
// every .glb with the Khronos glTF validator: no errors and no warnings, skin and
// animation present.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync, spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import validator from 'gltf-validator';

const root = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
const bin = process.env.CLOTHCAST_BIN ?? join(root, 'target', 'debug', 'clothcast');
const out = mkdtempSync(join(tmpdir(), 'clothcast-gltf-'));
// the files go when all three tests pass; a failure keeps them for a look
let passed = 0;
after(() => {
  if (passed === 3) rmSync(out, { recursive: true, force: true });
  else console.error(`the files are kept in ${out}`);
});

async function validate(path) {
  const report = await validator.validateBytes(new Uint8Array(readFileSync(path)), { maxIssues: 50 });
  const bad = report.issues.messages.filter((m) => m.severity <= 1);
  assert.deepEqual(bad, [], `${path}: ${JSON.stringify(bad, null, 1)}`);
  return report;
}

test('assets: body, garments and avatar are valid skinned glTF', async () => {
  execFileSync(bin, ['assets', '--out', out, '--body-vertices', '3000', '--garment-vertices', '1500'], { stdio: 'inherit' });
  for (const name of ['body', 'tshirt', 'pants', 'avatar']) {
    const r = await validate(join(out, `${name}.glb`));
    assert.equal(r.info.hasSkins, true);
    assert.equal(r.issues.numErrors, 0);
    assert.equal(r.issues.numWarnings, 0);
  }
  const body = await validate(join(out, 'body.glb'));
  assert.equal(body.info.animationCount ?? 0, 0);
  assert.ok(body.info.totalVertexCount >= 2800, `body has ${body.info.totalVertexCount} vertices`);
  passed++;
});

test('retarget: the animated body is valid glTF with one animation', async () => {
  const clip = join(root, 'tests', 'fixtures', 'mocap', 'cmu_131_03.bvh');
  const path = join(out, 'hop.glb');
  execFileSync(bin, ['retarget', clip, '--out', path, '--fps', '10', '--body-vertices', '2000'], { stdio: 'inherit' });
  const r = await validate(path);
  assert.equal(r.info.animationCount, 1);
  assert.equal(r.issues.numErrors, 0);
  assert.equal(r.issues.numWarnings, 0);
  passed++;
});

test('watch --record: the recorded body is valid glTF with one animation', { timeout: 120000 }, async () => {
  const db = join(root, 'tests', 'fixtures', 'db', 'v1', 'small.ccdb');
  const demo = spawn(bin, ['demo', '--db', db, '--avatars', '1', '--bind', '127.0.0.1:0', '--seconds', '30'], { stdio: ['ignore', 'pipe', 'ignore'] });
  try {
    const url = await new Promise((ok, fail) => {
      let text = '';
      demo.stdout.on('data', (d) => {
        text += d;
        const m = text.match(/ws:\/\/\S+/);
        if (m) ok(m[0]);
      });
      demo.on('exit', (c) => fail(new Error(`demo exited ${c}: ${text}`)));
    });
    const dir = join(out, 'recorded');
    execFileSync(bin, ['watch', '--url', url, '--seconds', '3', '--record', dir], { stdio: ['ignore', 'ignore', 'inherit'] });
    const r = await validate(join(dir, 'walker-0.body.glb'));
    assert.equal(r.info.animationCount, 1);
    assert.equal(r.info.hasSkins, true);
    assert.equal(r.issues.numErrors, 0);
    assert.equal(r.issues.numWarnings, 0);
    passed++;
  } finally {
    demo.kill();
  }
});
