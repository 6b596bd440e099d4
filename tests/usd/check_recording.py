#!/usr/bin/env python3
"""Checks `clothcast watch --record DIR --usd` with Pixar's USD library (usd-core).

Usage: check_recording.py DIR ID [FPS]

For the take DIR/ID.usda: USD's validators report nothing; the stage is Y up,
in metres, at FPS (default 30) time codes per second, with one time code per PC2
sample; the garment's points at every time code are the PC2's sample (the recording's
own floats, within the layer's 10 µm); the body is a UsdSkel skinned mesh whose
skeleton is animated, and at several time codes the skinned body that USD computes
lies under the garment (the garment's vertices within a few centimetres of the
body's: a wrong bind, rest transform, joint order or quaternion order puts them
decimetres to metres apart). Exits non-zero with the reason on the first failure.
"""
import sys

from pxr import Usd, UsdGeom, UsdSkel, Vt

import pc2


def fail(msg):
    print(f"check_recording: {msg}", file=sys.stderr)
    sys.exit(1)


def read_pc2(path):
    try:
        return pc2.read_pc2(path)
    except ValueError as e:
        fail(str(e))


def validate(stage, path):
    """What USD's validators (every registered one: stage metadata, UsdGeom, UsdSkel
    bindings, composition, attribute types, ...) report; the compliance checker of
    releases before UsdValidation where it is missing."""
    try:
        from pxr import UsdValidation
    except ImportError:
        from pxr import UsdUtils

        checker = UsdUtils.ComplianceChecker(skipARKitRootLayerCheck=True)
        checker.CheckCompliance(path)
        return list(checker.GetErrors()) + list(checker.GetFailedChecks())
    validators = UsdValidation.ValidationRegistry().GetOrLoadAllValidators()
    if len(validators) < 10:
        fail(f"only {len(validators)} USD validators loaded")
    errors = UsdValidation.ValidationContext(validators).Validate(stage)
    return [f"{e.GetName()}: {e.GetMessage()}" for e in errors]


def nearest(points, cloud):
    """Distance from each point to the nearest point of cloud (brute force)."""
    out = []
    for p in points:
        best = min((p[0] - q[0]) ** 2 + (p[1] - q[1]) ** 2 + (p[2] - q[2]) ** 2 for q in cloud)
        out.append(best ** 0.5)
    return out


def main():
    if len(sys.argv) < 3:
        fail("usage: check_recording.py DIR ID [FPS]")
    d, ident = sys.argv[1], sys.argv[2]
    fps = float(sys.argv[3]) if len(sys.argv) > 3 else 30.0
    path = f"{d}/{ident}.usda"

    stage = Usd.Stage.Open(path)
    if stage is None:
        fail(f"{path}: USD cannot open it")
    problems = validate(stage, path)
    if problems:
        fail(f"{path}: USD's validators say: {problems}")
    if UsdGeom.GetStageUpAxis(stage) != UsdGeom.Tokens.y or UsdGeom.GetStageMetersPerUnit(stage) != 1.0:
        fail("the stage is not Y up in metres")
    if stage.GetTimeCodesPerSecond() != fps or stage.GetFramesPerSecond() != fps:
        fail(f"time codes per second {stage.GetTimeCodesPerSecond()}, not {fps}")
    samples = read_pc2(f"{d}/{ident}.garment.pc2")
    if stage.GetStartTimeCode() != 0 or stage.GetEndTimeCode() != len(samples) - 1:
        fail(f"time codes {stage.GetStartTimeCode()}..{stage.GetEndTimeCode()} for {len(samples)} samples")

    garment = UsdGeom.Mesh(stage.GetPrimAtPath("/take/garment"))
    if not garment:
        fail("no /take/garment mesh")
    attr = garment.GetPointsAttr()
    if attr.GetNumTimeSamples() != len(samples):
        fail(f"{attr.GetNumTimeSamples()} garment time samples for {len(samples)} PC2 samples")
    for k, s in enumerate(samples):
        pts = attr.Get(k)
        if len(pts) * 3 != len(s):
            fail(f"time code {k}: {len(pts)} points, the PC2 has {len(s) // 3}")
        worst = max(abs(pts[i][a] - s[3 * i + a]) for i in range(len(pts)) for a in range(3))
        if worst > 1e-5:
            fail(f"time code {k}: the garment is {worst} m off the PC2 sample")
    moved = max(abs(a - b) for a, b in zip(samples[0], samples[-1]))
    if moved < 0.02:
        fail("the recorded garment does not move")

    root = UsdSkel.Root(stage.GetPrimAtPath("/take/body"))
    if not root:
        fail("no /take/body SkelRoot")
    cache = UsdSkel.Cache()
    cache.Populate(root, Usd.PrimDefaultPredicate)
    skel = UsdSkel.Skeleton(stage.GetPrimAtPath("/take/body/skeleton"))
    query = cache.GetSkelQuery(skel)
    if not query or not query.GetAnimQuery():
        fail("the skeleton has no animation")
    joints = query.GetJointOrder()
    if len(joints) != 22 or joints[0] != "pelvis":
        fail(f"joints {list(joints)[:3]}…: not the canonical 22 from the pelvis")
    mesh_prim = stage.GetPrimAtPath("/take/body/mesh")
    skinning = cache.GetSkinningQuery(mesh_prim)
    if not skinning:
        fail("the body mesh is not bound to the skeleton")
    rest = UsdGeom.Mesh(mesh_prim).GetPointsAttr().Get()
    times = query.GetAnimQuery().GetJointTransformTimeSamples()
    if len(times) * 10 < len(samples) * 9:
        fail(f"{len(times)} body keys for {len(samples)} samples")
    for t in [times[0], times[len(times) // 2], times[-1]]:
        xf = query.ComputeSkinningTransforms(t)
        posed = Vt.Vec3fArray(rest)
        if not skinning.ComputeSkinnedPoints(xf, posed, t):
            fail(f"time code {t}: USD could not skin the body")
        g = attr.Get(t)
        step = max(1, len(g) // 150)
        d = sorted(nearest([g[i] for i in range(0, len(g), step)], posed))
        median, worst = d[len(d) // 2], d[-1]
        if median > 0.04 or worst > 0.15:
            fail(f"time code {t}: the garment is {median:.3f} m (median) / {worst:.3f} m (worst) from the skinned body")
        print(f"time code {t}: garment to skinned body median {median * 100:.1f} cm, worst {worst * 100:.1f} cm")
    print(f"{path}: ok ({len(samples)} samples, {len(times)} body keys)")


main()
