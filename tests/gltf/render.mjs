// Renders a .glb with three.js in headless Chromium (Debian's /usr/bin/chromium driven by
// playwright-core): `node render.mjs FILE.glb OUT.png [seconds] [dir]`. Also used by tests.
import { createServer } from 'node:http';
import { readFileSync, existsSync } from 'node:fs';
import { join, dirname, extname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromium } from 'playwright-core';

const here = dirname(fileURLToPath(import.meta.url));
const types = { '.html': 'text/html', '.js': 'text/javascript', '.mjs': 'text/javascript', '.glb': 'model/gltf-binary' };

/** Serves viewer.html, three.js and one .glb on a loopback port. */
function serve(glbPath) {
  const server = createServer((req, res) => {
    const url = new URL(req.url, 'http://x');
    let file;
    if (url.pathname === '/' || url.pathname === '/viewer.html') file = join(here, 'viewer.html');
    else if (url.pathname === '/model.glb') file = glbPath;
    else if (url.pathname.startsWith('/three/')) file = join(here, 'node_modules', 'three', url.pathname.slice(7));
    if (!file || file.includes('..') || !existsSync(file)) { res.writeHead(404); res.end(); return; }
    res.writeHead(200, { 'content-type': types[extname(file)] ?? 'application/octet-stream' });
    res.end(readFileSync(file));
  });
  return new Promise((ok) => server.listen(0, '127.0.0.1', () => ok(server)));
}

export async function renderGlb(glbPath, pngPath, t = 0, dir = '0.6,0.35,1') {
  const server = await serve(resolve(glbPath));
  const browser = await chromium.launch({
    executablePath: process.env.CHROMIUM ?? '/usr/bin/chromium',
    args: ['--no-sandbox', '--disable-gpu', '--use-angle=swiftshader', '--enable-unsafe-swiftshader', '--disable-background-networking', '--disable-component-update', '--disable-sync', '--no-first-run'],
  });
  try {
    const page = await browser.newPage({ viewport: { width: 640, height: 640 } });
    const { port } = server.address();
    await page.goto(`http://127.0.0.1:${port}/viewer.html?src=/model.glb&t=${t}&dir=${dir}`);
    await page.waitForFunction(() => window.done, null, { timeout: 60000 });
    const info = await page.evaluate(() => window.done);
    if (info.error) throw new Error(info.error);
    const png = await page.locator('canvas').screenshot({ path: pngPath });
    return { ...info, png };
  } finally {
    await browser.close();
    server.close();
  }
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const [glb, out, t, dir] = process.argv.slice(2);
  const info = await renderGlb(glb, out, parseFloat(t ?? '0'), dir);
  delete info.png;
  console.log(JSON.stringify(info));
}
