#!/usr/bin/env python3
"""Regenerates tests/fixtures/mocap/mediapipe_131_01*.json: MediaPipe Pose's world
landmarks for the default body performing CMU 131_01, seen by a camera in front, level
(every 4th frame) and pitched 25° down as a webcam above a screen (every 8th).

Not run by the tests or CI (they read the JSON). It needs a build of clothcast and a
Python with mediapipe 0.10.14 (its legacy Pose solution ships its models in the wheel;
later releases download them, which this project does not do):

    python3 -m venv /tmp/mp && /tmp/mp/bin/pip install mediapipe==0.10.14
    cargo build --release
    /tmp/mp/bin/python scripts/mediapipe_fixture.py

The frames are rendered by `clothcast render --frames ... --views front [--tilt 25]`
(the body with the T-shirt and pants skinned on; every 4th frame of the 120 fps clip is
30 fps) and fed to MediaPipe in video mode (tracking from frame to frame), as a kiosk's
webcam would.
"""

import json
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
from PIL import Image
import mediapipe as mp

ROOT = Path(__file__).resolve().parent.parent
CLIP = "tests/fixtures/mocap/cmu_131_01.bvh"
# (file, camera pitch in degrees, frames of the clip)
SETS = [
    ("mediapipe_131_01.json", 0, range(0, 994, 4)),
    ("mediapipe_131_01_tilt25.json", 25, range(0, 994, 8)),
]


def main() -> int:
    for name, tilt, frames in SETS:
        make(ROOT / "tests/fixtures/mocap" / name, tilt, frames)
    return 0


def make(out, tilt, frames):
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run(
            [str(ROOT / "target/release/clothcast"), "render", "--bvh", CLIP,
             "--frames", f"{frames.start}..{frames.stop}:{frames.step}",
             "--views", "front", "--tilt", str(tilt), "--size", "480", "--out", tmp],
            cwd=ROOT, check=True, stdout=subprocess.DEVNULL)
        poses = []
        with mp.solutions.pose.Pose(static_image_mode=False, model_complexity=1,
                                    smooth_landmarks=True) as pose:
            for f in frames:
                img = np.array(Image.open(f"{tmp}/frame-{f:05d}.png").convert("RGB"))
                r = pose.process(img)
                if r.pose_world_landmarks is None:
                    poses.append(None)
                    continue
                poses.append([[round(l.x, 4), round(l.y, 4), round(l.z, 4),
                               round(l.visibility, 3)]
                              for l in r.pose_world_landmarks.landmark])
    doc = {
        "what": "MediaPipe Pose world landmarks (x image-right, y image-down, z away "
                "from the camera, metres, origin between the hips; 33 per pose, each "
                "[x, y, z, visibility]; null: no pose found) of the default body "
                "performing CMU 131_01, rendered by clothcast from a camera in front "
                f"pitched {tilt} degrees down; made by scripts/mediapipe_fixture.py",
        "mediapipe": mp.__version__ + " legacy Pose solution, model_complexity 1, "
                     "video mode, smooth_landmarks",
        "clip": CLIP,
        "frames": list(frames),
        "tilt_degrees": tilt,
        "fps": 120 / frames.step,
        "poses": poses,
    }
    out.write_text(json.dumps(doc, separators=(",", ":")) + "\n")
    found = sum(p is not None for p in poses)
    print(f"{out.relative_to(ROOT)}: {found} of {len(poses)} frames with a pose")


if __name__ == "__main__":
    sys.exit(main())
