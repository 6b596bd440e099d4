// A three.js app that shows clothcast garments: each garment of every avatar (one, or
// an outfit's several) becomes a BufferGeometry whose positions the clothcast client
// decodes in place each frame.
// Serve this folder next to ../../ (npm install first) and open
// index.html?url=ws://127.0.0.1:8470/ws
import * as THREE from "three";
import { ClothcastClient } from "../../clothcast.js";

const renderer = new THREE.WebGLRenderer({ antialias: true });
renderer.setSize(innerWidth, innerHeight);
document.body.appendChild(renderer.domElement);
const scene = new THREE.Scene();
scene.add(new THREE.HemisphereLight(0xffffff, 0x334455, 2.0), new THREE.GridHelper(5, 10));
const camera = new THREE.PerspectiveCamera(45, innerWidth / innerHeight, 0.05, 100);
camera.position.set(1.5, 1.6, 4.0);
camera.lookAt(0, 1.0, 0);

const url = new URLSearchParams(location.search).get("url") ?? "ws://127.0.0.1:8470/ws";
const cc = new ClothcastClient(url).connect();
const garments = new Map(); // avatar id → THREE.Group of its garments' meshes

// an avatar's garments: the first and the layers of its outfit over it, inner to outer
const wornBy = (avatar) => [{ asset: avatar.asset, garment: avatar.garment }, ...avatar.layers];

cc.addEventListener("frame", ({ detail: avatar }) => {
  const worn = wornBy(avatar);
  let group = garments.get(avatar.id);
  if (!group || group.children.length !== worn.length || group.children.some((m, i) => m.userData.asset !== worn[i].asset)) {
    if (group) scene.remove(group);
    group = new THREE.Group();
    worn.forEach(({ asset, garment }, i) => {
      const geometry = new THREE.BufferGeometry();
      // the client's Float32Array is decoded in place every frame: share it
      geometry.setAttribute("position", new THREE.BufferAttribute(garment, 3).setUsage(THREE.DynamicDrawUsage));
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
  for (const mesh of group.children) {
    mesh.geometry.attributes.position.needsUpdate = true;
    mesh.geometry.computeVertexNormals();
  }
  const [x, y, z, w, tx, ty, tz] = avatar.world; // canonical → world
  group.quaternion.set(x, y, z, w);
  group.position.set(tx, ty, tz);
  window.__example = { avatars: garments.size, frames: avatar.frames, meshes: [...garments.values()].reduce((n, g) => n + g.children.length, 0) };
});
cc.addEventListener("gone", ({ detail: id }) => { scene.remove(garments.get(id)); garments.delete(id); });

renderer.setAnimationLoop(() => renderer.render(scene, camera));
