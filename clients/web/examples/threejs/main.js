// A three.js app that shows clothcast avatars: each garment of every avatar (one, or
// an outfit's several) becomes a BufferGeometry whose positions are set each frame from
// the clothcast client's decoded garment, and the body a SkinnedMesh whose bones are set
// each frame from the skinning transforms the garment's codec frame carries
// (boneMatrices). The client decodes in a Web Worker (ClothcastWorkerClient), so the
// render loop never waits for it, and the worker computes the garments' vertex normals
// too ({ normals: true }), which three.js's computeVertexNormals would otherwise do on
// this thread every frame; ClothcastClient (clothcast.js) takes the same options and
// raises the same events, decoding on this thread (there, call vertexNormals from
// clothcast.js or computeVertexNormals yourself).
// Serve this folder next to ../../ (npm install first) and open
// index.html?url=ws://127.0.0.1:8470/ws
import * as THREE from "three";
import { boneMatrices } from "../../clothcast.js";
import { ClothcastWorkerClient } from "../../worker-client.js";

const renderer = new THREE.WebGLRenderer({ antialias: true });
renderer.setSize(innerWidth, innerHeight);
document.body.appendChild(renderer.domElement);
const scene = new THREE.Scene();
scene.add(new THREE.HemisphereLight(0xffffff, 0x334455, 2.0), new THREE.GridHelper(5, 10));
const camera = new THREE.PerspectiveCamera(45, innerWidth / innerHeight, 0.05, 100);
camera.position.set(1.5, 1.6, 4.0);
camera.lookAt(0, 1.0, 0);

const url = new URLSearchParams(location.search).get("url") ?? "ws://127.0.0.1:8470/ws";
// (each frame's arrays are copied into the meshes when it comes, so they can go back to
// the worker to be decoded into: { recycle: true })
const cc = new ClothcastWorkerClient(url, { normals: true, recycle: true }).connect();
const garments = new Map(); // avatar id → THREE.Group of its garments' meshes
const bodies = new Map(); // avatar id → { mesh: THREE.SkinnedMesh, matrices: Float32Array }

// An avatar's body: the asset's rest mesh and skin as a SkinnedMesh at the origin, one
// bone per joint with no hierarchy and identity inverse bind matrices, so that each
// bone's world matrix is exactly the rest → world skinning matrix boneMatrices gives.
function makeBody(asset) {
  const geometry = new THREE.BufferGeometry();
  geometry.setAttribute("position", new THREE.BufferAttribute(asset.bodyPositions, 3));
  geometry.setAttribute("skinIndex", new THREE.BufferAttribute(asset.bodyJoints, 4));
  geometry.setAttribute("skinWeight", new THREE.BufferAttribute(asset.bodyWeights, 4));
  geometry.setIndex(new THREE.BufferAttribute(asset.bodyTriangles, 1));
  geometry.computeVertexNormals();
  const n = asset.parents.length;
  const bones = Array.from({ length: n }, () => new THREE.Bone());
  const mesh = new THREE.SkinnedMesh(geometry, new THREE.MeshStandardMaterial({ color: 0xc8a080 }));
  mesh.bind(new THREE.Skeleton(bones, bones.map(() => new THREE.Matrix4())), new THREE.Matrix4());
  mesh.frustumCulled = false; // its bounding sphere is the rest pose's, at the origin
  mesh.userData.asset = asset;
  return { mesh, matrices: new Float32Array(16 * n) };
}

// an avatar's garments: the first and the layers of its outfit over it, inner to outer
const wornBy = (avatar) => [{ asset: avatar.asset, garment: avatar.garment }, ...avatar.layers];

cc.addEventListener("frame", ({ detail: avatar }) => {
  const worn = wornBy(avatar);
  const normalsOf = [avatar.normals, ...avatar.layers.map((l) => l.normals)];
  let group = garments.get(avatar.id);
  if (!group || group.children.length !== worn.length || group.children.some((m, i) => m.userData.asset !== worn[i].asset)) {
    if (group) scene.remove(group);
    group = new THREE.Group();
    worn.forEach(({ asset, garment }, i) => {
      const geometry = new THREE.BufferGeometry();
      geometry.setAttribute("position", new THREE.BufferAttribute(new Float32Array(garment.length), 3).setUsage(THREE.DynamicDrawUsage));
      geometry.setAttribute("normal", new THREE.BufferAttribute(new Float32Array(garment.length), 3).setUsage(THREE.DynamicDrawUsage));
      geometry.setIndex(new THREE.BufferAttribute(asset.setup.triangles, 1));
      // the outer garment blue, those under it grey (pants under a shirt)
      const color = i === worn.length - 1 ? 0x3f7fd0 : 0x55585f;
      const mesh = new THREE.Mesh(geometry, new THREE.MeshStandardMaterial({ color, side: THREE.DoubleSide }));
      mesh.userData.asset = asset;
      group.add(mesh);
    });
    garments.set(avatar.id, group);
    scene.add(group);
  }
  // (the worker client hands over new arrays each frame, valid until the next: copy them in)
  group.children.forEach((mesh, i) => {
    const { position, normal } = mesh.geometry.attributes;
    position.copyArray(worn[i].garment);
    position.needsUpdate = true;
    normal.copyArray(normalsOf[i]);
    normal.needsUpdate = true;
  });
  const [x, y, z, w, tx, ty, tz] = avatar.world; // canonical → world
  group.quaternion.set(x, y, z, w);
  group.position.set(tx, ty, tz);
  // the body, posed by the bones of this frame's garment stream (canonical → world)
  let body = bodies.get(avatar.id);
  if (!body || body.mesh.userData.asset !== avatar.asset) {
    if (body) scene.remove(body.mesh);
    body = makeBody(avatar.asset);
    bodies.set(avatar.id, body);
    scene.add(body.mesh);
  }
  boneMatrices(avatar.bones, avatar.world, body.matrices);
  body.mesh.skeleton.bones.forEach((bone, j) => bone.matrixWorld.fromArray(body.matrices, 16 * j));
  window.__example = { avatars: garments.size, bodies: bodies.size, frames: avatar.frames, meshes: [...garments.values()].reduce((n, g) => n + g.children.length, 0) };
});
cc.addEventListener("gone", ({ detail: id }) => {
  scene.remove(garments.get(id));
  garments.delete(id);
  scene.remove(bodies.get(id)?.mesh);
  bodies.delete(id);
});

renderer.setAnimationLoop(() => renderer.render(scene, camera));
