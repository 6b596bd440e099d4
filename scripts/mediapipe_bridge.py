#!/usr/bin/env python3
"""A webcam bridge: MediaPipe Pose on a camera (or a folder of pictures) to a clothcast
server, one `mediapipe` pose message per picture.

    python3 -m venv /tmp/mp && /tmp/mp/bin/pip install mediapipe==0.10.14 websockets
    /tmp/mp/bin/python scripts/mediapipe_bridge.py --camera 0 --url ws://127.0.0.1:8470/ws \\
        --token change-me --avatar mirror

MediaPipe 0.10.14's legacy Pose solution ships its model in the wheel; later releases
need a model file fetched separately (their PoseLandmarker gives the same 33 world
landmarks: send them the same way). Feed the camera's picture unmirrored (mirror the
display instead: the viewer's mirror mode), so that MediaPipe's left is the
performer's left. A camera pitched down leans the avatar: --level takes it out.
Errors the server answers with are printed; the bridge goes on.
"""

import argparse
import json
import math
import sys
import time
from pathlib import Path

import mediapipe as mp
import numpy as np
from websockets.sync.client import connect

# MediaPipe's PoseLandmark names, in its order (landmark i is NAMES[i])
NAMES = [
    "nose", "left_eye_inner", "left_eye", "left_eye_outer", "right_eye_inner",
    "right_eye", "right_eye_outer", "left_ear", "right_ear", "mouth_left",
    "mouth_right", "left_shoulder", "right_shoulder", "left_elbow", "right_elbow",
    "left_wrist", "right_wrist", "left_pinky", "right_pinky", "left_index",
    "right_index", "left_thumb", "right_thumb", "left_hip", "right_hip", "left_knee",
    "right_knee", "left_ankle", "right_ankle", "left_heel", "right_heel",
    "left_foot_index", "right_foot_index",
]


def pictures(args):
    """RGB pictures (numpy arrays) from the camera or the folder, at most --fps a second."""
    if args.frames:
        from PIL import Image
        for path in sorted(Path(args.frames).glob("*.png")):
            yield np.array(Image.open(path).convert("RGB"))
            time.sleep(1.0 / args.fps)
        return
    import cv2
    cam = cv2.VideoCapture(args.camera)
    if not cam.isOpened():
        sys.exit(f"cannot open camera {args.camera}")
    while True:
        ok, bgr = cam.read()
        if not ok:
            return
        yield cv2.cvtColor(bgr, cv2.COLOR_BGR2RGB)


def pose_message(avatar, landmarks, t, level):
    """A clothcast pose message of one pose's world landmarks, with the floor's normal
    in the camera's axes that levels them by `level` degrees (a camera pitched down)."""
    a = math.radians(level)
    return {
        "type": "pose", "avatar": avatar, "profile": "mediapipe", "timestamp": t,
        "joints": [
            {"name": name, "position": [l.x, l.y, l.z], "confidence": l.visibility}
            for name, l in zip(NAMES, landmarks)
        ],
        "floor": [0.0, -math.cos(a), -math.sin(a), 0.0],
    }


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--url", default="ws://127.0.0.1:8470/ws")
    p.add_argument("--token")
    p.add_argument("--avatar", default="mirror")
    p.add_argument("--camera", type=int, default=0, help="camera index (OpenCV)")
    p.add_argument("--frames", help="a folder of PNG pictures instead of a camera")
    p.add_argument("--fps", type=float, default=30.0, help="pictures a second (--frames)")
    p.add_argument("--level", type=float, default=0.0,
                   help="degrees to level a camera pitched down by (MediaPipe shows part "
                        "of the pitch: about 15 for a camera 25 down)")
    args = p.parse_args()
    sent = refused = 0
    with connect(args.url) as ws, mp.solutions.pose.Pose(model_complexity=1) as pose:
        ws.send(json.dumps({"type": "hello", "version": 1, "role": "publisher",
                            "token": args.token}))
        welcome = json.loads(ws.recv(timeout=10))
        if welcome.get("type") != "welcome":
            sys.exit(f"not welcomed: {welcome}")
        start = time.monotonic()
        for rgb in pictures(args):
            result = pose.process(rgb)
            if result.pose_world_landmarks is None:
                continue  # nobody in the picture
            msg = pose_message(args.avatar, result.pose_world_landmarks.landmark,
                               time.monotonic() - start, args.level)
            ws.send(json.dumps(msg))
            sent += 1
            try:
                while True:  # the server's answers so far (errors only, for publishers)
                    answer = json.loads(ws.recv(timeout=0))
                    refused += answer.get("type") == "error"
                    print(f"server: {answer}", file=sys.stderr)
            except TimeoutError:
                pass
    print(f"{sent} poses sent, {refused} errors")


if __name__ == "__main__":
    main()
