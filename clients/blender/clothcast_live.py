# clothcast live link for Blender: the garments and bodies a clothcast server streams,
# shown live in the scene (3D Viewport > sidebar > clothcast).
#
# Each streamed avatar becomes, in the collection "clothcast live", an armature
# `ID armature` of the 22 canonical joints (SMPL names), posed by each frame's bones and
# placed by its world transform turned Z up (retarget from it to a character of your
# own with bone constraints); the body `ID body`, posed by the same bones; and the
# garment `ID garment` (an outfit: `ID garment 2`, … inner to outer). Body and garments
# are meshes whose vertices each frame replaces, children of the armature. An avatar
# that leaves is removed.
#
# Record (in the panel, while connected) keeps what the link shows from the current
# frame on, the meshes' PC2 caches written into the take folder as it goes (default:
# "clothcast takes" next to the .blend file); Stop makes it a take: a collection
# "clothcast take N" with, per avatar, a copy of its armature (or, without armatures, an
# empty) keyed at every scene frame, its garments as meshes whose Mesh Cache modifiers
# play those caches, and its body the same way without armatures, or with them the body
# at rest with its skin weights, deformed by the keyed armature. A scene frame gets the
# last frame the server made by its time (a frame the link missed holds the one before).
# An avatar dressed otherwise during the take (a try-on) starts a new part: the new
# outfit's meshes (`… outfit 2`, …) with caches of their own, each part shown only in
# its frames. `clothcast watch --record` and clothcast_import.py do the same outside
# Blender.
#
# Install it as an extension (Blender 4.2+, checked with 4.2, 4.5 and 5.0): the zip
# clients/blender/build_extensions.py makes holds this file and clothcast's Python
# module as a wheel, which Blender installs with it (Edit > Preferences > Get
# Extensions > (the v menu) Install from Disk...). Or install this file alone (Add-ons >
# Install from Disk...); it then needs the module importable by Blender's Python
# (`pip install ./clients/python` into Blender's Python, or `clothcast.so` built by
# clients/python/build.sh: see its README): installed, or next to this file in
# Blender's add-ons folder, or in a folder named in the add-on's preferences.
#
# Frames: the server's garments and bodies are in each avatar's canonical frame
# (metres, +Y up, facing +Z); the frame's `world` (rotation, translation) places them;
# Blender is Z up, so the armature's matrix is Y_UP_TO_Z_UP @ world (a garment without
# a body: its own), and the meshes and bones keep the canonical coordinates (what a glTF
# import of the same data gives).

import os
import struct
import sys
import tempfile
from array import array

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
        raise LiveError(f"clothcast's Python module (clothcast.so) was not found{where} ({e}): install the "
                        "live link as the extension that carries it (clients/blender/build_extensions.py), "
                        "or the module into Blender's Python") from e
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
        # the take being recorded (Take), or None; takes written so far
        self.take = None
        self.takes = 0

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
            placed = matrix
            rig = self.rigs.get(avatar)
            bases = None
            if rig is not None:
                bases = pose_bases(rig, self.viewer.bones(avatar))
                pose(bpy.data.objects[f"{avatar} armature"], matrix, rig, bases)
                matrix = None  # the armature's children follow it
            meshes = [garment_name(avatar, i) for i in range(len(frame["assets"]))]
            for i, name in enumerate(meshes):
                show(name, matrix, lambda out, i=i: self.viewer.garment(avatar, i, out))
            # the body skinned by the frame's bones in the module (~0.1 ms for 6 000
            # vertices; an Armature modifier costs Blender ~0.7 ms in its depsgraph)
            show(f"{avatar} body", matrix, lambda out: self.viewer.body(avatar, out))
            self.shown[avatar] = frame["seq"]
            if self.take is not None:
                self.take.add(avatar, frame, placed, bases, meshes + [f"{avatar} body"], rig,
                              lambda: self.viewer.asset(frame["assets"][0])["body"])
        return updated

    def start_recording(self, folder="//clothcast takes", scene=None):
        """Starts a take from the scene's current frame (a running one goes on), its
        caches written into `folder` (`//`: next to the .blend file; a file not saved
        yet: the system's temporary folder) as it goes."""
        if self.take is None:
            scene = scene or bpy.context.scene
            fps = scene.render.fps / scene.render.fps_base
            self.takes += 1
            self.take = Take(self.takes, fps, scene.frame_current, resolve_folder(folder))
        return self.take

    def stop_recording(self, scene=None):
        """Ends the take and makes its objects (Take.write). Returns the take, or None
        when none was recorded."""
        take, self.take = self.take, None
        if take is None:
            return None
        take.write(scene or bpy.context.scene)
        return take if take.avatars else None

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


def pose_bases(rig, bones):
    """Each pose bone's basis for a frame's skinning transforms `bones` (rest → posed,
    canonical frame, (qx, qy, qz, qw, tx, ty, tz)): bone j's posed matrix is T_j · R_j
    (R_j its rest matrix), so relative to its parent p (posed T_p · R_p) its basis is
    R_j⁻¹ · T_p⁻¹ · T_j · R_j."""
    pose_bones, parents, rest, rest_inv = rig
    t = [world_matrix(b) for b in bones]
    out = []
    for j in range(min(len(pose_bones), len(t))):
        p = parents[j]
        relative = t[j] if p < 0 else t[p].inverted() @ t[j]
        out.append(rest_inv[j] @ relative @ rest[j])
    return out


def pose(obj, matrix, rig, bases):
    """Places the armature `obj` by `matrix` and poses its bones by `bases`
    (pose_bases)."""
    for pb, basis in zip(rig[0], bases):
        pb.matrix_basis = basis
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


def resolve_folder(folder):
    """`folder` as an absolute path: `//…` next to the .blend file, or, for a file not
    saved yet, in the system's temporary folder."""
    if folder.startswith("//") and not bpy.data.filepath:
        return os.path.join(tempfile.gettempdir(), folder[2:] or "clothcast takes")
    return bpy.path.abspath(folder)


PC2_HEADER = struct.Struct("<12siiffi")


class Cache:
    """A PC2 point cache written a sample at a time; its header's sample count is
    rewritten with each, so that the file reads whole even if Blender stops mid-take.
    Written with positioned writes on an unbuffered file: two system calls a sample."""

    def __init__(self, path, points, start):
        self.path = path
        self.points = points
        self.start = start
        self.samples = 0
        self.file = open(path, "w+b", buffering=0)
        self.file.write(PC2_HEADER.pack(b"POINTCACHE2\0", 1, points, float(start), 1.0, 0))

    def put(self, index, sample):
        """Writes `sample` (3 × points float32, as bytes) as sample `index` (at most
        one past the last: the last is overwritten, or one added)."""
        fd = self.file.fileno()
        os.pwrite(fd, sample, PC2_HEADER.size + index * 12 * self.points)
        if index == self.samples:
            self.samples += 1
            os.pwrite(fd, struct.pack("<i", self.samples), PC2_HEADER.size - 4)

    def hold(self):
        """Writes the last sample again as the next (a frame the link missed)."""
        size = 12 * self.points
        last = os.pread(self.file.fileno(), size, PC2_HEADER.size + (self.samples - 1) * size)
        self.put(self.samples, last)

    def close(self):
        self.file.close()


class Take:
    """What the link shows while recording, per avatar and scene frame from its first: the
    server's frame shown there (its `seq`); the parent's (armature or empty) and each
    bone's location and rotation, the channels its keys will have; and each mesh's
    positions (garments inner to outer, then the body) written to a PC2 cache in
    `folder` as they come, except the body of an avatar with an armature: that body is
    its rest mesh and skin weights, deformed by the keyed armature (an Armature
    modifier), which spares two thirds of the take's cache bytes. A scene frame holds
    the last frame the server made by its time; one the link missed, the frame before.
    An avatar dressed otherwise during the take (`wear`: a try-on) starts a new part of
    its take, the new outfit's meshes with caches of their own from that frame; each
    part's meshes show only while it lasts."""

    def __init__(self, number, fps, start, folder):
        self.number = number
        self.fps = fps
        # the scene frame of the server time `t0` (the take's first frame)
        self.start = start
        self.t0 = None
        os.makedirs(folder, exist_ok=True)
        self.folder = folder
        # avatar -> {"armature", "first", "seqs" (per scene frame from "first"),
        #            "channels" (7 a transform: location x, y, z, rotation w, x, y, z),
        #            "turns" (each transform's last rotation), "parts" (one per outfit
        #            worn, in order: {"assets", "meshes" (live names of the meshes
        #            with caches), "suffix", "data", "caches", "first", "body" (an
        #            armature's body: (live name, mesh, skin), else None)})}
        self.avatars = {}
        # frames not kept: an avatar whose meshes were not all shown
        self.skipped = 0
        self.collection = None

    def part(self, avatar, frame, meshes, at, body=None):
        """A new part of `avatar`'s take from scene frame `at`: the outfit of `frame`,
        its meshes' topology copied now (the live meshes are rebuilt when the avatar
        is dressed otherwise, and go when it leaves), a PC2 cache each; `body`: the
        live name and the asset's body (rest positions, skin) of a body the armature
        will deform, copied now too."""
        a = self.avatars[avatar]
        k = len(a["parts"])
        tag = f"{avatar} take {self.number}"
        suffix = "" if k == 0 else f" outfit {k + 1}"
        a["parts"].append({
            "assets": list(frame["assets"]),
            "meshes": meshes,
            "suffix": suffix,
            "data": [bpy.data.objects[n].data.copy() for n in meshes],
            "caches": [
                Cache(os.path.join(self.folder, f"{n.replace(avatar, tag, 1)}{suffix}.pc2"), len(_buffers[n]) // 3, at)
                for n in meshes
            ],
            "first": at,
            "body": None if body is None else (body[0], bpy.data.objects[body[0]].data.copy(), {
                "positions": array("f", body[1]["positions"]),
                "joints": bytes(body[1]["joints"]),
                "weights": array("f", body[1]["weights"]),
            }),
        })

    def add(self, avatar, frame, matrix, bases, meshes, rig=None, body=None):
        """Keeps what the link just showed of `avatar` (`meshes`: its objects' names,
        the body last; `rig`: its armature's, when it has one, see rig_of; `body`: a
        function that gives the frame's body asset, for a body the armature deforms)."""
        t = frame["timestamp"]
        if self.t0 is None:
            self.t0 = t
        at = self.start + round((t - self.t0) * self.fps)
        # (an asset without a usable body has no body object)
        meshes = [n for n in meshes if n in _buffers and bpy.data.objects.get(n) is not None]
        a = self.avatars.get(avatar)
        if a is None:
            live = bpy.data.objects.get(f"{avatar} armature")
            a = self.avatars[avatar] = {
                # the skeleton at rest and the bones' names, kept now: the live armature
                # goes when the avatar leaves, maybe before the take ends
                "armature": None if rig is None or bases is None or live is None else (
                    live.data.copy(), [pb.name for pb in rig[0]]),
                "first": at,
                "seqs": [],
                "channels": [array("f") for _ in range(7 * (1 + (0 if bases is None else len(bases))))],
                "turns": [None] * (1 + (0 if bases is None else len(bases))),
                "parts": [],
            }
        # the body of an avatar with an armature: deformed by the keyed armature
        rigged = None
        if a["armature"] is not None and body is not None and meshes and meshes[-1] == f"{avatar} body":
            rigged, meshes = meshes[-1], meshes[:-1]
        index = at - a["first"]
        seqs, channels = a["seqs"], a["channels"]
        if index < len(seqs) - 1:
            return  # older than the frame the take holds (not from a sound server)
        parts = a["parts"]
        if not parts or parts[-1]["assets"] != frame["assets"]:
            if not meshes:
                self.skipped += 1
                return
            # a later frame of the scene frame the last part began on replaces it
            if parts and parts[-1]["first"] == at:
                self.drop_part(avatar)
            elif parts:
                # the last part holds its last frame until the new one's first
                for c in parts[-1]["caches"]:
                    while c.samples < at - parts[-1]["first"]:
                        c.hold()
            skin = body() if rigged is not None else None
            self.part(avatar, frame, meshes, at, None if skin is None else (rigged, skin))
        part = parts[-1]
        if part["meshes"] != meshes:
            self.skipped += 1
            return
        # frames the link missed hold the one before
        while len(seqs) < index:
            for ch in channels:
                ch.append(ch[-1])
            seqs.append(seqs[-1])
        positions = [_buffers[n] for n in meshes]
        within = at - part["first"]
        for c, p in zip(part["caches"], positions):
            while c.samples < within:
                c.hold()
            c.put(within, p)
        values = transform_channels([matrix] + list(bases or ())[: len(a["turns"]) - 1], a["turns"])
        if index < len(seqs):
            # a later frame of the same scene frame
            seqs[index] = frame["seq"]
            for ch, v in zip(channels, values):
                ch[index] = v
        else:
            seqs.append(frame["seq"])
            for ch, v in zip(channels, values):
                ch.append(v)

    def drop_part(self, avatar):
        """Forgets `avatar`'s last part (an outfit worn for no whole scene frame): its
        caches closed and deleted, its meshes' copies removed."""
        part = self.avatars[avatar]["parts"].pop()
        for c in part["caches"]:
            c.close()
            os.remove(c.path)
        for mesh in part["data"]:
            bpy.data.meshes.remove(mesh)
        if part["body"] is not None:
            bpy.data.meshes.remove(part["body"][1])

    def frames(self, avatar):
        """{scene frame: seq} of `avatar` in the take."""
        a = self.avatars[avatar]
        return {a["first"] + i: seq for i, seq in enumerate(a["seqs"])}

    def outfits(self, avatar):
        """[(first scene frame, asset hashes)] of `avatar`'s parts, in order."""
        return [(p["first"], p["assets"]) for p in self.avatars[avatar]["parts"]]

    def write(self, scene):
        """Closes the caches and makes the take's objects in a new collection
        "clothcast take N": per avatar, its parent (a copy of its armature, or an empty)
        keyed at every frame from its first to its last, and its meshes playing their
        caches (an avatar dressed otherwise during the take: each outfit's meshes,
        named with " outfit 2", … after the first, shown only in their frames)."""
        collection = bpy.data.collections.new(f"clothcast take {self.number}")
        scene.collection.children.link(collection)
        self.collection = collection
        last = scene.frame_end
        for avatar, a in sorted(self.avatars.items()):
            for part in a["parts"]:
                for c in part["caches"]:
                    c.close()
            seqs, first = a["seqs"], a["first"]
            if not seqs:
                continue
            tag = f"{avatar} take {self.number}"
            armature = a["armature"]
            if armature is not None:
                parent = bpy.data.objects.new(f"{tag} armature", armature[0])
                armature[0].name = f"{tag} armature"
            else:
                parent = bpy.data.objects.new(f"{tag} root", None)
                parent.empty_display_size = 0.3
            collection.objects.link(parent)
            parent.rotation_mode = "QUATERNION"
            curves = new_action(parent, tag)
            owners = [("", "Object")] + [(f'pose.bones["{b}"].', b) for b in (armature[1] if armature else ())]
            frames = array("f", range(first, first + len(seqs)))
            for k, channel in enumerate(a["channels"][: 7 * len(owners)]):
                path, group = owners[k // 7]
                c = k % 7
                prop, i = ("location", c) if c < 3 else ("rotation_quaternion", c - 3)
                key(curves, path + prop, i, group, frames, channel)
            end = first + len(seqs) - 1
            parts = a["parts"]
            for k, part in enumerate(parts):
                until = parts[k + 1]["first"] - 1 if k + 1 < len(parts) else end
                for live_name, mesh, cache in zip(part["meshes"], part["data"], part["caches"]):
                    name = live_name.replace(avatar, tag, 1) + part["suffix"]
                    mesh.name = name
                    obj = bpy.data.objects.new(name, mesh)
                    collection.objects.link(obj)
                    obj.parent = parent
                    modifier = obj.modifiers.new("clothcast take", "MESH_CACHE")
                    modifier.cache_format = "PC2"
                    # relative to the .blend file where it has one (the folder moves with it)
                    modifier.filepath = bpy.path.relpath(cache.path) if bpy.data.filepath else cache.path
                    modifier.frame_start = float(part["first"])
                    if len(parts) > 1:
                        shown_between(obj, part["first"], until, first, end)
                if part["body"] is not None:
                    live_name, mesh, skin = part["body"]
                    obj = skinned_body(live_name.replace(avatar, tag, 1) + part["suffix"], mesh, skin, parent,
                                       armature[1])
                    collection.objects.link(obj)
                    if len(parts) > 1:
                        shown_between(obj, part["first"], until, first, end)
            last = max(last, end)
        scene.frame_end = last


def skinned_body(name, mesh, skin, rig, bone_names):
    """The object `name` of the body `mesh` (the live body's topology) at rest, a child
    of the armature object `rig` deformed by it: a vertex group per bone of
    `bone_names` (joint order) holding the skin's weights (`skin`: the asset's rest
    positions, 4 joints and 4 weights a vertex), and an Armature modifier. Blender's
    Armature modifier is linear blend skinning as the module's body is: posed by the
    keyed bones it is the body the link showed."""
    mesh.name = name
    mesh.vertices.foreach_set("co", skin["positions"])
    mesh.update()
    obj = bpy.data.objects.new(name, mesh)
    obj.parent = rig
    groups = [obj.vertex_groups.new(name=b) for b in bone_names]
    joints, weights = skin["joints"], skin["weights"]
    for k, (j, w) in enumerate(zip(joints, weights)):
        if w != 0.0 and j < len(groups):
            groups[j].add([k // 4], w, "REPLACE")
    modifier = obj.modifiers.new("clothcast take", "ARMATURE")
    modifier.object = rig
    modifier.use_vertex_groups = True
    return obj


def shown_between(obj, start, until, first, end):
    """Keys `obj` shown (viewport and render) from scene frame `start` to `until` and
    hidden before and after, within `first`..`end` (constant keys: no blend)."""
    keys = [(start, False)]
    if start > first:
        keys.insert(0, (start - 1, True))
    if until < end:
        keys.append((until + 1, True))
    for prop in ("hide_viewport", "hide_render"):
        for frame, hidden in keys:
            setattr(obj, prop, hidden)
            obj.keyframe_insert(prop, frame=frame)
        for fc in fcurves_of(obj):
            for point in fc.keyframe_points:
                point.interpolation = "CONSTANT"


def transform_channels(matrices, turns):
    """The key values of each matrix: location x, y, z, then rotation w, x, y, z (each
    rotation kept on the side of `turns`' last one for it, so that no key turns the
    long way to the next; `turns` updated)."""
    out = []
    for j, m in enumerate(matrices):
        loc, rot, _ = m.decompose()
        if turns[j] is not None and turns[j].dot(rot) < 0:
            rot.negate()
        turns[j] = rot
        out += (loc.x, loc.y, loc.z, rot.w, rot.x, rot.y, rot.z)
    return out


def new_action(owner, name):
    """A new action `name` animating `owner`, and where its F-curves go: the channel bag
    of a slot for `owner` in the action's one layer and keyframe strip on Blender 4.4
    and later (slotted actions; 5.0 removed `Action.fcurves`), the action itself before.
    Either has `fcurves` and `groups`."""
    action = bpy.data.actions.new(name)
    anim = owner.animation_data_create()
    anim.action = action
    if not hasattr(action, "slots"):
        return action
    slot = action.slots.new(owner.id_type, owner.name)
    anim.action_slot = slot
    strip = action.layers.new("Layer").strips.new(type="KEYFRAME")
    return strip.channelbag(slot, ensure=True)


def fcurves_of(owner):
    """The F-curves that animate `owner` in its action (on Blender 4.4 and later those of
    the slot it uses); empty without an action."""
    anim = owner.animation_data
    action = anim.action if anim is not None else None
    if action is None:
        return []
    if not hasattr(action, "slots"):
        return list(action.fcurves)
    from bpy_extras import anim_utils

    bag = anim_utils.action_get_channelbag_for_slot(action, anim.action_slot)
    return list(bag.fcurves) if bag is not None else []


def key(curves, path, index, group, frames, values):
    """An F-curve in `curves` (what `new_action` gives) for `path`[`index`], in the
    group `group`, with a linear key at each of `frames` (float32 array) of `values`,
    set in bulk."""
    n = len(frames)
    fc = curves.fcurves.new(path, index=index)
    fc.group = curves.groups.get(group) or curves.groups.new(group)
    fc.keyframe_points.add(n)
    co = array("f", bytes(8 * n))
    co[0::2] = frames
    co[1::2] = values
    fc.keyframe_points.foreach_set("co", co)
    fc.keyframe_points.foreach_set("interpolation", [LINEAR] * n)
    fc.update()


# the interpolation enum's value for LINEAR (keyframes are per frame: none between)
LINEAR = 1

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
    """Stops the live link (its objects stay in the scene); a take being recorded is
    written first."""
    global _link
    if bpy.app.timers.is_registered(_tick):
        bpy.app.timers.unregister(_tick)
    if _link is not None:
        if _link.take is not None:
            _link.stop_recording()
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
    take_folder: StringProperty(
        name="Takes",
        subtype="DIR_PATH",
        default="//clothcast takes",
        description="Where recorded takes' point caches go (//: next to the .blend file)",
    )
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
        description="Folder holding clothcast.so (empty: the one the extension carries, next to this add-on, or on sys.path)",
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


class Record(bpy.types.Operator):
    bl_idname = "clothcast.live_record"
    bl_label = "Record"
    bl_description = "Record what the link shows, from the current frame, as a keyed take"

    def execute(self, context):
        if _link is None:
            self.report({"ERROR"}, "not connected")
            return {"CANCELLED"}
        try:
            _link.start_recording(context.scene.clothcast_live.take_folder, context.scene)
        except OSError as e:
            self.report({"ERROR"}, f"the take's folder: {e}")
            return {"CANCELLED"}
        return {"FINISHED"}


class StopRecording(bpy.types.Operator):
    bl_idname = "clothcast.live_stop_recording"
    bl_label = "Stop recording"
    bl_description = "Write the take: keyed armatures and cached meshes in a new collection"

    def execute(self, context):
        if _link is None or _link.take is None:
            return {"CANCELLED"}
        take = _link.stop_recording(context.scene)
        if take is None:
            self.report({"WARNING"}, "nothing was recorded")
        else:
            self.report({"INFO"}, f"{take.collection.name}: {len(take.avatars)} avatars, caches in {take.folder}")
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
        for p in ("url", "token", "avatars", "rate", "armature", "take_folder"):
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
            if _link.take is None:
                col.operator(Record.bl_idname)
            else:
                col.operator(StopRecording.bl_idname)
                frames = sum(len(a["seqs"]) for a in _link.take.avatars.values())
                col.label(text=f"recording take {_link.take.number}: {frames} avatar-frames", icon="REC")
        else:
            col.label(text=f"connecting… {v.error or ''}", icon="UNLINKED")


CLASSES = (LiveSettings, Preferences, Connect, Disconnect, Record, StopRecording, Panel)


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
