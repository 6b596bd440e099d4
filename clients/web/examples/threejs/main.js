// A three.js app that shows clothcast garments: the garment of every avatar becomes a
// BufferGeometry whose positions the clothcast client decodes in place each frame.
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
const garments = new Map(); // avatar id → THREE.Mesh

cc.addEventListener("frame", ({ detail: avatar }) => {
  let mesh = garments.get(avatar.id);
  if (!mesh) {
    const geometry = new THREE.BufferGeometry();
    // the client's Float32Array is decoded in place every frame: share it
    geometry.setAttribute("position", new THREE.BufferAttribute(avatar.garment, 3).setUsage(THREE.DynamicDrawUsage));
    geometry.setIndex(new THREE.BufferAttribute(avatar.asset.setup.triangles, 1));
    mesh = new THREE.Mesh(geometry, new THREE.MeshStandardMaterial({ color: 0x3f7fd0, side: THREE.DoubleSide }));
    garments.set(avatar.id, mesh);
    scene.add(mesh);
  }
  mesh.geometry.attributes.position.needsUpdate = true;
  mesh.geometry.computeVertexNormals();
  const [x, y, z, w, tx, ty, tz] = avatar.world; // canonical → world
  mesh.quaternion.set(x, y, z, w);
  mesh.position.set(tx, ty, tz);
  window.__example = { avatars: garments.size, frames: avatar.frames };
});
cc.addEventListener("gone", ({ detail: id }) => { scene.remove(garments.get(id)); garments.delete(id); });

renderer.setAnimationLoop(() => renderer.render(scene, camera));
