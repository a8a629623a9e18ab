// anim3d.js — the 3-D view of a model with bodies, drawn with three.js (r187, vendored
// in vendor/three; the import map in index.html resolves "three"). The model's own
// frames and points give every body's pose at each sample: frames are chains of
// rotations about axes, points are offsets expressed in a frame. Rolling disks are drawn
// as a tyre (torus) and a translucent disk, other bodies as their inertia ellipsoid
// (semi-axes from the principal moments), every body frame as a small set of axes,
// particles as small spheres.

import * as THREE from "three";
import { OrbitControls } from "three/addons/controls/OrbitControls.js";
import { compileExpr } from "./expr.js";

const I3 = () => [[1, 0, 0], [0, 1, 0], [0, 0, 1]];
const mul = (A, B) => A.map((r) => [0, 1, 2].map((j) => r[0] * B[0][j] + r[1] * B[1][j] + r[2] * B[2][j]));
const apply = (A, v) => A.map((r) => r[0] * v[0] + r[1] * v[1] + r[2] * v[2]);
const T = (A) => [0, 1, 2].map((i) => [0, 1, 2].map((j) => A[j][i]));

/** Rotation by angle a about the unit vector u (Rodrigues). */
function rot(u, a) {
  const n = Math.hypot(u[0], u[1], u[2]) || 1;
  const [x, y, z] = u.map((c) => c / n);
  const c = Math.cos(a), s = Math.sin(a), C = 1 - c;
  return [
    [c + x * x * C, x * y * C - z * s, x * z * C + y * s],
    [y * x * C + z * s, c + y * y * C, y * z * C - x * s],
    [z * x * C - y * s, z * y * C + x * s, c + z * z * C],
  ];
}

const AXES = { x: [1, 0, 0], y: [0, 1, 0], z: [0, 0, 1], "+x": [1, 0, 0], "+y": [0, 1, 0], "+z": [0, 0, 1], "-x": [-1, 0, 0], "-y": [0, -1, 0], "-z": [0, 0, -1] };
const vecOf = (a) => (typeof a === "string" && AXES[a] ? () => AXES[a] : Array.isArray(a) ? ((fs) => (env) => fs.map((f) => f(env)))(a.map((e) => compileExpr(e))) : () => [0, 0, 1]);

/** Eigen-decomposition of a symmetric 3×3 matrix (Jacobi): {values, vectors (columns)}. */
function eigSym(A0) {
  const A = A0.map((r) => r.slice());
  let V = I3();
  for (let sweep = 0; sweep < 30; sweep++) {
    const off = Math.abs(A[0][1]) + Math.abs(A[0][2]) + Math.abs(A[1][2]);
    if (off < 1e-14) break;
    for (const [p, q] of [[0, 1], [0, 2], [1, 2]]) {
      if (Math.abs(A[p][q]) < 1e-18) continue;
      const th = 0.5 * Math.atan2(2 * A[p][q], A[q][q] - A[p][p]);
      const c = Math.cos(th), s = Math.sin(th);
      const J = I3();
      J[p][p] = c; J[q][q] = c; J[p][q] = s; J[q][p] = -s;
      const R = mul(mul(T(J), A), J);
      for (let i = 0; i < 3; i++) for (let j = 0; j < 3; j++) A[i][j] = R[i][j];
      V = mul(V, J);
    }
  }
  return { values: [A[0][0], A[1][1], A[2][2]], vectors: V };
}

/** Poses of the model's frames and points at one state. */
function kinematics(model) {
  const frames = new Map((model.frames || []).map((f) => [f.name, {
    parent: f.parent || "N",
    rots: (f.rotations || []).map((r) => ({ axis: vecOf(r.axis), angle: compileExpr(r.angle) })),
  }]));
  const points = new Map((model.points || []).map((p) => [p.name, {
    parent: p.parent || "O", frame: p.frame || "N", pos: (p.position || [0, 0, 0]).map((e) => compileExpr(e)),
  }]));
  return (env) => {
    const R = new Map([["N", I3()]]);
    const P = new Map([["O", [0, 0, 0]]]);
    const frameR = (name, depth = 0) => {
      if (R.has(name)) return R.get(name);
      const f = frames.get(name);
      if (!f || depth > 64) return I3();
      let M = frameR(f.parent, depth + 1);
      for (const r of f.rots) M = mul(M, rot(r.axis(env), r.angle(env)));
      R.set(name, M);
      return M;
    };
    const pointP = (name, depth = 0) => {
      if (P.has(name)) return P.get(name);
      const p = points.get(name);
      if (!p || depth > 64) return [0, 0, 0];
      const base = pointP(p.parent, depth + 1);
      const v = apply(frameR(p.frame), p.pos.map((f) => f(env)));
      const out = [base[0] + v[0], base[1] + v[1], base[2] + v[2]];
      P.set(name, out);
      return out;
    };
    return { frameR, pointP };
  };
}

export function makeScene(host, model, env0, tr) {
  host.replaceChildren();
  const canvas = document.createElement("canvas");
  host.append(canvas);
  const renderer = new THREE.WebGLRenderer({ canvas, antialias: true, preserveDrawingBuffer: true });
  renderer.setPixelRatio(window.devicePixelRatio || 1);
  const scene = new THREE.Scene();
  scene.background = new THREE.Color(0xf7f9fb);
  scene.add(new THREE.HemisphereLight(0xffffff, 0x8899aa, 2.2));
  const sun = new THREE.DirectionalLight(0xffffff, 1.6);
  sun.position.set(3, 6, 4);
  scene.add(sun);

  // the model's definitions, in order, may stand in angles and positions
  const defs = (Array.isArray(model.definitions) ? model.definitions : []).filter((d) => d && d.name && d.expr !== undefined)
    .map((d) => { try { return [d.name, compileExpr(d.expr)]; } catch { return [d.name, () => NaN]; } });
  const withDefs = (env) => { for (const [n, f] of defs) env[n] = f(env); return env; };
  withDefs(env0);

  // world (the model's N frame) → three.js (y up): "up" is against gravity, else +z
  const gv = model.gravity && Array.isArray(model.gravity.vector) ? model.gravity.vector.map((e) => compileExpr(e)(env0)) : [0, 0, -1];
  const down = gv[2] > 0 ? 1 : -1;
  const M = down > 0 ? [[1, 0, 0], [0, 0, -1], [0, 1, 0]] : [[1, 0, 0], [0, 0, 1], [0, -1, 0]];
  const toThree = (p) => { const v = apply(M, p); return new THREE.Vector3(v[0], v[1], v[2]); };

  const kin = kinematics(model);
  const names = Object.keys(tr.q);
  const rates = Object.keys(tr.qdot || {});
  const envAt = (i) => {
    const env = { ...env0, t: tr.t[i] };
    for (const n of names) env[n] = tr.q[n][i];
    for (const n of rates) env[n + "'"] = tr.qdot[n][i];
    return withDefs(env);
  };

  // bodies: a disk where a rolling disk sits at the body's mass centre, else the ellipsoid
  const disks = (model.rolling_disks || []).map((d) => ({
    ...d, r: compileExpr(d.radius)(env0), axis: vecOf(d.axis)(env0),
    // a torus (tube_radius rho) is drawn with its own tube: it touches the ground
    rho: d.tube_radius !== undefined ? compileExpr(d.tube_radius)(env0) : 0,
  }));
  const parts = [];
  let size = 0;
  for (const b of model.bodies || []) {
    const disk = disks.find((d) => d.center === b.mass_center);
    const group = new THREE.Group();
    group.matrixAutoUpdate = false;
    let local = I3();
    if (disk) {
      const r = disk.r;
      const torus = Number.isFinite(disk.rho) && disk.rho > 0;
      // a thin disk's tyre lies inside its rim (its outer edge at r, on the ground)
      const tube = torus ? disk.rho : 0.07 * r;
      size = Math.max(size, 2 * (r + (torus ? tube : 0)));
      const tyre = new THREE.Mesh(new THREE.TorusGeometry(torus ? r : r - tube, tube, 24, 96), new THREE.MeshStandardMaterial({ color: 0x2b3440, roughness: 0.7 }));
      const face = new THREE.Mesh(new THREE.CircleGeometry(r, 48), new THREE.MeshStandardMaterial({ color: 0x1f5fa8, transparent: true, opacity: 0.35, side: THREE.DoubleSide }));
      // a spoke, so the spin shows
      const spoke = new THREE.Mesh(new THREE.BoxGeometry(2 * r, 0.06 * r, 0.02 * r), new THREE.MeshStandardMaterial({ color: 0xd55e00 }));
      const q = new THREE.Quaternion().setFromUnitVectors(new THREE.Vector3(0, 0, 1), new THREE.Vector3(...disk.axis).normalize());
      for (const m of [tyre, face, spoke]) { m.quaternion.copy(q); group.add(m); }
    } else {
      const m = compileExpr(b.mass)(env0);
      const I = (b.inertia || I3()).map((row) => row.map((e) => compileExpr(e)(env0)));
      const { values, vectors } = eigSym(I);
      const [A, B, C] = values;
      const semi = [B + C - A, A + C - B, A + B - C].map((v) => Math.sqrt(Math.max(5 * v / (2 * (m || 1)), 0)));
      const big = Math.max(...semi, 1e-3);
      const ax = semi.map((v) => Math.max(v, 0.08 * big));
      size = Math.max(size, 2 * big);
      const mesh = new THREE.Mesh(new THREE.SphereGeometry(1, 32, 16), new THREE.MeshStandardMaterial({ color: 0xcc79a7, roughness: 0.5, transparent: true, opacity: 0.85 }));
      mesh.scale.set(ax[0], ax[1], ax[2]);
      group.add(mesh);
      local = vectors;
    }
    const axes = new THREE.AxesHelper(1);
    axes.matrixAutoUpdate = false;
    scene.add(group, axes);
    parts.push({ b, group, axes, local, wheel: !!disk });
  }
  // the model's points joined to their parents: the skeleton of the mechanism
  // (not a point placed in N from the origin, such as a contact point at (x, y, 0): that
  // "link" is only where the system has got to)
  const links = (model.points || []).filter((pt) => (pt.parent || "O") !== "O" || (pt.frame || "N") !== "N").map((pt) => [pt.parent || "O", pt.name]);
  // where the mechanism is along the run: every point at samples, and how far its
  // linked points reach at one time (the size of a mechanism of points and particles only)
  const stride = Math.max(1, Math.floor(tr.t.length / 600));
  const allLo = new THREE.Vector3(Infinity, Infinity, Infinity), allHi = new THREE.Vector3(-Infinity, -Infinity, -Infinity);
  const linked = [...new Set(links.flat())];
  let reach = 0;
  for (let i = 0; i < tr.t.length; i += stride) {
    const k = kin(envAt(i));
    const lo = new THREE.Vector3(Infinity, Infinity, Infinity), hi = new THREE.Vector3(-Infinity, -Infinity, -Infinity);
    for (const name of (model.points || []).map((pt) => pt.name).concat(linked)) {
      const v = toThree(k.pointP(name));
      if (!Number.isFinite(v.x + v.y + v.z)) continue;
      allLo.min(v); allHi.max(v);
      if (linked.includes(name)) { lo.min(v); hi.max(v); }
    }
    if (Number.isFinite(hi.x - lo.x)) reach = Math.max(reach, hi.x - lo.x, hi.y - lo.y, hi.z - lo.z);
  }
  size = size || reach || 1;
  for (const p of parts) p.axes.matrix.makeScale(0.35 * size, 0.35 * size, 0.35 * size);
  const skeleton = new THREE.LineSegments(new THREE.BufferGeometry(), new THREE.LineBasicMaterial({ color: 0x4a5868 }));
  skeleton.geometry.setAttribute("position", new THREE.Float32BufferAttribute(new Float32Array(6 * Math.max(1, links.length)), 3));
  scene.add(skeleton);
  // point masses as small spheres at their points
  const dots = (model.particles || []).filter((pt) => pt && pt.point).map((pt) => {
    const mesh = new THREE.Mesh(new THREE.SphereGeometry(0.08 * size, 20, 12), new THREE.MeshStandardMaterial({ color: 0x009e73 }));
    scene.add(mesh);
    return { point: pt.point, mesh };
  });

  // the point the camera follows: the first placed in N from the origin (a contact point,
  // a centre); a mechanism hung from the origin (points in turning frames) is not followed.
  // The path drawn is that point's, else the last point's (a pendulum's bob).
  const ground = model.points && model.points.find((p) => (p.parent || "O") === "O" && (p.frame || "N") === "N");
  const traced = ground || (model.points && model.points.length ? model.points[model.points.length - 1] : null);
  const pathPts = [];
  for (let i = 0; i < tr.t.length; i += stride) {
    const v = toThree(traced ? kin(envAt(i)).pointP(traced.name) : [0, 0, 0]);
    if (Number.isFinite(v.x + v.y + v.z)) pathPts.push(v);
  }
  const span = Number.isFinite(allHi.x - allLo.x) ? Math.max(allHi.x - allLo.x, allHi.z - allLo.z, 4 * size) : 4 * size;
  // a ground grid around the system, moved with it by whole cells (so it reads as fixed)
  const cell = size / 2;
  // (made of one-cell segments, not long lines: a line that passes behind the camera is
  // dropped whole by some software renderers)
  const grid = (() => {
    const N = 20, major = [], minor = [];
    for (let i = -N; i <= N; i++) {
      for (let j = -N; j < N; j++) {
        const to = i % 5 === 0 ? major : minor;
        to.push(i * cell, 0, j * cell, i * cell, 0, (j + 1) * cell, j * cell, 0, i * cell, (j + 1) * cell, 0, i * cell);
      }
    }
    const g = new THREE.Group();
    for (const [pts, color] of [[minor, 0xc5cdd6], [major, 0x8a96a3]]) {
      const geo = new THREE.BufferGeometry();
      geo.setAttribute("position", new THREE.Float32BufferAttribute(pts, 3));
      g.add(new THREE.LineSegments(geo, new THREE.LineBasicMaterial({ color })));
    }
    return g;
  })();
  scene.add(grid);
  // the ground: z = 0 of the model, or below everything that hangs under it
  const floor = allLo.y < -1e-9 ? allLo.y - 0.05 * size : 0;
  const path = new THREE.Line(new THREE.BufferGeometry().setFromPoints(pathPts), new THREE.LineBasicMaterial({ color: 0x0072b2 }));
  if (ground) path.position.y = 0.002 * size;
  scene.add(path);

  const camera = new THREE.PerspectiveCamera(40, 1, size / 100, span * 20 + 100 * size);
  const controls = new OrbitControls(camera, canvas);
  controls.enableDamping = false;
  const start = toThree(ground ? kin(envAt(0)).pointP(ground.name) : [0, 0, 0]);
  // looking at the system: above its ground point, or at the middle of where a
  // mechanism hung from the origin goes
  if (ground || !Number.isFinite(allHi.x - allLo.x)) controls.target.copy(start).add(new THREE.Vector3(0, 0.5 * size, 0));
  else controls.target.copy(allLo).add(allHi).multiplyScalar(0.5);
  camera.position.copy(controls.target).add(new THREE.Vector3(2.2 * size, 1.6 * size, 2.6 * size));
  controls.update();
  controls.addEventListener("change", () => renderer.render(scene, camera));

  const mat4 = (R, p) => {
    const A = mul(M, R);
    const m = new THREE.Matrix4();
    m.set(A[0][0], A[0][1], A[0][2], p.x, A[1][0], A[1][1], A[1][2], p.y, A[2][0], A[2][1], A[2][2], p.z, 0, 0, 0, 1);
    return m;
  };
  let followed = start.clone();

  function draw(i) {
    const k = kin(envAt(i));
    for (const part of parts) {
      const R = k.frameR(part.b.frame || "N");
      const p = toThree(k.pointP(part.b.mass_center));
      part.group.matrix.copy(mat4(mul(R, part.local), p));
      // M R M^T in three's axes, then the helper's own scale
      part.axes.matrix.copy(mat4(R, p).multiply(new THREE.Matrix4().makeScale(0.35 * size, 0.35 * size, 0.35 * size)));
      part.group.matrixWorldNeedsUpdate = true;
      part.axes.matrixWorldNeedsUpdate = true;
    }
    for (const d of dots) d.mesh.position.copy(toThree(k.pointP(d.point)));
    const pos = skeleton.geometry.attributes.position;
    links.forEach(([a, b], j) => {
      const A = toThree(k.pointP(a)), B = toThree(k.pointP(b));
      pos.setXYZ(2 * j, A.x, A.y, A.z);
      pos.setXYZ(2 * j + 1, B.x, B.y, B.z);
    });
    pos.needsUpdate = true;
    skeleton.geometry.computeBoundingSphere();
    // the camera follows the system along its path
    const now = toThree(ground ? k.pointP(ground.name) : [0, 0, 0]);
    const d = now.clone().sub(followed);
    camera.position.add(d);
    controls.target.add(d);
    followed = now;
    grid.position.set(Math.round(now.x / (5 * cell)) * 5 * cell, floor, Math.round(now.z / (5 * cell)) * 5 * cell);
    controls.update();
    renderer.render(scene, camera);
  }

  function resize() {
    const w = Math.max(280, host.clientWidth || 600), h = Math.round(Math.min(460, Math.max(260, w * 0.62)));
    renderer.setSize(w, h, true);
    camera.aspect = w / h;
    camera.updateProjectionMatrix();
    renderer.render(scene, camera);
  }
  resize();

  function dispose() {
    controls.dispose();
    scene.traverse((o) => { if (o.geometry) o.geometry.dispose(); if (o.material) o.material.dispose(); });
    renderer.dispose();
    host.replaceChildren();
  }
  /** The lowest point of the wheels drawn (three's y, the ground at 0), or NaN. */
  function wheelsLowest() {
    let low = Infinity;
    for (const part of parts) if (part.wheel) { part.group.updateMatrixWorld(true); low = Math.min(low, new THREE.Box3().setFromObject(part.group.children[0], true).min.y); }
    return Number.isFinite(low) ? low : NaN;
  }
  return { draw, resize, dispose, canvas, size, wheelsLowest };
}
