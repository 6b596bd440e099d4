#!/usr/bin/env python3
"""Opens a `clothcast watch --record DIR --usd` take in Blender (the `bpy` module, which
is Blender built as a Python module) by the import paths the README describes, and
checks what Blender shows.

Usage: check_blender.py DIR ID [FPS] [--cut-short] [--without-usd]
   or: blender -b --python check_blender.py -- DIR ID [FPS] [--cut-short] [--without-usd]

(--without-usd skips 1, for Blender builds without USD such as Debian's.)

1. USD: `DIR/ID.usda` through Blender's own USD importer. The scene's frame range and
   rate are the take's; at several frames the garment Blender evaluates (its points
   come from the layer's time samples) is the PC2 sample of that frame turned into
   Blender's Z-up frame; the body is a mesh deformed by an armature of the canonical
   22 bones with an action, and the body Blender poses at those frames lies under the
   garment.
2. PC2 + OBJ + glTF: `ID.garment.obj` imported with the importer's defaults, given a
   Mesh Cache modifier (PC2, its default axes) reading `ID.garment.pc2`, and
   `ID.body.glb` through the glTF importer with the scene at FPS: the same checks.
3. BVH: `ID.body.bvh` through the BVH importer with its defaults: its joints are the
   glTF body's at every checked frame (one scene frame later: the importer starts a
   BVH at frame 1).
4. The add-on `clients/blender/clothcast_import.py`: its one operator sets the frame
   rate and range and imports the take, which passes the checks of 2; for a take cut
   short (no glTF), its BVH skeleton's joints are the glTF body's at the same frames.

With --cut-short, for a take whose recording was killed (its glTF holds the body at
rest, there is no USD): the add-on deforms that body with the BVH skeleton, and it
lies under the garment at the first, middle and last frames.

Exits non-zero with the reason on the first failure.
"""
import math
import os
import shutil
import statistics
import sys

import bpy
from mathutils import Vector
from mathutils.kdtree import KDTree

# Blender's own Python does not put the script's folder on the path
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pc2  # noqa: E402


def leave(code):
    """Exits at once: after Blender's glTF importer has run, the `bpy` module (4.2)
    crashes in the interpreter's teardown, so the verdict is the exit code given here,
    with the output flushed first. The session's temporary folder, which that teardown
    would remove, is removed here."""
    sys.stdout.flush()
    sys.stderr.flush()
    tmp = os.path.normpath(bpy.app.tempdir)
    if os.path.basename(tmp).startswith("blender_"):
        shutil.rmtree(tmp, ignore_errors=True)
    os._exit(code)


def fail(msg):
    print(f"check_blender: {msg}", file=sys.stderr)
    leave(1)


def read_pc2(path):
    try:
        return pc2.read_pc2(path)
    except ValueError as e:
        fail(str(e))


def z_up(xyz):
    """A Y-up point (clothcast, USD's stage, the PC2) in Blender's Z-up world: the
    conversion Blender's importers apply (+Y up becomes +Z up, +Z forward becomes −Y)."""
    return Vector((xyz[0], -xyz[2], xyz[1]))


def evaluated_world(obj):
    """The object's vertices as Blender evaluates them this frame (modifiers, armature
    and caches applied), in world coordinates."""
    dg = bpy.context.evaluated_depsgraph_get()
    ev = obj.evaluated_get(dg)
    mesh = ev.to_mesh()
    out = [ev.matrix_world @ v.co for v in mesh.vertices]
    ev.to_mesh_clear()
    return out


def reset():
    bpy.ops.wm.read_factory_settings(use_empty=True)


def meshes():
    return [o for o in bpy.context.scene.objects if o.type == "MESH"]


def sample_gap(points, sample):
    """The largest distance between Blender world points and a Y-up sample (flat x, y,
    z) turned Z up, metres."""
    return max((p - z_up(sample[3 * i:3 * i + 3])).length for i, p in enumerate(points))


def body_gap(garment, body):
    """Median and largest distance from each garment point to its nearest body point."""
    tree = KDTree(len(body))
    for i, p in enumerate(body):
        tree.insert(p, i)
    tree.balance()
    d = sorted(tree.find(p)[2] for p in garment)
    return statistics.median(d), d[-1]


def check_frames(label, garment, body, samples, frames):
    """At each frame: the garment Blender shows is the PC2 sample (converted to Z up),
    and the body Blender poses lies under it."""
    scene = bpy.context.scene
    for f in frames:
        scene.frame_set(f)
        g = evaluated_world(garment)
        s = samples[f]
        if len(g) * 3 != len(s):
            fail(f"{label}: frame {f}: {len(g)} garment vertices, the PC2 has {len(s) // 3}")
        off = sample_gap(g, s)
        if off > 1e-4:
            fail(f"{label}: frame {f}: the garment is {off * 1000:.2f} mm off the PC2 sample")
        median, worst = body_gap(g, evaluated_world(body))
        print(
            f"{label}: frame {f}: garment = PC2 sample within {off * 1000:.3f} mm; "
            f"garment to posed body median {median * 100:.1f} cm, worst {worst * 100:.1f} cm"
        )
        if median > 0.04 or worst > 0.15:
            fail(f"{label}: frame {f}: the garment is {median:.3f} m (median) / {worst:.3f} m (worst) from the posed body")


def deformed_by_armature(label, obj):
    arm = [m for m in obj.modifiers if m.type == "ARMATURE" and m.object is not None]
    if not arm:
        fail(f"{label}: the body has no armature modifier")
    rig = arm[0].object
    if len(rig.data.bones) != 22:
        fail(f"{label}: the armature has {len(rig.data.bones)} bones, not the canonical 22")
    if rig.animation_data is None or rig.animation_data.action is None:
        fail(f"{label}: the armature has no action")
    return rig


def check_usd(d, ident, fps, samples, frames):
    reset()
    bpy.ops.wm.usd_import(filepath=f"{d}/{ident}.usda", set_frame_range=True)
    scene = bpy.context.scene
    if (scene.frame_start, scene.frame_end) != (0, len(samples) - 1):
        fail(f"usd: frames {scene.frame_start}..{scene.frame_end} for {len(samples)} samples")
    # Blender's USD importer leaves the scene's frame rate alone (4.2): the user sets
    # it to the take's, as for the other import path
    scene.render.fps, scene.render.fps_base = round(fps), 1.0
    by_name = {o.name: o for o in meshes()}
    garment, body = by_name.get("garment"), by_name.get("mesh")
    if garment is None or body is None:
        fail(f"usd: mesh objects {sorted(by_name)}, expected 'garment' and the body's 'mesh'")
    if not any(m.type == "MESH_SEQUENCE_CACHE" for m in garment.modifiers):
        fail("usd: the garment's points are not read from the layer's time samples")
    deformed_by_armature("usd", body)
    check_frames("usd", garment, body, samples, frames)


def check_pc2_obj_gltf(d, ident, fps, samples, frames):
    reset()
    scene = bpy.context.scene
    scene.render.fps, scene.render.fps_base = round(fps), 1.0
    scene.frame_start, scene.frame_end = 0, len(samples) - 1
    bpy.ops.wm.obj_import(filepath=f"{d}/{ident}.garment.obj")
    objs = meshes()
    if len(objs) != 1:
        fail(f"obj: {len(objs)} meshes imported")
    garment = objs[0]
    cache = garment.modifiers.new("cache", "MESH_CACHE")
    cache.cache_format = "PC2"
    cache.filepath = f"{d}/{ident}.garment.pc2"
    bpy.ops.import_scene.gltf(filepath=f"{d}/{ident}.body.glb")
    # the importer also makes an icosphere for its bone display shapes
    body = [o for o in meshes() if o is not garment and any(m.type == "ARMATURE" for m in o.modifiers)]
    if len(body) != 1:
        fail(f"gltf: body meshes {[o.name for o in body]} imported, expected one")
    rig = deformed_by_armature("gltf", body[0])
    check_frames("obj+pc2+gltf", garment, body[0], samples, frames)
    check_bvh(d, ident, rig, frames)


def joint_gap(a, b, a_frame, b_frame):
    """The largest distance between a joint of armature `a` at scene frame `a_frame`
    and the joint of the same name of armature `b` at `b_frame` (world, metres)."""
    scene = bpy.context.scene
    scene.frame_set(a_frame)
    heads = {j.name: a.matrix_world @ j.head for j in a.pose.bones}
    scene.frame_set(b_frame)
    return max((heads[j.name] - b.matrix_world @ j.head).length for j in b.pose.bones)


def addon():
    """The add-on `clients/blender/clothcast_import.py`, imported and registered once."""
    if "clothcast_import" not in sys.modules:
        here = os.path.dirname(os.path.abspath(__file__))
        sys.path.insert(0, os.path.join(here, "..", "..", "clients", "blender"))
        import clothcast_import

        clothcast_import.register()
    return sys.modules["clothcast_import"]


def check_bvh(d, ident, rig, frames):
    """`ID.body.bvh` through Blender's BVH importer: an armature of the same 22 joints
    whose joints are where the glTF body's are, one frame later (the importer puts a
    BVH's first frame at scene frame 1 at the earliest)."""
    scene = bpy.context.scene
    before = set(scene.objects)
    bpy.ops.import_anim.bvh(filepath=f"{d}/{ident}.body.bvh", update_scene_fps=False, update_scene_duration=False)
    new = [o for o in scene.objects if o not in before and o.type == "ARMATURE"]
    if len(new) != 1:
        fail(f"bvh: {len(new)} armatures imported")
    bvh = new[0]
    names = sorted(b.name for b in bvh.pose.bones)
    if names != sorted(b.name for b in rig.pose.bones):
        fail(f"bvh: joints {names} are not the glTF body's")
    for f in frames:
        off = joint_gap(bvh, rig, f + 1, f)
        print(f"bvh: frame {f}: joints within {off * 1000:.3f} mm of the glTF body's")
        if off > 1e-4:
            fail(f"bvh: frame {f}: a joint is {off * 1000:.2f} mm from the glTF body's")


def check_addon(d, ident, fps, samples, frames):
    """The add-on `clients/blender/clothcast_import.py`: one operator call sets the
    scene and the take up; with the glTF gone (a take cut short), the body is the BVH
    skeleton, its joints where the glTF body's are at the same frames."""
    import shutil
    import tempfile

    addon()
    reset()
    if bpy.ops.import_scene.clothcast_take(filepath=f"{d}/{ident}.garment.pc2") != {"FINISHED"}:
        fail("add-on: the import failed")
    scene = bpy.context.scene
    if (scene.frame_start, scene.frame_end) != (0, len(samples) - 1):
        fail(f"add-on: frames {scene.frame_start}..{scene.frame_end} for {len(samples)} samples")
    rate = scene.render.fps / scene.render.fps_base
    if abs(rate - fps) > 1e-3:
        fail(f"add-on: the scene runs at {rate} fps, not {fps}")
    objs = {o.name: o for o in scene.objects}
    garment, body = objs.get(f"{ident} garment"), objs.get(f"{ident} body")
    if garment is None or body is None or ident not in bpy.data.collections:
        fail(f"add-on: objects {sorted(objs)}")
    check_frames("add-on", garment, body, samples, frames)

    # a take cut short: no glTF, no USD
    cut = tempfile.mkdtemp()
    for ext in ("garment.pc2", "garment.obj", "body.bvh"):
        shutil.copy(f"{d}/{ident}.{ext}", cut)
    reset()
    if bpy.ops.import_scene.clothcast_take(filepath=f"{cut}/{ident}.body.bvh") != {"FINISHED"}:
        fail("add-on: the import of a take without its glTF failed")
    scene = bpy.context.scene
    skeleton = bpy.data.objects.get(f"{ident} skeleton")
    if skeleton is None or skeleton.type != "ARMATURE":
        fail("add-on: no BVH skeleton for a take without its glTF")
    before = set(scene.objects)
    bpy.ops.import_scene.gltf(filepath=f"{d}/{ident}.body.glb")
    rig = [o for o in scene.objects if o not in before and o.type == "ARMATURE"][0]
    for f in frames:
        off = joint_gap(skeleton, rig, f, f)
        print(f"add-on, BVH body: frame {f}: joints within {off * 1000:.3f} mm of the glTF body's")
        if off > 1e-4:
            fail(f"add-on, BVH body: frame {f}: a joint is {off * 1000:.2f} mm from the glTF body's")
    shutil.rmtree(cut)

    # every take of the folder at once, a collection each; a file of no take is refused
    reset()
    takes = sorted(n[: -len(".garment.pc2")] for n in os.listdir(d) if n.endswith(".garment.pc2"))
    bpy.ops.import_scene.clothcast_take(filepath=f"{d}/{ident}.garment.obj", all_takes=True)
    # (the glTF importer adds a collection of its own for its bone shapes)
    got = sorted(c.name for c in bpy.data.collections if f"{c.name} garment" in c.objects)
    if got != takes:
        fail(f"add-on: every take of the folder gave collections {got}, not {takes}")
    try:
        result = bpy.ops.import_scene.clothcast_take(filepath=f"{d}/notes.txt")
    except RuntimeError as e:
        result = str(e)
    if "is not a file of a take" not in str(result):
        fail(f"add-on: a file of no take gave {result}")
    print(f"add-on: {len(takes)} takes of the folder imported at once; a file of no take refused")


def bvh_joints(path, frame):
    """World joint positions (Y up, the file's units) at `frame` of a BVH as clothcast
    writes it, by reading it here: each joint's channels composed in their order."""
    from mathutils import Matrix

    tokens = open(path).read().split()
    joints, stack, i, order = {}, [], 0, []
    while tokens[i] != "MOTION":
        t = tokens[i]
        if t in ("ROOT", "JOINT"):
            name = tokens[i + 1]
            joints[name] = {"parent": stack[-1] if stack else None}
            order.append(name)
            stack.append(name)
            i += 2
        elif t == "End":
            stack.append(None)
            i += 2
        elif t == "OFFSET":
            if stack[-1] is not None:
                joints[stack[-1]]["offset"] = Vector([float(x) for x in tokens[i + 1:i + 4]])
            i += 4
        elif t == "CHANNELS":
            n = int(tokens[i + 1])
            joints[stack[-1]]["channels"] = tokens[i + 2:i + 2 + n]
            i += 2 + n
        elif t == "}":
            stack.pop()
            i += 1
        else:
            i += 1
    width = sum(len(joints[n]["channels"]) for n in order)
    start = tokens.index("Time:", i) + 2
    values = [float(x) for x in tokens[start + frame * width:start + (frame + 1) * width]]
    world, k = {}, 0
    for name in order:
        j = joints[name]
        rot, at = Matrix.Identity(3), j["offset"].copy()
        for c in j["channels"]:
            v = values[k]
            k += 1
            if c.endswith("position"):
                at["XYZ".index(c[0])] += v
            else:
                rot = rot @ Matrix.Rotation(math.radians(v), 3, c[0])
        if j["parent"] is None:
            world[name] = (rot, at)
        else:
            prot, pat = world[j["parent"]]
            world[name] = (prot @ rot, pat + prot @ at)
    return {n: world[n][1] for n in order}


def check_cut_short(d, ident, fps, samples, frames):
    """A take whose recording was killed (no USD, the glTF holding the body at rest
    only): the add-on deforms that body with the BVH skeleton, and it lies under the
    garment at every checked frame."""
    clothcast_import = addon()
    if os.path.exists(f"{d}/{ident}.usda"):
        fail("cut short: the take has its USD layer (was it killed?)")
    reset()
    bpy.ops.import_scene.gltf(filepath=f"{d}/{ident}.body.glb")
    rigs = [o for o in bpy.context.scene.objects if o.type == "ARMATURE"]
    if len(rigs) != 1 or clothcast_import.has_action(rigs[0]):
        fail("cut short: the glTF should hold one skeleton at rest, without an animation")
    reset()
    if bpy.ops.import_scene.clothcast_take(filepath=f"{d}/{ident}.garment.pc2") != {"FINISHED"}:
        fail("cut short: the add-on's import failed")
    objs = {o.name: o for o in bpy.context.scene.objects}
    garment, body, skeleton = (objs.get(f"{ident} {k}") for k in ("garment", "body", "skeleton"))
    if garment is None or body is None or skeleton is None:
        fail(f"cut short: objects {sorted(objs)}")
    if [m.object for m in body.modifiers if m.type == "ARMATURE"] != [skeleton]:
        fail("cut short: the body is not deformed by the BVH skeleton")
    for f in frames:
        bpy.context.scene.frame_set(f)
        want = bvh_joints(f"{d}/{ident}.body.bvh", f)
        off = max((skeleton.matrix_world @ skeleton.pose.bones[n].head - z_up(p)).length for n, p in want.items())
        print(f"cut short: frame {f}: the skeleton's joints within {off * 1000:.3f} mm of the BVH's frame {f}")
        if off > 1e-4:
            fail(f"cut short: frame {f}: a joint of the skeleton is {off * 1000:.2f} mm from the BVH's frame {f}")
    check_frames("cut short", garment, body, samples, frames)


def main():
    # as a module (python3 check_blender.py ARGS) or in Blender (blender -b --python
    # check_blender.py -- ARGS)
    argv = sys.argv[sys.argv.index("--") + 1:] if "--" in sys.argv else sys.argv[1:]
    flags = {"--cut-short", "--without-usd"}
    args = [a for a in argv if a not in flags]
    if len(args) < 2:
        fail("usage: check_blender.py DIR ID [FPS] [--cut-short] [--without-usd]")
    cut_short = "--cut-short" in argv
    d, ident = args[0], args[1]
    fps = float(args[2]) if len(args) > 2 else 30.0
    samples = read_pc2(f"{d}/{ident}.garment.pc2")
    if len(samples) < 3:
        fail(f"only {len(samples)} samples")
    frames = [0, len(samples) // 2, len(samples) - 1]
    print(f"Blender {bpy.app.version_string}")
    if cut_short:
        # killed between writing one file's frame and the next's, the files may end a
        # frame apart: check the frames all of them have
        with open(f"{d}/{ident}.body.bvh") as f:
            tokens = f.read().split()
        n = min(len(samples), int(tokens[tokens.index("Frames:") + 1]))
        frames = [0, n // 2, n - 1]
        check_cut_short(d, ident, fps, samples, frames)
        print(f"{d}/{ident} (cut short): ok in Blender {bpy.app.version_string} ({len(samples)} samples)")
        leave(0)
    if "--without-usd" in argv:
        print("USD import skipped (--without-usd)")
    else:
        check_usd(d, ident, fps, samples, frames)
    check_pc2_obj_gltf(d, ident, fps, samples, frames)
    check_addon(d, ident, fps, samples, frames)
    print(f"{d}/{ident}: ok in Blender {bpy.app.version_string} ({len(samples)} samples)")
    leave(0)


# run as a script (by Python, or by `blender -b --python`); imported, it lends its helpers
# (the live link's check, clients/python/tests/blender_live.py)
if __name__ == "__main__":
    main()
