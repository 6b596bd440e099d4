"""The Blender live link (clients/blender/clothcast_live.py) in Blender 4.2 (and in CI 5.0;
the `bpy` module, or `blender -b --python` this file) against a real server: `clothcast
serve` (tokens on, avatars removed 2 s after their publisher stops), `play` of CMU
131_03 on two avatars, and `watch --record` alongside as the independent record of what
the server sent. Checks that the garments Blender shows, in its world (Z up), are the
recorded samples of the frames the link says it shows; that the armatures' joints are
the recorded BVH's joints of those frames; that the bodies they deform lie under them;
that avatars that leave are removed, and deleted objects made again (not in the user's
edit mode); that Blender's timer drives the link; that a wrong token stops it with the
reason; that the panel's buttons work and what it says. Exits 0 when all hold."""
import glob
import importlib.util
import os
import subprocess
import sys
import tempfile
import time
import types

import bpy

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import CLIP, DB, MODULE_DIR, ROOT, VIEWER_TOKEN, Processes, pc2, recorded, sample_of, stop_all  # noqa: E402
# tests/usd, on the path by harness
from check_blender import body_gap, bvh_joints, evaluated_world, leave, sample_gap, z_up  # noqa: E402


def fail(msg):
    print(f"blender_live: {msg}", file=sys.stderr)
    stop_all()
    leave(1)


def joints(armature):
    """World positions of an armature's joints (its bones' heads) as Blender evaluates
    them now."""
    ev = armature.evaluated_get(bpy.context.evaluated_depsgraph_get())
    return {pb.name: ev.matrix_world @ pb.head for pb in ev.pose.bones}


class Layout:
    """What the panel draws, recorded (there is no UI in `bpy` without a window)."""

    def __init__(self):
        self.lines = []

    def column(self):
        return self

    def prop(self, data, name):
        self.lines.append(f"prop {name}")

    def operator(self, name):
        self.lines.append(f"operator {name}")

    def label(self, text="", icon="NONE"):
        self.lines.append(f"label {text}")


def panel(live):
    """The panel's lines as it would draw them now."""
    layout = Layout()
    live.Panel.draw(types.SimpleNamespace(layout=layout), bpy.context)
    return layout.lines


def load_addon():
    path = os.path.join(ROOT, "clients", "blender", "clothcast_live.py")
    spec = importlib.util.spec_from_file_location("clothcast_live", path)
    live = importlib.util.module_from_spec(spec)
    sys.modules["clothcast_live"] = live
    spec.loader.exec_module(live)
    live.register()
    return live


def run_for(live, seconds, each=None):
    """Updates the scene as Blender's timer would, every ~20 ms, for `seconds`."""
    end = time.time() + seconds
    while time.time() < end:
        updated = live.link().update()
        if each:
            each(updated)
        time.sleep(0.02)


def check_shots(label, shots, takes):
    """Each snapshot (avatar, seq, garment and body world vertices, armature joints or
    None) against the recording: the garment is the recorded sample of its frame, the
    joints the recorded BVH's, the body under the garment, and all of it Z up."""
    compared = 0
    # each take read once: {avatar: ({seq: sample}, {seq: sample index})}
    takes_of = {a: (recorded(takes, a), sample_of(takes, a)) for a in {shot[0] for shot in shots}}
    for a, seq, g, b, heads in shots:
        samples, index = takes_of[a]
        sample = samples.get(seq)
        if sample is None:
            continue
        gap = 0.0
        if heads is not None:
            # the armature's joints: the recorded BVH's at the same frame
            bvh = bvh_joints(os.path.join(takes, f"{a}.body.bvh"), index[seq])
            if sorted(bvh) != sorted(heads):
                fail(f"{label}: {a}: bones {sorted(heads)}, the BVH has {sorted(bvh)}")
            gap = max((heads[n] - z_up(bvh[n])).length for n in heads)
            # the link poses by the codec frame's bones, coded to ~3.5e-4 rad (README,
            # codec), where the BVH has the frame's exact pose: ~0.5 mm at a wrist
            if gap > 2e-3:
                fail(f"{label}: {a} frame {seq}: the armature's joints are up to {gap * 1000:.2f} mm off the recorded BVH's")
        if 3 * len(g) != len(sample):
            fail(f"{label}: {a}: {len(g)} garment vertices, the recording has {len(sample) // 3}")
        off = sample_gap(g, sample)
        median, worst = body_gap(g, b)
        print(f"{label}: {a} frame {seq}: garment = recorded sample within {off * 1000:.4f} mm; "
              + (f"joints = recorded BVH's within {gap * 1000:.4f} mm; " if heads is not None else "")
              + f"body under it: median {median * 100:.1f} cm, worst {worst * 100:.1f} cm")
        if off > 1e-4:
            fail(f"{label}: {a} frame {seq}: the garment Blender shows is {off * 1000:.2f} mm off the recording")
        if median > 0.04 or worst > 0.15:
            fail(f"{label}: {a} frame {seq}: the body is {median:.3f} m (median), {worst:.3f} m (worst) from the garment")
        # Z up: the garment's top is well above the body's feet
        if max(p.z for p in g) - min(p.z for p in b) < 1.2:
            fail(f"{label}: {a} frame {seq}: the garment's top is not 1.2 m above the body's lowest point")
        compared += 1
    if compared < 4:
        fail(f"{label}: only {compared} snapshots fell within the recording")


def take(live, ps, addr, armature, label):
    """A session: a recorder, two avatars played for 10 s, the link (`armature` or not)
    showing them; checks the objects and what they show (check_shots); returns the
    player and the avatar ids."""
    recorder, takes = ps.record(addr, seconds=6)
    player = ps.play(addr, avatars=2, seconds=10)
    live.start(f"ws://{addr}/ws", token=VIEWER_TOKEN, module_dir=MODULE_DIR, armature=armature)
    deadline = time.time() + 30
    while len(live.link().shown) < 2 and time.time() < deadline:
        live.link().update()
        time.sleep(0.02)
    ids = sorted(live.link().shown)
    if len(ids) != 2:
        fail(f"{label}: avatars shown: {ids}")
    collection = bpy.data.collections.get(live.COLLECTION)
    names = sorted(o.name for o in collection.objects)
    kinds = ("garment", "body", "armature") if armature else ("garment", "body")
    want = sorted(f"{a} {what}" for a in ids for what in kinds)
    if names != want:
        fail(f"{label}: objects {names}, expected {want}")
    # snapshots of what Blender shows, while the recorder runs
    shots = []

    def snap(updated):
        for a in updated:
            seq = live.link().shown[a]
            if seq % 9 == 0 and len(shots) < 12:
                g = evaluated_world(bpy.data.objects[f"{a} garment"])
                b = evaluated_world(bpy.data.objects[f"{a} body"])
                heads = joints(bpy.data.objects[f"{a} armature"]) if armature else None
                shots.append((a, seq, g, b, heads))

    # recorded in Blender meanwhile, as a take
    link = live.link()
    if "operator clothcast.live_record" not in panel(live):
        fail(f"{label}: no Record in the panel: {panel(live)}")
    link.start_recording(os.path.join(ps.dir, "blender takes"))
    run_for(live, 1)
    if "operator clothcast.live_stop_recording" not in panel(live):
        fail(f"{label}: no Stop recording in the panel while recording: {panel(live)}")
    # Blender busy for 0.3 s: the frames it missed hold the one before in the take
    time.sleep(0.3)
    run_for(live, 2, snap)
    recording = link.stop_recording()
    recorder.wait(30)
    check_shots(label, shots, takes)
    check_take(label, recording, takes, armature, ids, shots)
    return player, ids


def check_take(label, take, takes, armature, ids, live_shots):
    """The take Blender recorded: per avatar a parent (armature or empty) and its meshes
    playing their caches, or with an armature its body deformed by it; at frames across
    it, what Blender evaluates is the recorded sample of the server frame the take says
    is there (check_shots), and at the frames that hold a server frame of `live_shots`
    the body is the one the link showed then. Then removes it."""
    if take is None or sorted(take.avatars) != ids:
        fail(f"{label}: the take has {sorted(take.avatars) if take else None}, expected {ids}")
    n = take.number
    scene = bpy.context.scene
    shots = []
    for a in ids:
        held = take.frames(a)
        frames = sorted(held)
        # ~3 s at the scene's 24 fps
        if len(frames) < 50 or frames != list(range(frames[0], frames[-1] + 1)):
            fail(f"{label}: {a}'s take covers frames {frames[:3]}…{frames[-3:]} ({len(frames)})")
        if scene.frame_end < frames[-1]:
            fail(f"{label}: the scene ends at {scene.frame_end}, before the take's {frames[-1]}")
        parent = bpy.data.objects[f"{a} take {n} {'armature' if armature else 'root'}"]
        # frames across the take, and the last of those held while Blender was busy
        held_frames = [f for f in frames[1:] if held[f] == held[f - 1]]
        if not held_frames:
            fail(f"{label}: {a}: no frame of the take holds the one before")
        for f in frames[:: len(frames) // 5] + held_frames[-1:]:
            scene.frame_set(f)
            g = evaluated_world(bpy.data.objects[f"{a} take {n} garment"])
            b = evaluated_world(bpy.data.objects[f"{a} take {n} body"])
            shots.append((a, held[f], g, b, joints(parent) if armature else None))
        body = bpy.data.objects[f"{a} take {n} body"]
        kinds = [m.type for m in body.modifiers]
        if kinds != (["ARMATURE"] if armature else ["MESH_CACHE"]) or (armature and body.modifiers[0].object != parent):
            fail(f"{label}: {a}'s take body has modifiers {kinds} (armature {armature})")
    check_shots(f"{label}, the take", shots, takes)
    # the take's body where it holds a frame the link was seen to show: the same
    # vertices (an Armature modifier on the keyed bones, or the cache)
    live = {(a, seq): b for a, seq, _, b, _ in live_shots}
    worst, compared = 0.0, 0
    for a in ids:
        for f, seq in sorted(take.frames(a).items()):
            if (a, seq) not in live:
                continue
            scene.frame_set(f)
            b = evaluated_world(bpy.data.objects[f"{a} take {n} body"])
            want = live[(a, seq)]
            if len(b) != len(want):
                fail(f"{label}: {a}'s take body has {len(b)} vertices, the live one {len(want)}")
            worst = max(worst, max((u - v).length for u, v in zip(b, want)))
            compared += 1
    # (within 0.5 mm, not exactly: the link skins the live body by the frame's bones as
    # decoded, whose quaternions are unit only to ~1e-4, so ~0.2 mm of scale at a metre
    # from the pelvis; the keys hold them normalised. A bone's weights on the wrong group
    # would put vertices centimetres off)
    if compared < 2 or worst > 5e-4:
        fail(f"{label}: the take's body is {worst * 1000:.4f} mm off the live one ({compared} frames compared)")
    print(f"{label}, the take: the body at {compared} frames the link was seen to show is the live one "
          f"within {worst * 1000:.4f} mm")
    remove_take(take)


def evaluated_local(obj):
    """The object's vertices as Blender evaluates them this frame, in its own
    coordinates (what a Mesh Cache modifier plays)."""
    ev = obj.evaluated_get(bpy.context.evaluated_depsgraph_get())
    mesh = ev.to_mesh()
    out = [c for v in mesh.vertices for c in v.co]
    ev.to_mesh_clear()
    return out


def outfit_take(live, ps, addr):
    """A try-on recorded: an avatar dressed in pants under its shirt (`clothcast wear`)
    while the take runs. The take has two parts: the shirt alone, then pants and shirt
    (objects named "… outfit 2"), each part's meshes shown only in its frames, and
    playing there the samples the link wrote of the frames it showed."""
    avatar = "tryon-0"
    player = ps.spawn("play", "play", CLIP, "--url", f"ws://{addr}/ws", "--avatars", "1", "--prefix", "tryon",
                      "--seconds", "20")[0]
    link = live.link()
    deadline = time.time() + 30
    while avatar not in link.shown and time.time() < deadline:
        link.update()
        time.sleep(0.02)
    if avatar not in link.shown:
        fail(f"try-on: {avatar} not shown")
    link.start_recording(os.path.join(ps.dir, "blender takes"))
    run_for(live, 1)
    wear = ps.spawn("wear", "wear", avatar, "pants", "tshirt", "--url", f"ws://{addr}/ws")[0]
    if wear.wait(30) != 0:
        fail("try-on: `clothcast wear` failed")
    deadline = time.time() + 10
    while len(link.built.get(avatar, ())) != 2 and time.time() < deadline:
        link.update()
        time.sleep(0.02)
    if len(link.built.get(avatar, ())) != 2:
        fail(f"try-on: the link shows {avatar} in {link.built.get(avatar)}")
    run_for(live, 1)
    take = link.stop_recording()
    player.kill()
    outfits = take.outfits(avatar)
    if [len(assets) for _, assets in outfits] != [1, 2] or outfits[1][1][1] != outfits[0][1][0]:
        fail(f"try-on: the take's outfits {outfits}")
    n = take.number
    parts = [
        (outfits[0][0], [f"{avatar} take {n} garment", f"{avatar} take {n} body"]),
        (outfits[1][0], [f"{avatar} take {n} garment outfit 2", f"{avatar} take {n} garment 2 outfit 2",
                         f"{avatar} take {n} body outfit 2"]),
    ]
    frames = sorted(take.frames(avatar))
    pants = link.viewer.asset(outfits[1][1][0])["vertices"]
    if len(bpy.data.objects[parts[1][1][0]].data.vertices) != pants:
        fail("try-on: the second outfit's inner garment is not the pants")
    scene = bpy.context.scene
    dg = bpy.context.evaluated_depsgraph_get()
    # a frame inside each part, and each part's first and last
    checked = 0
    for k, (first, names) in enumerate(parts):
        until = parts[1][0] - 1 if k == 0 else frames[-1]
        for f in sorted({first, (first + until) // 2, until}):
            scene.frame_set(f)
            for j, (_, other) in enumerate(parts):
                for name in other:
                    ev = bpy.data.objects[name].evaluated_get(dg)
                    hidden = (ev.hide_viewport, ev.hide_render)
                    if hidden != ((j != k),) * 2:
                        fail(f"try-on: frame {f} (part {k + 1}): {name} hidden {hidden}")
            for name in names:
                obj = bpy.data.objects[name]
                modifier = obj.modifiers["clothcast take"]
                if " body" in name:
                    # deformed by the take's armature (check_take compares such a body
                    # with the live one)
                    if modifier.type != "ARMATURE" or modifier.object.name != f"{avatar} take {n} armature":
                        fail(f"try-on: {name} is not deformed by the take's armature")
                    checked += 1
                    continue
                path = bpy.path.abspath(modifier.filepath)
                sample = pc2.read_pc2(path)[f - first]
                got = evaluated_local(obj)
                off = max(abs(a - b) for a, b in zip(got, sample)) if len(got) == len(sample) else None
                if off is None or off > 1e-6:
                    fail(f"try-on: frame {f}: {name} plays {off} off its cache's sample {f - first}")
                checked += 1
    print(f"a take of a try-on: {avatar} in {len(outfits)} outfits, from frames {[o[0] for o in outfits]}; "
          f"each part shown only in its frames, playing its caches ({checked} meshes checked)")
    remove_take(take)
    # and the avatar leaves (its publisher gone)
    collection = bpy.data.collections.get(live.COLLECTION)
    deadline = time.time() + 30
    while collection.objects and time.time() < deadline:
        link.update()
        time.sleep(0.05)
    if collection.objects:
        fail(f"try-on: objects left after {avatar} left: {[o.name for o in collection.objects]}")


def remove_take(take):
    """Removes a take's objects, their data and actions."""
    for obj in list(take.collection.objects):
        data = obj.data
        bpy.data.objects.remove(obj)
        if isinstance(data, bpy.types.Mesh):
            bpy.data.meshes.remove(data)
        elif isinstance(data, bpy.types.Armature):
            bpy.data.armatures.remove(data)
    bpy.data.collections.remove(take.collection)
    for action in list(bpy.data.actions):
        bpy.data.actions.remove(action)


PANTS = os.path.join(ROOT, "tests", "fixtures", "db", "v1", "small-pants.ccdb")


INSTALL = """
import bpy
for name in ("clothcast_live", "clothcast_import"):
    path = f"{folder}/{name}.py"
    if bpy.ops.preferences.addon_install(filepath=path) != {"FINISHED"}:
        raise SystemExit(f"{name}: not installed")
    if bpy.ops.preferences.addon_enable(module=name) != {"FINISHED"}:
        raise SystemExit(f"{name}: not enabled")
for kind in ("VIEW3D_PT_clothcast_live", "CLOTHCAST_OT_live_connect", "CLOTHCAST_OT_live_record",
             "IMPORT_SCENE_OT_clothcast_take"):
    if not hasattr(bpy.types, kind):
        raise SystemExit(f"{kind} not registered")
print("installed in Blender", bpy.app.version_string)
"""


def in_fresh_blender(code, home):
    """Runs Python `code` in a Blender of its own whose user folders are under `home`
    (a temporary folder): a Blender (`blender -b --python` this file) runs it itself,
    the module this Python. Returns the finished process (output captured)."""
    env = dict(os.environ, HOME=home, XDG_CONFIG_HOME=os.path.join(home, ".config"))
    run = ([bpy.app.binary_path, "-b", "--factory-startup", "--python-exit-code", "1", "--python-expr", code]
           if bpy.app.binary_path else [sys.executable, "-c", code])
    return subprocess.run(run, env=env, capture_output=True, text=True, timeout=120)


def check_install():
    """The add-ons installed as a user installs them (Preferences, Add-ons, Install from
    Disk: `preferences.addon_install`, then enabled), in a Blender of its own whose user
    folders are a temporary one: their panel, operators and importer registered."""
    with tempfile.TemporaryDirectory() as home:
        out = in_fresh_blender(INSTALL.replace("{folder}", os.path.join(ROOT, "clients", "blender")), home)
        installed = [f for _, _, fs in os.walk(home) for f in fs if f.startswith("clothcast_")]
        said = [ln for ln in out.stdout.splitlines() if ln.startswith("installed in Blender")]
        if out.returncode != 0 or not said or sorted(installed) != ["clothcast_import.py", "clothcast_live.py"]:
            fail(f"installing the add-ons: {out.stdout[-400:]} {out.stderr[-400:]} (files {installed})")
    print(f"the add-ons install and enable from Preferences ({said[0]})")


EXTENSIONS = """
import glob, importlib.util, os, sys, time
import bpy
# Blender's own Python has no clothcast module: this Python's (if it has one) is hidden,
# so that what the live link imports is the extension's wheel
spec = importlib.util.find_spec("clothcast")
if spec is not None:
    hidden = os.path.dirname(os.path.dirname(spec.origin)) if spec.submodule_search_locations else os.path.dirname(spec.origin)
    sys.path[:] = [p for p in sys.path if os.path.abspath(p) != os.path.abspath(hidden)]
for path in {zips}:
    if bpy.ops.extensions.package_install_files(repo="user_default", filepath=path, enable_on_install=True) != {{"FINISHED"}}:
        raise SystemExit(f"{{path}}: not installed")
for kind in ("VIEW3D_PT_clothcast_live", "CLOTHCAST_OT_live_connect", "CLOTHCAST_OT_live_record",
             "IMPORT_SCENE_OT_clothcast_take"):
    if not hasattr(bpy.types, kind):
        raise SystemExit(f"{{kind}} not registered")
live = sys.modules["bl_ext.user_default.clothcast_live"]
module = live.import_module()
where = bpy.utils.user_resource("EXTENSIONS")
if not os.path.abspath(module.__file__).startswith(os.path.abspath(where)):
    raise SystemExit(f"clothcast's module came from {{module.__file__}}, not the extension's wheel under {{where}}")
# the live link of the extension, on the extension's module, against the test's server
live.start({url!r}, token={token!r}, armature=True)
deadline = time.time() + 30
while not live.link().shown and time.time() < deadline:
    live.link().update()
    time.sleep(0.02)
if not live.link().shown:
    raise SystemExit(f"no avatar shown ({{live.link().failure or live.link().viewer.error}})")
avatar = sorted(live.link().shown)[0]
garment = bpy.data.objects[f"{{avatar}} garment"].data
ys = [v.co.y for v in garment.vertices]
live.stop()
# a garment on a standing body: its vertices between the hips and the neck (canonical
# metres, +Y up), not all at the origin
if len(ys) < 100 or not (0.5 < sum(ys) / len(ys) < 1.6):
    raise SystemExit(f"the garment of {{avatar}}: {{len(ys)}} vertices, mean height {{sum(ys) / max(len(ys), 1)}}")
print(f"extensions in Blender {{bpy.app.version_string}}: {{avatar}}'s garment of {{len(ys)}} vertices, module {{module.__file__}}")
"""


def check_extensions(ps, addr):
    """The add-ons as Blender extensions (clients/blender/build_extensions.py, with the
    wheel test.sh built: CLOTHCAST_PYTHON_WHEEL_DIR): Blender's own validator accepts
    both zips; installed from disk (`extensions.package_install_files`, as Get
    Extensions > Install from Disk does) in a Blender of its own whose user folders are a
    temporary one and whose Python lacks the module, they register, the live link
    imports the module from the extension's bundled wheel, and it shows an avatar a
    `play` streams."""
    wheels = sorted(glob.glob(os.path.join(os.environ.get("CLOTHCAST_PYTHON_WHEEL_DIR", ""), "clothcast-*.whl")))
    if len(wheels) != 1:
        fail(f"the extensions' check needs the wheel test.sh built (CLOTHCAST_PYTHON_WHEEL_DIR): found {wheels}")
    validator = os.path.join(bpy.utils.system_resource("SCRIPTS"), "addons_core", "bl_pkg", "cli", "blender_ext.py")
    if not os.path.isfile(validator):
        fail(f"Blender's extension validator is not at {validator}")
    with tempfile.TemporaryDirectory() as home:
        build = subprocess.run([sys.executable, os.path.join(ROOT, "clients", "blender", "build_extensions.py"),
                                "--wheel", wheels[0], "--out", os.path.join(home, "dist")],
                               capture_output=True, text=True, timeout=60)
        zips = build.stdout.split()
        if build.returncode != 0 or len(zips) != 2:
            fail(f"build_extensions.py: {build.stdout} {build.stderr}")
        for z in zips:
            valid = subprocess.run([sys.executable, validator, "validate", z], capture_output=True, text=True, timeout=60)
            if valid.returncode != 0 or "Success" not in valid.stdout:
                fail(f"Blender's validator refused {os.path.basename(z)}: {valid.stdout} {valid.stderr}")
        player = ps.play(addr, avatars=1, seconds=20)
        out = in_fresh_blender(EXTENSIONS.format(zips=zips, url=f"ws://{addr}/ws", token=VIEWER_TOKEN), home)
        player.kill()
        # the server removes its avatar (silent for `remove_after`, 2 s in the test's
        # config) before the checks that follow count the avatars of their own players
        time.sleep(3.5)
        said = [ln for ln in out.stdout.splitlines() if ln.startswith("extensions in Blender")]
        if out.returncode != 0 or not said:
            fail(f"the extensions: {out.stdout[-600:]} {out.stderr[-600:]}")
    print(f"the add-ons build, validate and install as extensions; {said[0]}")


def main():
    check_install()
    bpy.ops.wm.read_factory_settings(use_empty=True)
    live = load_addon()
    config = f'databases = ["{DB}", "{PANTS}"]\n[engine]\nidle_timeout = 1.0\nremove_after = 2.0\n'
    with Processes() as ps:
        _, addr = ps.serve(config=config)
        url = f"ws://{addr}/ws"
        check_extensions(ps, addr)
        if "operator clothcast.live_connect" not in panel(live):
            fail(f"the panel without a link: {panel(live)}")
        player, ids = take(live, ps, addr, True, "with armatures")
        lines = panel(live)
        if "operator clothcast.live_disconnect" not in lines or "label connected, 2 avatars at 30 Hz" not in lines:
            fail(f"the panel of a link streaming two avatars: {lines}")
        if not bpy.app.timers.is_registered(live._tick):
            fail("the link's timer is not registered")
        # Blender's timer function itself: it updates and asks to run again
        interval = live._tick()
        if not (0 < interval <= 1):
            fail(f"the timer asks for {interval} s")
        # an object deleted by hand (or a new file loaded) comes back with the next frame,
        # but not while the user is in an edit mode (making an armature would end it)
        bpy.data.objects.remove(bpy.data.objects[f"{ids[0]} garment"])
        bpy.ops.mesh.primitive_cube_add()
        cube = bpy.context.active_object
        bpy.ops.object.mode_set(mode="EDIT")
        run_for(live, 0.5)
        if bpy.context.mode != "EDIT_MESH" or bpy.data.objects.get(f"{ids[0]} garment") is not None:
            fail(f"the link acted in the user's edit mode (now {bpy.context.mode})")
        if ids[0] not in live.link().waiting:
            fail("the avatar to make again is not waiting for object mode")
        if "label 1 more wait for object mode" not in panel(live):
            fail(f"the panel while an avatar waits: {panel(live)}")
        bpy.ops.object.mode_set(mode="OBJECT")
        bpy.data.objects.remove(cube)
        bpy.data.meshes.remove(bpy.data.meshes["Cube"])
        run_for(live, 0.5)
        if bpy.data.objects.get(f"{ids[0]} garment") is None:
            fail("a deleted garment object was not made again")
        # the publisher stops: the server removes its avatars, and so does the link; a
        # take recorded meanwhile keeps their armatures
        live.link().start_recording(os.path.join(ps.dir, "blender takes"))
        run_for(live, 0.5)
        player.kill()
        collection = bpy.data.collections.get(live.COLLECTION)
        deadline = time.time() + 30
        while collection.objects and time.time() < deadline:
            live.link().update()
            time.sleep(0.05)
        if collection.objects:
            fail(f"objects left after the avatars left: {[o.name for o in collection.objects]}")
        left = live.link().stop_recording()
        for a in ids:
            rig = bpy.data.objects.get(f"{a} take {left.number} armature")
            curves = live.fcurves_of(rig) if rig is not None else []
            if rig is None or rig.type != "ARMATURE" or len(rig.data.bones) != 22 or len(curves) != 7 * 23:
                fail(f"the take of avatars that left: {a}'s armature {rig} with {len(curves)} curves")
            # each bone's curves in a group of its name (the Dope Sheet's rows), the
            # object's in "Object"
            groups = {}
            for fc in curves:
                groups.setdefault(fc.group.name if fc.group else None, []).append(fc.data_path)
            want = {"Object"} | {b.name for b in rig.data.bones}
            if set(groups) != want or any(len(paths) != 7 for paths in groups.values()):
                fail(f"the take's curves are grouped as {sorted(map(str, groups))}, not by bone")
        print(f"a take whose avatars left before it ended kept their armatures ({left.collection.name})")
        remove_take(left)
        if bpy.data.meshes or bpy.data.armatures:
            fail(f"data left: {[m.name for m in bpy.data.meshes]} {[a.name for a in bpy.data.armatures]}")
        print("avatars that left were removed with their meshes and armatures")
        outfit_take(live, ps, addr)
        live.stop()
        if bpy.app.timers.is_registered(live._tick) or live.link() is not None:
            fail("the link still runs after stop()")
        # without armatures: the body and garments placed directly
        player, _ = take(live, ps, addr, False, "without armatures")
        # a new link over the objects of the last one: they are replaced, names kept,
        # and nothing of theirs is left behind
        before = sorted(o.name for o in collection.objects)
        live.stop()
        live.start(url, token=VIEWER_TOKEN, module_dir=MODULE_DIR, armature=False)
        run_for(live, 1)
        if len(live.link().shown) != 2:
            fail(f"the second link showed {sorted(live.link().shown)}")
        after = sorted(o.name for o in collection.objects)
        if after != before or sorted(m.name for m in bpy.data.meshes) != before:
            fail(f"a second link left {after} and meshes {[m.name for m in bpy.data.meshes]}, expected {before}")
        player.kill()
        live.stop()
        # a wrong token: the timer stops and the link says why
        live.start(url, token="not-the-token", module_dir=MODULE_DIR)
        deadline = time.time() + 20
        while live._tick() is not None:
            if time.time() > deadline:
                fail("the timer kept running with a wrong token")
            time.sleep(0.05)
        if "4001" not in (live.link().failure or ""):
            fail(f"the failure: {live.link().failure}")
        print(f"a wrong token stopped the link: {live.link().failure}")
        if not any(line.startswith("label refused: ") and "4001" in line for line in panel(live)):
            fail(f"the panel of a refused link: {panel(live)}")
        # the panel's buttons: Connect with the scene's settings, a bad address refused
        settings = bpy.context.scene.clothcast_live
        settings.url, settings.token, settings.armature = "http://nowhere", VIEWER_TOKEN, False
        try:
            bpy.ops.clothcast.live_connect()
            fail("Connect took http://nowhere")
        except RuntimeError as e:
            if "ws://" not in str(e):
                fail(f"Connect's error for http://nowhere: {e}")
        settings.url = url
        if bpy.ops.clothcast.live_connect() != {"FINISHED"} or live.link() is None or live.link().armature:
            fail("Connect did not start a link with the scene's settings")
        deadline = time.time() + 20
        while not live.link().viewer.connected and time.time() < deadline:
            time.sleep(0.05)
        if not live.link().viewer.connected:
            fail(f"Connect's link did not connect: {live.link().viewer.error}")
        # the panel's Record and Stop recording (no avatars streaming: nothing to write)
        settings.take_folder = os.path.join(ps.dir, "panel takes")
        if bpy.ops.clothcast.live_record() != {"FINISHED"} or live.link().take is None:
            fail("Record did not start a take")
        if not os.path.isdir(settings.take_folder):
            fail("Record did not make the take's folder")
        if bpy.ops.clothcast.live_stop_recording() != {"FINISHED"} or live.link().take is not None:
            fail("Stop recording did not end the take")
        bpy.ops.clothcast.live_disconnect()
        if live.link() is not None or bpy.app.timers.is_registered(live._tick):
            fail("Disconnect left the link running")
        print("the panel's Connect and Disconnect work, and a bad address is refused")
        live.unregister()
    print("blender_live: all checks passed")
    leave(0)


try:
    main()
except Exception as e:  # noqa: BLE001: the verdict must be the exit code
    import traceback

    traceback.print_exc()
    fail(f"{type(e).__name__}: {e}")
