// The clothcast browser viewer: every subscribed avatar's body (skinned on the GPU from
// the streamed pose) and garment (decoded from the stream), lit, on a ground grid, with
// an orbit camera, labels, a stats overlay and WebXR "Enter VR". WebGL2, no build step.
// URL options: ?url=ws://…/ws&token=…&avatars=a,b ; ?mirror=1[&avatar=ID] for kiosks
// (one avatar, mirrored, facing the viewer, no UI chrome); ?decode=page decodes the
// garments on the page's own thread instead of in a Web Worker (worker-client.js);
// ?workers=N decodes them in N workers (each its own connection and shard of the
// avatars: for a room of avatars on a device with cores to spare; default 1).

import { ClothcastClient, boneMatrices, vertexNormals } from "./clothcast.js";
import { ClothcastWorkerClient } from "./worker-client.js";

const params = new URLSearchParams(location.search);
const mirror = params.get("mirror") === "1";
if (mirror) document.body.classList.add("mirror");
const wsUrl = params.get("url") ?? `${location.protocol === "https:" ? "wss" : "ws"}://${location.host}/ws`;
const only = mirror && params.get("avatar") ? [params.get("avatar")] : params.get("avatars")?.split(",") ?? null;
// the stream is decoded in a worker, so that rendering (and a headset's frames) never
// waits for it, unless asked otherwise (the worker client itself decodes here where no
// module worker can start)
const Client = params.get("decode") === "page" ? ClothcastClient : ClothcastWorkerClient;
// (the worker computes the garments' normals too, with { normals: true })
const workers = Math.max(1, Math.min(64, Number(params.get("workers")) || 1));
// (the arrays are uploaded from the avatar when drawing and never kept, so each frame's
// can be handed back to the worker to be decoded into: { recycle: true }; ?recycle=0
// to compare)
const client = new Client(wsUrl, { token: params.get("token"), avatars: only, normals: true, recycle: params.get("recycle") !== "0", workers }).connect();

const canvas = document.getElementById("view");
const gl = canvas.getContext("webgl2", { antialias: true, xrCompatible: true });
const overlay = document.getElementById("overlay");
if (!gl) overlay.textContent = "WebGL2 is not available in this browser";

function program(vs, fs) {
  const p = gl.createProgram();
  for (const [type, src] of [[gl.VERTEX_SHADER, vs], [gl.FRAGMENT_SHADER, fs]]) {
    const s = gl.createShader(type);
    gl.shaderSource(s, src);
    gl.compileShader(s);
    if (!gl.getShaderParameter(s, gl.COMPILE_STATUS)) throw new Error(gl.getShaderInfoLog(s));
    gl.attachShader(p, s);
  }
  gl.linkProgram(p);
  if (!gl.getProgramParameter(p, gl.LINK_STATUS)) throw new Error(gl.getProgramInfoLog(p));
  return p;
}

const LIT_FS = `#version 300 es
precision highp float;
in vec3 vN; in vec3 vP;
uniform vec3 color;
out vec4 o;
void main() {
  vec3 n = normalize(vN);
  if (!gl_FrontFacing) n = -n;
  vec3 l = normalize(vec3(0.4, 1.0, 0.6));
  float d = max(dot(n, l), 0.0);
  float rim = pow(1.0 - abs(n.z), 2.0) * 0.15;
  o = vec4(color * (0.28 + 0.72 * d) + rim, 1.0);
}`;
const bodyProg = program(`#version 300 es
layout(location=0) in vec3 pos; layout(location=1) in vec3 nrm;
layout(location=2) in uvec4 joints; layout(location=3) in vec4 weights;
uniform mat4 bones[22]; uniform mat4 viewProj;
out vec3 vN; out vec3 vP;
void main() {
  mat4 m = bones[joints.x] * weights.x + bones[joints.y] * weights.y + bones[joints.z] * weights.z + bones[joints.w] * weights.w;
  vec4 p = m * vec4(pos, 1.0);
  vN = mat3(m) * nrm; vP = p.xyz;
  gl_Position = viewProj * p;
}`, LIT_FS);
const garmentProg = program(`#version 300 es
layout(location=0) in vec3 pos; layout(location=1) in vec3 nrm;
uniform mat4 model; uniform mat4 viewProj;
out vec3 vN; out vec3 vP;
void main() {
  vec4 p = model * vec4(pos, 1.0);
  vN = mat3(model) * nrm; vP = p.xyz;
  gl_Position = viewProj * p;
}`, LIT_FS);
const gridProg = program(`#version 300 es
layout(location=0) in vec3 pos; uniform mat4 viewProj;
void main() { gl_Position = viewProj * vec4(pos, 1.0); }`, `#version 300 es
precision highp float; out vec4 o; void main() { o = vec4(0.42, 0.45, 0.5, 1.0); }`);

// uniform locations, looked up once
const U = {
  grid: { viewProj: gl.getUniformLocation(gridProg, "viewProj") },
  body: { viewProj: gl.getUniformLocation(bodyProg, "viewProj"), bones: gl.getUniformLocation(bodyProg, "bones"), color: gl.getUniformLocation(bodyProg, "color") },
  garment: { viewProj: gl.getUniformLocation(garmentProg, "viewProj"), model: gl.getUniformLocation(garmentProg, "model"), color: gl.getUniformLocation(garmentProg, "color") },
};

function buffer(loc, data, size, integer = false, usage = gl.STATIC_DRAW) {
  const b = gl.createBuffer();
  gl.bindBuffer(gl.ARRAY_BUFFER, b);
  gl.bufferData(gl.ARRAY_BUFFER, data, usage);
  gl.enableVertexAttribArray(loc);
  if (integer) gl.vertexAttribIPointer(loc, size, gl.UNSIGNED_BYTE, 0, 0);
  else gl.vertexAttribPointer(loc, size, gl.FLOAT, false, 0, 0);
  return b;
}

const meshes = new Map(); // asset hash → GPU data
function gpuAsset(a) {
  if (meshes.has(a.hash)) return meshes.get(a.hash);
  const body = gl.createVertexArray();
  gl.bindVertexArray(body);
  buffer(0, a.bodyPositions, 3);
  buffer(1, vertexNormals(a.bodyPositions, a.bodyTriangles, new Float32Array(a.bodyPositions.length)), 3);
  buffer(2, a.bodyJoints, 4, true);
  buffer(3, a.bodyWeights, 4);
  const bodyIdx = gl.createBuffer();
  gl.bindBuffer(gl.ELEMENT_ARRAY_BUFFER, bodyIdx);
  gl.bufferData(gl.ELEMENT_ARRAY_BUFFER, a.bodyTriangles, gl.STATIC_DRAW);
  gl.bindVertexArray(null);
  const m = { body, bodyCount: a.bodyTriangles.length };
  meshes.set(a.hash, m);
  return m;
}

// an avatar's garments: the first and the layers of its outfit over it, inner to outer
const garmentsOf = (av) => [{ asset: av.asset, garment: av.garment, normals: av.normals }, ...av.layers];

const gpuAvatars = new Map();
function gpuAvatar(av) {
  let g = gpuAvatars.get(av.id);
  const worn = garmentsOf(av);
  if (g && g.worn.length === worn.length && g.worn.every((w, i) => w.asset === worn[i].asset)) return g;
  const garments = worn.map(({ asset, garment }) => {
    const n = garment.length;
    const vao = gl.createVertexArray();
    gl.bindVertexArray(vao);
    const pos = buffer(0, n * 4, 3, false, gl.DYNAMIC_DRAW);
    const nrm = buffer(1, n * 4, 3, false, gl.DYNAMIC_DRAW);
    const idx = gl.createBuffer();
    gl.bindBuffer(gl.ELEMENT_ARRAY_BUFFER, idx);
    gl.bufferData(gl.ELEMENT_ARRAY_BUFFER, asset.setup.triangles, gl.STATIC_DRAW);
    gl.bindVertexArray(null);
    return { vao, pos, nrm, normals: new Float32Array(n), count: asset.setup.triangles.length };
  });
  let label = g?.label;
  if (!label) {
    label = document.createElement("div");
    label.className = "label";
    label.textContent = av.id;
    document.body.appendChild(label);
  }
  g = { worn, garments, bones: new Float32Array(22 * 16), model: new Float32Array(16), label, dirty: true, hue: g?.hue ?? gpuAvatars.size };
  gpuAvatars.set(av.id, g);
  return g;
}

client.addEventListener("frame", (e) => { const g = gpuAvatar(e.detail); g.dirty = true; });
client.addEventListener("gone", (e) => { const g = gpuAvatars.get(e.detail); g?.label.remove(); gpuAvatars.delete(e.detail); });
client.addEventListener("error", (e) => console.warn("clothcast:", e.detail));
// the connection's state, for the overlay: the client reconnects by itself
let link = "connecting";
client.addEventListener("welcome", () => { link = "connected"; });
client.addEventListener("close", (e) => {
  const { code, reason, retryMs } = e.detail;
  const why = reason ? `${code} ${reason}` : `${code}`;
  link = retryMs === null ? `closed (${why})` : `disconnected (${why}); retrying in ${(retryMs / 1000).toFixed(1)} s`;
});

// grid
const gridVao = gl.createVertexArray();
gl.bindVertexArray(gridVao);
const gridLines = [];
for (let i = -5; i <= 5; i++) gridLines.push(i * 0.5, 0, -2.5, i * 0.5, 0, 2.5, -2.5, 0, i * 0.5, 2.5, 0, i * 0.5);
buffer(0, new Float32Array(gridLines), 3);
gl.bindVertexArray(null);

// camera
const cam = { yaw: 0.5, pitch: 0.25, dist: 4.0, target: [0, 0.95, 0] };
let drag = null;
canvas.addEventListener("pointerdown", (e) => { drag = [e.clientX, e.clientY]; canvas.setPointerCapture(e.pointerId); });
canvas.addEventListener("pointerup", () => { drag = null; });
canvas.addEventListener("pointermove", (e) => {
  if (!drag) return;
  cam.yaw -= (e.clientX - drag[0]) * 0.008;
  cam.pitch = Math.max(-1.2, Math.min(1.4, cam.pitch + (e.clientY - drag[1]) * 0.008));
  drag = [e.clientX, e.clientY];
});
canvas.addEventListener("wheel", (e) => { cam.dist = Math.max(0.5, Math.min(30, cam.dist * Math.exp(e.deltaY * 0.001))); e.preventDefault(); }, { passive: false });

const mul = (a, b) => { const o = new Float32Array(16); for (let c = 0; c < 4; c++) for (let r = 0; r < 4; r++) { let s = 0; for (let k = 0; k < 4; k++) s += a[4 * k + r] * b[4 * c + k]; o[4 * c + r] = s; } return o; };
function perspective(fovy, aspect, near, far) {
  const f = 1 / Math.tan(fovy / 2), o = new Float32Array(16);
  o[0] = f / aspect; o[5] = f; o[10] = (far + near) / (near - far); o[11] = -1; o[14] = 2 * far * near / (near - far);
  return o;
}
function lookAt(eye, at) {
  let z = [eye[0] - at[0], eye[1] - at[1], eye[2] - at[2]]; const zl = Math.hypot(...z); z = z.map((v) => v / zl);
  let x = [z[2], 0, -z[0]]; const xl = Math.hypot(...x) || 1; x = x.map((v) => v / xl);
  const y = [z[1] * x[2] - z[2] * x[1], z[2] * x[0] - z[0] * x[2], z[0] * x[1] - z[1] * x[0]];
  const d = (a) => -(a[0] * eye[0] + a[1] * eye[1] + a[2] * eye[2]);
  return new Float32Array([x[0], y[0], z[0], 0, x[1], y[1], z[1], 0, x[2], y[2], z[2], 0, d(x), d(y), d(z), 1]);
}
function modelOf(w, out) {
  const [x, y, z, q] = w;
  out.set([1 - 2 * (y * y + z * z), 2 * (x * y + q * z), 2 * (x * z - q * y), 0, 2 * (x * y - q * z), 1 - 2 * (x * x + z * z), 2 * (y * z + q * x), 0,
    2 * (x * z + q * y), 2 * (y * z - q * x), 1 - 2 * (x * x + y * y), 0, w[4], w[5], w[6], 1]);
  return out;
}
const hsl = (h) => { const a = (h * 0.61803) % 1 * 6.283; return [0.55 + 0.35 * Math.cos(a), 0.55 + 0.35 * Math.cos(a + 2.1), 0.55 + 0.35 * Math.cos(a + 4.2)]; };

function upload() {
  for (const [id, g] of gpuAvatars) {
    const av = client.avatars.get(id);
    if (!av || !g.dirty) continue;
    garmentsOf(av).forEach(({ asset, garment, normals }, i) => {
      const gg = g.garments[i];
      gl.bindBuffer(gl.ARRAY_BUFFER, gg.pos);
      gl.bufferSubData(gl.ARRAY_BUFFER, 0, garment);
      gl.bindBuffer(gl.ARRAY_BUFFER, gg.nrm);
      // the worker's normals where it computed them, else here
      gl.bufferSubData(gl.ARRAY_BUFFER, 0, normals ?? vertexNormals(garment, asset.setup.triangles, gg.normals));
    });
    boneMatrices(av.bones, av.world, g.bones);
    modelOf(av.world, g.model);
    g.dirty = false;
  }
}

function clear() {
  gl.clearColor(0.114, 0.129, 0.149, 1);
  gl.clear(gl.COLOR_BUFFER_BIT | gl.DEPTH_BUFFER_BIT);
}

function drawScene(viewProj) {
  gl.enable(gl.DEPTH_TEST);
  gl.useProgram(gridProg);
  gl.uniformMatrix4fv(U.grid.viewProj, false, viewProj);
  gl.bindVertexArray(gridVao);
  gl.drawArrays(gl.LINES, 0, gridLines.length / 3);
  for (const [id, g] of gpuAvatars) {
    const av = client.avatars.get(id);
    if (!av || av.frames === 0) continue;
    const m = gpuAsset(av.asset);
    gl.useProgram(bodyProg);
    gl.uniformMatrix4fv(U.body.viewProj, false, viewProj);
    gl.uniformMatrix4fv(U.body.bones, false, g.bones);
    gl.uniform3f(U.body.color, 0.78, 0.66, 0.58);
    gl.bindVertexArray(m.body);
    gl.drawElements(gl.TRIANGLES, m.bodyCount, gl.UNSIGNED_INT, 0);
    gl.useProgram(garmentProg);
    gl.uniformMatrix4fv(U.garment.viewProj, false, viewProj);
    gl.uniformMatrix4fv(U.garment.model, false, g.model);
    // an outfit's garments each in a colour of their own: the outer one the avatar's,
    // those under it dark and muted, like denim under a shirt
    g.garments.forEach((gg, i) => {
      const under = g.garments.length - 1 - i;
      const own = hsl(g.hue + 0.3 * under), denim = [0.2, 0.25, 0.38];
      gl.uniform3fv(U.garment.color, under === 0 ? own : own.map((c, k) => 0.25 * c + 0.75 * denim[k]));
      gl.bindVertexArray(gg.vao);
      gl.drawElements(gl.TRIANGLES, gg.count, gl.UNSIGNED_INT, 0);
    });
  }
  gl.bindVertexArray(null);
}

// The orbit centre (the avatars' mean position on the floor) and how far the
// farthest avatar stands from it, metres.
function avatarSpread() {
  let n = 0; const c = [0, 0, 0];
  for (const av of client.avatars.values()) { if (av.frames) { c[0] += av.world[4]; c[2] += av.world[6]; n++; } }
  if (!n) return [cam.target, 0];
  const centre = [c[0] / n, 0.95, c[2] / n];
  let r = 0;
  for (const av of client.avatars.values()) if (av.frames) r = Math.max(r, Math.hypot(av.world[4] - centre[0], av.world[6] - centre[2]));
  return [centre, r];
}
// Extra camera distance that keeps every avatar in view (eased, so the camera does not
// jump when an avatar comes or goes); the wheel zooms on top of it.
let fitDist = 0, lastRender = 0;

let frames = 0, fps = 0, lastFps = performance.now();
const stats = { bytes: 0, lastBytes: 0, kbps: 0, lastBusy: 0, lastPage: 0, busy: 0, page: 0 };
function updateOverlay(now) {
  frames++;
  if (now - lastFps < 1000) return;
  const total = [...client.avatars.values()].reduce((s, a) => s + a.bytes, 0);
  stats.kbps = (total - stats.lastBytes) * 8 / (now - lastFps);
  stats.lastBytes = total;
  // share of a thread spent on the stream: the decoding thread's, and the page's (the
  // worker client decodes on the page where no worker could start)
  const worker = client.inWorker === true;
  const pageMs = worker ? client.pageMs : client.busyMs;
  stats.busy = (client.busyMs - stats.lastBusy) / (now - lastFps);
  stats.page = (pageMs - stats.lastPage) / (now - lastFps);
  stats.lastBusy = client.busyMs;
  stats.lastPage = pageMs;
  fps = frames * 1000 / (now - lastFps);
  frames = 0; lastFps = now;
  const lines = [`render ${fps.toFixed(0)} fps   stream ${stats.kbps.toFixed(0)} kbit/s   tick ${client.tickHz} Hz   ${link}`,
    `decoding ${(100 * stats.busy).toFixed(1)} % of ${!worker ? "the page's thread" : client.slots.length > 1 ? `a thread, in ${client.slots.length} workers` : "a worker"}   page's thread ${(100 * stats.page).toFixed(1)} %`];
  for (const av of client.avatars.values()) lines.push(`${av.id.padEnd(14)} frame ${String(av.seq).padStart(6)}  dropped ${av.dropped}${av.skipped ? `  skipped ${av.skipped}` : ""}  latency ${av.latencyMs.toFixed(0)} ms`);
  overlay.textContent = lines.join("\n");
  window.__clothcast = { fps, kbps: stats.kbps, link, connections: client.connections, decode: worker ? "worker" : "page", workers: worker ? client.slots.length : 0, busy: stats.busy, page: stats.page, arraysMade: client.arraysMade ?? 0, avatars: [...client.avatars.values()].map((a) => ({ id: a.id, seq: a.seq, frames: a.frames, dropped: a.dropped, skipped: a.skipped ?? 0, latencyMs: a.latencyMs, sample: Array.from(a.garment.subarray(0, 30)), layers: a.layers.map((l) => ({ garment: l.asset.garment, sample: Array.from(l.garment.subarray(0, 30)) })) })) };
}

function render(now) {
  const w = canvas.clientWidth * devicePixelRatio, h = canvas.clientHeight * devicePixelRatio;
  if (canvas.width !== w || canvas.height !== h) { canvas.width = w; canvas.height = h; }
  gl.bindFramebuffer(gl.FRAMEBUFFER, null);
  gl.viewport(0, 0, w, h);
  upload();
  let [target, spread] = avatarSpread();
  // half the vertical field of view is 0.4 rad: an avatar `spread` from the centre,
  // even on the camera's side of it, stays in the picture
  const ease = 1 - Math.exp(-Math.min(now - lastRender, 1000) / 500);
  lastRender = now;
  fitDist += (2.4 * spread - fitDist) * ease;
  const dist = cam.dist + fitDist;
  let eye;
  if (mirror) {
    // face the (first) avatar from the front, mirrored like a looking glass
    const av = [...client.avatars.values()].find((a) => a.frames);
    if (av) {
      const [x, y, z, q] = av.world;
      const fwd = [2 * (x * z + q * y), 0, 1 - 2 * (x * x + y * y)];
      target = [av.world[4], 1.0, av.world[6]];
      eye = [target[0] + 2.6 * fwd[0], 1.2, target[2] + 2.6 * fwd[2]];
    }
  }
  eye ??= [target[0] + dist * Math.cos(cam.pitch) * Math.sin(cam.yaw), target[1] + dist * Math.sin(cam.pitch), target[2] + dist * Math.cos(cam.pitch) * Math.cos(cam.yaw)];
  const proj = perspective(0.8, w / Math.max(h, 1), 0.05, 100);
  if (mirror) { proj[0] = -proj[0]; gl.frontFace(gl.CW); } else gl.frontFace(gl.CCW);
  const viewProj = mul(proj, lookAt(eye, target));
  clear();
  drawScene(viewProj);
  // labels above each pelvis
  for (const [id, g] of gpuAvatars) {
    const av = client.avatars.get(id);
    if (!av) continue;
    const p = [av.world[4], 2.0, av.world[6], 1];
    const c = [0, 1, 2, 3].map((r) => viewProj[r] * p[0] + viewProj[4 + r] * p[1] + viewProj[8 + r] * p[2] + viewProj[12 + r]);
    if (c[3] > 0) { g.label.style.left = `${(c[0] / c[3] * 0.5 + 0.5) * canvas.clientWidth}px`; g.label.style.top = `${(0.5 - c[1] / c[3] * 0.5) * canvas.clientHeight}px`; }
  }
  updateOverlay(now);
  if (!xrSession) requestAnimationFrame(render);
}
requestAnimationFrame(render);

// WebXR: immersive VR where the browser offers it
let xrSession = null;
const vrButton = document.getElementById("vr");
if (navigator.xr?.isSessionSupported) {
  navigator.xr.isSessionSupported("immersive-vr").then((ok) => { vrButton.disabled = !ok; if (!ok) vrButton.textContent = "VR not available"; });
} else {
  vrButton.textContent = "VR not available";
}
vrButton.addEventListener("click", async () => {
  if (xrSession) { xrSession.end(); return; }
  const session = await navigator.xr.requestSession("immersive-vr", { optionalFeatures: ["local-floor"] });
  xrSession = session;
  vrButton.textContent = "Exit VR";
  await gl.makeXRCompatible();
  session.updateRenderState({ baseLayer: new XRWebGLLayer(session, gl) });
  const space = await session.requestReferenceSpace("local-floor").catch(() => session.requestReferenceSpace("local"));
  session.addEventListener("end", () => { xrSession = null; vrButton.textContent = "Enter VR"; requestAnimationFrame(render); });
  const onXr = (t, frame) => {
    const pose = frame.getViewerPose(space);
    const layer = session.renderState.baseLayer;
    gl.bindFramebuffer(gl.FRAMEBUFFER, layer.framebuffer);
    upload();
    clear();
    if (pose) for (const view of pose.views) {
      const vp = layer.getViewport(view);
      gl.viewport(vp.x, vp.y, vp.width, vp.height);
      // the avatars stand 2 m in front of the user
      const shift = new Float32Array([1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0, 0, 0, -2, 1]);
      drawScene(mul(view.projectionMatrix, mul(view.transform.inverse.matrix, shift)));
    }
    session.requestAnimationFrame(onXr);
  };
  session.requestAnimationFrame(onXr);
});
