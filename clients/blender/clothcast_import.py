# clothcast take importer for Blender: File > Import > clothcast take.
#
# Sets a whole take of `clothcast watch --record DIR` up in one step: the scene's frame
# rate and range, the garment (its OBJ driven by its PC2 point cache through a Mesh
# Cache modifier) and the body (the skinned glTF body; for a take cut short, whose glTF
# holds the body at rest only, that body deformed by the BVH skeleton), each take in a
# collection of its own.
#
# Install: Edit > Preferences > Add-ons > Install... (from Blender 4.2: Install from
# Disk... in the page's v menu) and pick this file (Blender 3.4+,
# checked with 4.2, 4.5 and 5.0), or run it from Blender's text editor; or, from
# Blender 4.2, as an extension: the zip clients/blender/build_extensions.py makes,
# installed by Get Extensions > (the v menu) Install from Disk...
#
# The recording's conventions (README, "Recording a session"): sample k of the PC2 is
# tick k of the take, the glTF body's key k is at k / tick rate seconds, and the BVH
# has a frame per sample. Blender's importers need three adjustments, made here: the
# scene's frame rate is set to the tick rate before the glTF is read (its keys are
# placed by the scene's rate), the BVH importer starts a file at frame 1 at the
# earliest (its action is moved back one frame), and the PC2 cache reads sample k at
# scene frame k (its start frame 0).

import os
import re
import struct

import bpy
from mathutils import Matrix
from bpy.props import BoolProperty, FloatProperty, StringProperty
from bpy_extras.io_utils import ImportHelper

bl_info = {
    "name": "clothcast take",
    "author": "clothcast",
    "version": (1, 0, 0),
    "blender": (3, 4, 0),
    "location": "File > Import > clothcast take",
    "description": "Import a take recorded by `clothcast watch --record`",
    "category": "Import-Export",
}

SUFFIXES = (".garment.pc2", ".garment.obj", ".body.glb", ".body.bvh", ".timing.csv", ".usda")


class TakeError(Exception):
    """A take's files are missing or unreadable; the message says which."""


def take_stem(path):
    """The take's path without its suffix (`DIR/ID` of `DIR/ID.garment.pc2`)."""
    for s in SUFFIXES:
        if path.endswith(s):
            return path[: -len(s)]
    raise TakeError(f"{os.path.basename(path)} is not a file of a take (its name ends in none of {', '.join(SUFFIXES)})")


def pc2_samples(path):
    """Points and samples of a PC2 file, from its header."""
    with open(path, "rb") as f:
        head = f.read(32)
    if len(head) < 32:
        raise TakeError(f"{path}: shorter than a PC2 header")
    magic, version, points, _start, _rate, samples = struct.unpack("<12siiffi", head)
    if magic != b"POINTCACHE2\0" or version != 1:
        raise TakeError(f"{path}: not a PC2 point cache")
    if points <= 0 or samples <= 0:
        raise TakeError(f"{path}: {points} points, {samples} samples")
    return points, samples


def bvh_rate(path):
    """Frames per second of a BVH file (its `Frame Time`), or None."""
    try:
        with open(path, "r", encoding="ascii", errors="replace") as f:
            for line in f:
                m = re.match(r"\s*Frame Time:\s*([0-9.eE+-]+)", line)
                if m:
                    t = float(m.group(1))
                    return 1.0 / t if t > 0 else None
    except OSError:
        return None
    return None


def take_stems(directory):
    """Every take in a directory: the stems that have a garment cache."""
    return sorted(
        os.path.join(directory, n[: -len(".garment.pc2")])
        for n in os.listdir(directory)
        if n.endswith(".garment.pc2")
    )


def new_objects(before):
    return [o for o in bpy.context.scene.objects if o not in before]


def link_to(collection, objects):
    for o in objects:
        for c in list(o.users_collection):
            c.objects.unlink(o)
        collection.objects.link(o)


def why_failed(e):
    """The line of an importer's traceback that names the error."""
    lines = str(e).strip().splitlines() or ["?"]
    return next((ln for ln in reversed(lines) if "Error" in ln), lines[-1]).strip()[:200]


def has_action(obj):
    return obj.animation_data is not None and obj.animation_data.action is not None


def fcurves_of(obj):
    """The F-curves that animate `obj` in its action (on Blender 4.4 and later, with
    slotted actions, those of the slot it uses: 5.0 removed `Action.fcurves`); empty
    without an action."""
    if not has_action(obj):
        return []
    anim = obj.animation_data
    if not hasattr(anim.action, "slots"):
        return list(anim.action.fcurves)
    from bpy_extras import anim_utils

    bag = anim_utils.action_get_channelbag_for_slot(anim.action, anim.action_slot)
    return list(bag.fcurves) if bag is not None else []


def import_bvh(bvh, name, warn=print):
    """The BVH skeleton, its action moved back one frame (the importer starts at frame
    1; sample k belongs at frame k); returns the new objects."""
    scene = bpy.context.scene
    before = set(scene.objects)
    try:
        bpy.ops.import_anim.bvh(filepath=bvh, update_scene_fps=False, update_scene_duration=False)
    except RuntimeError as e:
        # e.g. Debian 12's Blender 3.4, whose BVH add-on opens files in mode "rU",
        # which its Python 3.11 no longer has
        warn(f"clothcast take {name}: the BVH importer failed ({why_failed(e)}); no skeleton")
        for o in new_objects(before):
            bpy.data.objects.remove(o)
        return []
    added = new_objects(before)
    for o in added:
        if o.type == "ARMATURE":
            o.name = f"{name} skeleton"
            for fc in fcurves_of(o):
                for k in fc.keyframe_points:
                    k.co.x -= 1.0
                    k.handle_left.x -= 1.0
                    k.handle_right.x -= 1.0
    return added


def import_body(stem, name, collection, warn=print):
    """The body: the glTF (skinned and animated); for a take cut short, whose glTF
    holds the body at rest only, that mesh deformed by the BVH skeleton; without a
    glTF, or where Blender's glTF importer fails, the BVH skeleton alone."""
    scene = bpy.context.scene
    glb, bvh = stem + ".body.glb", stem + ".body.bvh"
    if not os.path.exists(glb):
        if os.path.exists(bvh):
            link_to(collection, import_bvh(bvh, name, warn))
        return
    before = set(scene.objects)
    try:
        bpy.ops.import_scene.gltf(filepath=glb)
    except RuntimeError as e:
        # e.g. Debian 12's Blender 3.4, whose glTF add-on fails on its NumPy
        # (`np.bool`): the motion is still in the BVH
        for o in new_objects(before):
            bpy.data.objects.remove(o)
        warn(f"clothcast take {name}: the glTF importer failed ({why_failed(e)}); the body is the BVH skeleton alone")
        if os.path.exists(bvh):
            link_to(collection, import_bvh(bvh, name, warn))
        return
    added = new_objects(before)
    mesh, rig = None, None
    for o in added:
        if o.type == "MESH" and any(m.type == "ARMATURE" for m in o.modifiers):
            mesh = o
            mesh.name = f"{name} body"
        elif o.type == "ARMATURE":
            rig = o
            rig.name = f"{name} skeleton"
    if mesh is not None and rig is not None and not has_action(rig) and os.path.exists(bvh):
        # cut short: the BVH poses the rest mesh. Its skeleton's root rests at the
        # origin, the mesh's at the pelvis: move the mesh down by the pelvis so that
        # it lies on the BVH's rest skeleton, and let that skeleton deform it (the
        # vertex groups are named by joint, as the BVH's bones)
        root = rig.pose.bones.get("pelvis") or rig.pose.bones[0]
        pelvis = rig.matrix_world @ root.head
        world = mesh.matrix_world.copy()
        mesh.parent = None
        mesh.matrix_world = Matrix.Translation(-pelvis) @ world
        added = [o for o in added if o is not rig]
        bpy.data.objects.remove(rig)
        skeleton = [o for o in import_bvh(bvh, name, warn) if o.type == "ARMATURE"]
        for m in mesh.modifiers:
            if m.type == "ARMATURE":
                m.object = skeleton[0] if skeleton else None
        added += skeleton
    link_to(collection, added)


def import_take(stem, fps=0.0, body=True, warn=print):
    """Imports the take at `stem` (`DIR/ID`) into a new collection named after it;
    returns the collection and the take's number of frames. Sets the scene's frame rate
    to `fps`, the tick rate (0: the BVH's, else 30). `warn` is told of a part that
    could not be imported (an importer of this Blender that fails)."""
    scene = bpy.context.scene
    name = os.path.basename(stem)
    pc2, obj = stem + ".garment.pc2", stem + ".garment.obj"
    for p in (pc2, obj):
        if not os.path.exists(p):
            raise TakeError(f"{name}: {os.path.basename(p)} is missing")
    _points, samples = pc2_samples(pc2)
    rate = fps or bvh_rate(stem + ".body.bvh") or 30.0
    if abs(rate - round(rate)) < 1e-3:
        # the BVH's frame time is printed to 8 decimals: 0.03333334 s is 30 fps
        rate = float(round(rate))
    scene.render.fps, scene.render.fps_base = max(1, round(rate)), max(1, round(rate)) / rate

    collection = bpy.data.collections.new(name)
    scene.collection.children.link(collection)

    before = set(scene.objects)
    bpy.ops.wm.obj_import(filepath=obj)
    meshes = [o for o in new_objects(before) if o.type == "MESH"]
    if len(meshes) != 1:
        raise TakeError(f"{name}: the OBJ gave {len(meshes)} meshes")
    garment = meshes[0]
    garment.name = f"{name} garment"
    cache = garment.modifiers.new("clothcast cache", "MESH_CACHE")
    cache.cache_format = "PC2"
    cache.filepath = pc2
    cache.frame_start = 0.0
    link_to(collection, [garment])

    if body:
        import_body(stem, name, collection, warn)
    return collection, samples


class ImportClothcastTake(bpy.types.Operator, ImportHelper):
    """Import a take recorded by `clothcast watch --record` (garment cache and body)"""

    bl_idname = "import_scene.clothcast_take"
    bl_label = "Import clothcast take"
    bl_options = {"REGISTER", "UNDO"}

    filename_ext = ".pc2"
    filter_glob: StringProperty(default="*.pc2;*.obj;*.glb;*.bvh;*.csv;*.usda", options={"HIDDEN"})
    fps: FloatProperty(
        name="Tick rate",
        description="The server's tick rate, frames per second (0: read from the take's BVH, else 30)",
        default=0.0,
        min=0.0,
        max=1000.0,
    )
    all_takes: BoolProperty(
        name="Every take in the folder",
        description="Import every take recorded in the chosen file's folder",
        default=False,
    )
    body: BoolProperty(name="Body", description="Import the body (glTF, or the BVH skeleton)", default=True)

    def execute(self, context):
        try:
            stems = (
                take_stems(os.path.dirname(self.filepath))
                if self.all_takes
                else [take_stem(self.filepath)]
            )
            if not stems:
                raise TakeError("no take (no .garment.pc2) in the folder")
            warn = lambda message: self.report({"WARNING"}, message)  # noqa: E731
            frames = max(import_take(stem, fps=self.fps, body=self.body, warn=warn)[1] for stem in stems)
            context.scene.frame_start, context.scene.frame_end = 0, frames - 1
        except (TakeError, OSError, RuntimeError) as e:
            self.report({"ERROR"}, str(e))
            return {"CANCELLED"}
        self.report({"INFO"}, f"imported {len(stems)} take(s)")
        return {"FINISHED"}


def menu_func_import(self, context):
    self.layout.operator(ImportClothcastTake.bl_idname, text="clothcast take (.pc2 + .obj + .glb/.bvh)")


def register():
    bpy.utils.register_class(ImportClothcastTake)
    bpy.types.TOPBAR_MT_file_import.append(menu_func_import)


def unregister():
    bpy.types.TOPBAR_MT_file_import.remove(menu_func_import)
    bpy.utils.unregister_class(ImportClothcastTake)


if __name__ == "__main__":
    register()
