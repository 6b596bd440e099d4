# clothcast live link for Blender: the garments and bodies a clothcast server streams,
# shown live in the scene (3D Viewport > sidebar > clothcast).
#
# Each streamed avatar becomes, in the collection "clothcast live", an armature
# `ID armature` of the 22 canonical joints (SMPL names), posed by each frame's bones and
# placed by its world transform turned Z up (retarget from it to a character of your
# own with bone constraints); the body `ID body`, posed by the same bones; and the
# garment `ID garment` (an outfit: `ID garment 2`, … inner to outer). Body and garments
# are meshes whose vertices each frame replaces, children of the armature. An avatar
# that leaves is removed. Nothing is keyed: to keep a performance, record it with
# `clothcast watch --record` and import the take with clothcast_import.py.
#
# It needs clothcast's Python module (`clothcast.so`, built from clients/python: see
# its README), importable by Blender's Python: put it next to this file in Blender's
# add-ons folder, or name its folder in the add-on's preferences. Install this file
# with Edit > Preferences > Add-ons > Install... (Blender 4.2+; Python 3.11+).
#
# Frames: the server's garments and bodies are in each avatar's canonical frame
# (metres, +Y up, facing +Z); the frame's `world` (rotation, translation) places them;
# Blender is Z up, so the armature's matrix is Y_UP_TO_Z_UP @ world (a garment without
# a body: its own), and the meshes and bones keep the canonical coordinates (what a glTF
# import of the same data gives).

import sys

import bpy
from bpy.props import BoolProperty, FloatProperty, StringProperty
from mathutils import Matrix, Quaternion, Vector

bl_info = {
    "name": "clothcast live link",
    "author": "clothcast",
    "version": (1, 0, 0),
    "blender": (4, 2, 0),
    "location": "3D Viewport > Sidebar > clothcast",
    "description": "Show the garments a clothcast server streams, live",
    "category": "Animation",
}

COLLECTION = "clothcast live"

# glTF's +Y up to Blender's +Z up: (x, y, z) -> (x, -z, y)
Y_UP_TO_Z_UP = Matrix(((1, 0, 0, 0), (0, 0, -1, 0), (0, 1, 0, 0), (0, 0, 0, 1)))


class LiveError(Exception):
    """Why the live link cannot start (no module, a bad address); the message says."""


def import_module(directory=""):
    """clothcast's Python module, from `directory` if given, else from sys.path (the
    add-ons folder is on it)."""
    if directory and directory not in sys.path:
        sys.path.insert(0, directory)
    try:
        import clothcast
    except ImportError as e:
        where = f" in {directory}" if directory else " next to this add-on or on sys.path"
        raise LiveError(f"clothcast's Python module (clothcast.so) was not found{where}: {e}") from e
    return clothcast


class Link:
    """A live link: the viewer and what it has put in the scene so far."""

    def __init__(self, module, url, token=None, avatars=None, armature=True):
        self.module = module
        # whether each avatar gets an armature posed by its bones (else its body and
        # garments are placed directly: about two thirds of Blender's time an avatar-frame)
        self.armature = armature
        try:
            self.viewer = module.Viewer(url, token=token or None, avatars=avatars or None)
        except ValueError as e:
            raise LiveError(str(e)) from e
        # avatar id -> the asset hashes its objects were built for
        self.built = {}
        # avatar id -> the names of the objects built for it
        self.objects = {}
        # avatar id -> the `seq` of the frame its objects show
        self.shown = {}
        # avatar id -> what posing its armature needs (see rig_of)
        self.rigs = {}
        # avatars not built yet because the user is in an edit mode
        self.waiting = set()
        self.failure = None

    def collection(self):
        c = bpy.data.collections.get(COLLECTION)
        if c is None:
            c = bpy.data.collections.new(COLLECTION)
            bpy.context.scene.collection.children.link(c)
        return c

    def remove(self, avatar):
        """Removes an avatar's objects and their data (meshes, armature)."""
        for name in self.objects.pop(avatar, ()):
            _buffers.pop(name, None)
            obj = bpy.data.objects.get(name)
            data = obj.data if obj is not None else (bpy.data.meshes.get(name) or bpy.data.armatures.get(name))
            if obj is not None:
                bpy.data.objects.remove(obj)
            # (data whose object was deleted by hand is left with no users)
            if data is not None and data.users == 0:
                if isinstance(data, bpy.types.Mesh):
                    bpy.data.meshes.remove(data)
                else:
                    bpy.data.armatures.remove(data)
        self.built.pop(avatar, None)
        self.shown.pop(avatar, None)
        self.rigs.pop(avatar, None)
        self.waiting.discard(avatar)

    def build(self, avatar, assets):
        """The avatar's objects for its garments `assets` (hashes, inner to outer), and
        its body when the asset has one; with `armature`, an armature of the skeleton
        with the body and the garments as children, the armature what `update` places."""
        self.remove(avatar)
        collection = self.collection()
        names = []
        body = self.viewer.asset(assets[0])["body"]
        rig = None
        if body is not None:
            if self.armature:
                rig, bones = new_armature(collection, f"{avatar} armature", body, self.module.JOINT_NAMES)
                self.rigs[avatar] = rig_of(rig, bones, body["parents"])
                names.append(rig.name)
            mesh = new_mesh_object(collection, f"{avatar} body", len(body["positions"]) // 3, body["triangles"])
            mesh.parent = rig
            names.append(mesh.name)
        for i, hash in enumerate(assets):
            a = self.viewer.asset(hash)
            g = new_mesh_object(collection, garment_name(avatar, i), a["vertices"], a["triangles"])
            g.parent = rig
            names.append(g.name)
        self.built[avatar] = list(assets)
        self.objects[avatar] = names

    def update(self):
        """Shows every avatar's newest frame; returns the ids it updated."""
        updated, gone = self.viewer.poll()
        for avatar in gone:
            self.remove(avatar)
        for avatar in updated:
            try:
                frame = self.viewer.frame(avatar)
            except KeyError:
                continue  # it left between poll() and here
            # new, dressed otherwise, or an object gone (deleted, a new file loaded)
            if self.built.get(avatar) != frame["assets"] or any(
                bpy.data.objects.get(n) is None for n in self.objects.get(avatar, ())
            ):
                if self.armature and bpy.context.mode != "OBJECT":
                    # an armature is made in its edit mode, which would take the user
                    # out of theirs: wait for object mode (the others stream on)
                    self.waiting.add(avatar)
                    continue
                self.waiting.discard(avatar)
                self.build(avatar, frame["assets"])
            matrix = Y_UP_TO_Z_UP @ world_matrix(frame["world"])
            rig = self.rigs.get(avatar)
            if rig is not None:
                pose(bpy.data.objects[f"{avatar} armature"], matrix, rig, self.viewer.bones(avatar))
                matrix = None  # the armature's children follow it
            for i in range(len(frame["assets"])):
                show(garment_name(avatar, i), matrix, lambda out, i=i: self.viewer.garment(avatar, i, out))
            # the body skinned by the frame's bones in the module (~0.1 ms for 6 000
            # vertices; an Armature modifier costs Blender ~0.7 ms in its depsgraph)
            show(f"{avatar} body", matrix, lambda out: self.viewer.body(avatar, out))
            self.shown[avatar] = frame["seq"]
        return updated

    def close(self):
        self.viewer.close()


def replace(name):
    """Removes object `name` (left by an earlier link, or by hand) and its mesh or
    armature when nothing else uses it, so that the new ones get the name."""
    old = bpy.data.objects.get(name)
    if old is None:
        return
    data = old.data
    bpy.data.objects.remove(old)
    if isinstance(data, bpy.types.Mesh) and data.users == 0:
        bpy.data.meshes.remove(data)
    elif isinstance(data, bpy.types.Armature) and data.users == 0:
        bpy.data.armatures.remove(data)


def new_armature(collection, name, body, joint_names):
    """An armature object `name` of the body's skeleton at rest (canonical frame): a bone
    per joint from the joint to its children (a leaf: half its parent's bone further).
    Returns it and its bones' names in joint order."""
    skeleton = body["skeleton"]
    parents = body["parents"]
    n = len(parents)
    heads = [Vector(skeleton[3 * j:3 * j + 3]) for j in range(n)]
    names = [joint_names[j] if j < len(joint_names) else f"joint{j}" for j in range(n)]
    replace(name)
    arm = bpy.data.armatures.new(name)
    obj = bpy.data.objects.new(name, arm)
    collection.objects.link(obj)
    view_layer = bpy.context.view_layer
    previous = view_layer.objects.active
    view_layer.objects.active = obj
    bpy.ops.object.mode_set(mode="EDIT")
    bones = []
    for j in range(n):
        b = arm.edit_bones.new(names[j])
        b.head = heads[j]
        children = [heads[c] for c in range(n) if parents[c] == j]
        if children:
            tail = sum(children, Vector()) / len(children)
        elif parents[j] >= 0:
            tail = heads[j] + 0.5 * (heads[j] - heads[parents[j]])
        else:
            tail = heads[j] + Vector((0, 0.1, 0))
        if (tail - heads[j]).length < 1e-3:
            tail = heads[j] + Vector((0, 0.05, 0))
        b.tail = tail
        if parents[j] >= 0:
            b.parent = bones[parents[j]]
        bones.append(b)
    bpy.ops.object.mode_set(mode="OBJECT")
    view_layer.objects.active = previous
    return obj, names


def rig_of(rig, names, parents):
    """What posing `rig` needs: its pose bones in joint order (`names`), the parents,
    and each bone's rest matrix and its inverse (armature space)."""
    rest = [rig.data.bones[n].matrix_local.copy() for n in names]
    return [rig.pose.bones[n] for n in names], list(parents), rest, [m.inverted() for m in rest]


def pose(obj, matrix, rig, bones):
    """Places the armature `obj` by `matrix` and poses it by a frame's skinning
    transforms `bones` (rest → posed, canonical frame, (qx, qy, qz, qw, tx, ty, tz)):
    bone j's posed matrix is T_j · R_j (R_j its rest matrix), so relative to its
    parent p (posed T_p · R_p) its basis is R_j⁻¹ · T_p⁻¹ · T_j · R_j."""
    pose_bones, parents, rest, rest_inv = rig
    t = [world_matrix(b) for b in bones]
    for j, pb in enumerate(pose_bones):
        if j >= len(t):
            break
        p = parents[j]
        relative = t[j] if p < 0 else t[p].inverted() @ t[j]
        pb.matrix_basis = rest_inv[j] @ relative @ rest[j]
    obj.matrix_world = matrix


def garment_name(avatar, layer):
    return f"{avatar} garment" if layer == 0 else f"{avatar} garment {layer + 1}"


def world_matrix(world):
    """A frame's `world` (qx, qy, qz, qw, tx, ty, tz) as a 4×4 matrix."""
    qx, qy, qz, qw, tx, ty, tz = world
    m = Quaternion((qw, qx, qy, qz)).to_matrix().to_4x4()
    m.translation = Vector((tx, ty, tz))
    return m


def new_mesh_object(collection, name, vertices, triangles):
    """A mesh object `name` of `vertices` vertices (at the origin until a frame comes)
    and `triangles` (flat vertex indices, 3 a triangle)."""
    replace(name)
    mesh = bpy.data.meshes.new(name)
    t = len(triangles) // 3
    mesh.vertices.add(vertices)
    mesh.loops.add(3 * t)
    mesh.polygons.add(t)
    mesh.loops.foreach_set("vertex_index", triangles)
    mesh.polygons.foreach_set("loop_start", range(0, 3 * t, 3))
    mesh.polygons.foreach_set("loop_total", [3] * t)
    mesh.update()
    mesh.validate()
    obj = bpy.data.objects.new(name, mesh)
    collection.objects.link(obj)
    return obj


# object name -> a float32 buffer of its mesh's size, reused from frame to frame
_buffers = {}


def show(name, matrix, fill):
    """Writes a frame's positions into object `name`'s mesh (`fill(out)` writes them
    into a float32 buffer of the mesh's size) and places the object by `matrix` (None:
    where it is, a child of the avatar's armature)."""
    obj = bpy.data.objects.get(name)
    if obj is None:
        return
    mesh = obj.data
    out = _buffers.get(name)
    if out is None or len(out) != 3 * len(mesh.vertices):
        out = _buffers[name] = memoryview(bytearray(12 * len(mesh.vertices))).cast("f")
    fill(out)
    # the position attribute (Blender 4.x) takes the buffer as one copy (~5 µs for 6 000
    # vertices); `vertices.foreach_set("co", …)` goes vertex by vertex (~0.3 ms)
    mesh.attributes["position"].data.foreach_set("vector", out)
    mesh.update()
    if matrix is not None:
        obj.matrix_world = matrix


# the running link (one per Blender session)
_link = None


def link():
    """The running live link, or None."""
    return _link


def start(url, token="", avatars="", module_dir="", armature=True):
    """Starts the live link to `url` (replacing a running one); `avatars`: ids to
    show, separated by commas (empty: all); `armature`: whether avatars get one."""
    global _link
    stop()
    ids = [a.strip() for a in avatars.split(",") if a.strip()]
    _link = Link(import_module(module_dir), url, token, ids, armature)
    if not bpy.app.timers.is_registered(_tick):
        bpy.app.timers.register(_tick, first_interval=0.0)
    return _link


def stop():
    """Stops the live link (its objects stay in the scene)."""
    global _link
    if bpy.app.timers.is_registered(_tick):
        bpy.app.timers.unregister(_tick)
    if _link is not None:
        _link.close()
        _link = None


def _tick():
    """Blender's timer: the newest frames into the scene, again after the interval."""
    if _link is None:
        return None
    try:
        _link.update()
    except Exception as e:  # noqa: BLE001: Blender would drop the timer without a word
        # refused for good (a wrong token: ClientError), or a failure of our own: say
        # so, in the panel and on the console, and stop asking
        _link.failure = str(e)
        print(f"clothcast live link: {type(e).__name__}: {e}")
        return None
    settings = getattr(bpy.context.scene, "clothcast_live", None)
    return 1.0 / max(1.0, settings.rate if settings else 60.0)


class LiveSettings(bpy.types.PropertyGroup):
    url: StringProperty(name="Server", default="ws://127.0.0.1:8470/ws", description="The server's WebSocket endpoint")
    token: StringProperty(name="Token", default="", subtype="PASSWORD", description="Viewer token (empty: none)")
    avatars: StringProperty(name="Avatars", default="", description="Avatar ids to show, comma-separated (empty: all)")
    rate: FloatProperty(name="Updates/s", default=60.0, min=1.0, max=240.0, description="How often the scene is updated")
    armature: BoolProperty(
        name="Armature",
        default=True,
        description="Give each avatar an armature posed by its skeleton (to retarget from); "
        "off, the body and garments are placed directly, at about two thirds of the cost",
    )


class Preferences(bpy.types.AddonPreferences):
    bl_idname = __name__
    module_dir: StringProperty(
        name="Module folder",
        subtype="DIR_PATH",
        default="",
        description="Folder holding clothcast.so (empty: next to this add-on or on sys.path)",
    )

    def draw(self, context):
        self.layout.prop(self, "module_dir")


def module_dir(context):
    addon = context.preferences.addons.get(__name__)
    return addon.preferences.module_dir if addon else ""


class Connect(bpy.types.Operator):
    bl_idname = "clothcast.live_connect"
    bl_label = "Connect"
    bl_description = "Show the server's avatars live"

    def execute(self, context):
        s = context.scene.clothcast_live
        try:
            start(s.url, s.token, s.avatars, bpy.path.abspath(module_dir(context)), s.armature)
        except LiveError as e:
            self.report({"ERROR"}, str(e))
            return {"CANCELLED"}
        return {"FINISHED"}


class Disconnect(bpy.types.Operator):
    bl_idname = "clothcast.live_disconnect"
    bl_label = "Disconnect"
    bl_description = "Stop the live link (the objects stay)"

    def execute(self, context):
        stop()
        return {"FINISHED"}


class Panel(bpy.types.Panel):
    bl_idname = "VIEW3D_PT_clothcast_live"
    bl_label = "clothcast live"
    bl_space_type = "VIEW_3D"
    bl_region_type = "UI"
    bl_category = "clothcast"

    def draw(self, context):
        s = context.scene.clothcast_live
        col = self.layout.column()
        for p in ("url", "token", "avatars", "rate", "armature"):
            col.prop(s, p)
        if _link is None:
            col.operator(Connect.bl_idname)
            return
        col.operator(Disconnect.bl_idname)
        v = _link.viewer
        if _link.failure:
            col.label(text=f"refused: {_link.failure}", icon="ERROR")
        elif v.connected:
            col.label(text=f"connected, {len(_link.built)} avatars at {v.tick_hz:g} Hz", icon="LINKED")
            if _link.waiting:
                col.label(text=f"{len(_link.waiting)} more wait for object mode", icon="INFO")
        else:
            col.label(text=f"connecting… {v.error or ''}", icon="UNLINKED")


CLASSES = (LiveSettings, Preferences, Connect, Disconnect, Panel)


def register():
    for c in CLASSES:
        bpy.utils.register_class(c)
    bpy.types.Scene.clothcast_live = bpy.props.PointerProperty(type=LiveSettings)


def unregister():
    stop()
    del bpy.types.Scene.clothcast_live
    for c in reversed(CLASSES):
        bpy.utils.unregister_class(c)


if __name__ == "__main__":
    register()
