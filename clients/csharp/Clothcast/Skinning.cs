// Skinning matrices of the body from a frame's bones (the twin of clients/web/clothcast.js
// boneMatrices), so that an engine's skinned mesh (Unity's SkinnedMeshRenderer, a
// shader) poses the body exactly as the garment's codec frame does.

using System;

namespace Clothcast
{
    /// <summary>Bone transforms as 4×4 matrices.</summary>
    public static class Skinning
    {
        /// <summary>World skinning matrices of the body from a frame's bones
        /// (<see cref="RemoteAvatar.Bones"/>: per bone the rest → posed transform in the
        /// canonical frame, quaternion x, y, z, w then translation) and its canonical →
        /// world motion (<see cref="RemoteAvatar.World"/>): per bone world ∘ bone, as
        /// column-major 4×4 matrices (16 floats a bone) into <paramref name="output"/>.
        /// The quaternions are renormalised (the stream carries them to 2^-14). A body
        /// vertex at rest position p (canonical frame, metres) is posed at
        /// Σ weight · M_bone · p. Allocates nothing.</summary>
        public static void BoneMatrices(float[] bones, float[] world, float[] output)
        {
            if (bones == null || bones.Length % 7 != 0) throw new ArgumentException("bones: 7 floats a bone");
            if (world == null || world.Length != 7) throw new ArgumentException("world: 7 floats");
            int n = bones.Length / 7;
            if (output == null || output.Length != 16 * n) throw new ArgumentException("output: 16 floats a bone");
            for (int j = 0; j < n; j++)
            {
                double x, y, z, w, tx, ty, tz;
                Compose(bones, 7 * j, world, out x, out y, out z, out w, out tx, out ty, out tz);
                int m = 16 * j;
                output[m] = (float)(1 - 2 * (y * y + z * z)); output[m + 1] = (float)(2 * (x * y + w * z)); output[m + 2] = (float)(2 * (x * z - w * y)); output[m + 3] = 0;
                output[m + 4] = (float)(2 * (x * y - w * z)); output[m + 5] = (float)(1 - 2 * (x * x + z * z)); output[m + 6] = (float)(2 * (y * z + w * x)); output[m + 7] = 0;
                output[m + 8] = (float)(2 * (x * z + w * y)); output[m + 9] = (float)(2 * (y * z - w * x)); output[m + 10] = (float)(1 - 2 * (x * x + y * y)); output[m + 11] = 0;
                output[m + 12] = (float)tx; output[m + 13] = (float)ty; output[m + 14] = (float)tz; output[m + 15] = 1;
            }
        }

        /// <summary>The same motions as <see cref="BoneMatrices"/> as rigid transforms,
        /// what an engine's bone objects take (Unity's SkinnedMeshRenderer with identity
        /// bind poses): per bone world ∘ bone as a unit quaternion x, y, z, w then a
        /// translation, 7 floats a bone, into <paramref name="output"/>. A body vertex at
        /// rest position p is posed at Σ weight · (R_bone p + t_bone). Allocates
        /// nothing.</summary>
        public static void BoneTransforms(float[] bones, float[] world, float[] output)
        {
            if (bones == null || bones.Length % 7 != 0) throw new ArgumentException("bones: 7 floats a bone");
            if (world == null || world.Length != 7) throw new ArgumentException("world: 7 floats");
            int n = bones.Length / 7;
            if (output == null || output.Length != 7 * n) throw new ArgumentException("output: 7 floats a bone");
            for (int j = 0; j < n; j++)
            {
                int o = 7 * j;
                double x, y, z, w, tx, ty, tz;
                Compose(bones, o, world, out x, out y, out z, out w, out tx, out ty, out tz);
                output[o] = (float)x; output[o + 1] = (float)y; output[o + 2] = (float)z; output[o + 3] = (float)w;
                output[o + 4] = (float)tx; output[o + 5] = (float)ty; output[o + 6] = (float)tz;
            }
        }

        /// <summary>world ∘ bone for the bone at <paramref name="o"/> of
        /// <paramref name="bones"/>: its rotation renormalised (the identity for a zero
        /// quaternion) and its translation.</summary>
        static void Compose(float[] bones, int o, float[] world, out double x, out double y, out double z, out double w, out double tx, out double ty, out double tz)
        {
            double wx = world[0], wy = world[1], wz = world[2], ww = world[3];
            double bx = bones[o], by = bones[o + 1], bz = bones[o + 2], bw = bones[o + 3];
            // q = world ⊗ bone
            x = ww * bx + wx * bw + wy * bz - wz * by;
            y = ww * by - wx * bz + wy * bw + wz * bx;
            z = ww * bz + wx * by - wy * bx + wz * bw;
            w = ww * bw - wx * bx - wy * by - wz * bz;
            double l = Math.Sqrt(x * x + y * y + z * z + w * w);
            if (l > 0) { x /= l; y /= l; z /= l; w /= l; } else { x = 0; y = 0; z = 0; w = 1; }
            Rotate(wx, wy, wz, ww, bones[o + 4], bones[o + 5], bones[o + 6], out tx, out ty, out tz);
            tx += world[4]; ty += world[5]; tz += world[6];
        }

        /// <summary>Rigid transforms (7 floats each, as <see cref="BoneTransforms"/>
        /// gives them) mirrored through the XY plane (z → −z), in place: clothcast's
        /// right-handed frame into a left-handed engine's such as Unity's (+Y up, metres).
        /// A transform T becomes S T S with S = diag(1, 1, −1): rotation (−x, −y, z, w),
        /// translation (x, y, −z); so it takes the mirrored rest point S p to the mirror
        /// of T p.</summary>
        public static void MirrorZ(float[] transforms)
        {
            if (transforms == null || transforms.Length % 7 != 0) throw new ArgumentException("transforms: 7 floats each");
            for (int o = 0; o < transforms.Length; o += 7)
            {
                transforms[o] = -transforms[o];
                transforms[o + 1] = -transforms[o + 1];
                transforms[o + 6] = -transforms[o + 6];
            }
        }

        /// <summary>The body's vertices posed by linear blend skinning with
        /// <paramref name="matrices"/> (from <see cref="BoneMatrices"/>), into
        /// <paramref name="output"/> (3 floats a body vertex, metres; world frame when
        /// the matrices include the world motion). Allocates nothing.</summary>
        public static void PoseBody(GarmentAsset asset, float[] matrices, float[] output)
        {
            if (asset == null) throw new ArgumentNullException("asset");
            var p = asset.BodyPositions;
            int n = p.Length / 3, bones = matrices == null ? 0 : matrices.Length / 16;
            if (output == null || output.Length != 3 * n) throw new ArgumentException("output: 3 floats a body vertex");
            if (matrices == null || matrices.Length != 16 * asset.Parents.Length) throw new ArgumentException("matrices: 16 floats a bone");
            for (int v = 0; v < n; v++)
            {
                double x = p[3 * v], y = p[3 * v + 1], z = p[3 * v + 2], ox = 0, oy = 0, oz = 0;
                for (int k = 0; k < 4; k++)
                {
                    double w = asset.BodyWeights[4 * v + k];
                    int j = asset.BodyJoints[4 * v + k];
                    if (w == 0 || j >= bones) continue;
                    int m = 16 * j;
                    ox += w * (matrices[m] * x + matrices[m + 4] * y + matrices[m + 8] * z + matrices[m + 12]);
                    oy += w * (matrices[m + 1] * x + matrices[m + 5] * y + matrices[m + 9] * z + matrices[m + 13]);
                    oz += w * (matrices[m + 2] * x + matrices[m + 6] * y + matrices[m + 10] * z + matrices[m + 14]);
                }
                output[3 * v] = (float)ox; output[3 * v + 1] = (float)oy; output[3 * v + 2] = (float)oz;
            }
        }

        /// <summary>The garment's vertices (canonical frame) moved into the world frame
        /// by <paramref name="world"/> (quaternion x, y, z, w, then translation), into
        /// <paramref name="output"/> (may be the input).</summary>
        public static void ToWorld(float[] positions, float[] world, float[] output)
        {
            if (positions == null || output == null || positions.Length != output.Length || positions.Length % 3 != 0) throw new ArgumentException("positions and output: the same length, 3 floats a vertex");
            if (world == null || world.Length != 7) throw new ArgumentException("world: 7 floats");
            double l = Math.Sqrt(world[0] * world[0] + world[1] * world[1] + world[2] * world[2] + world[3] * world[3]);
            if (!(l > 0)) l = 1;
            double qx = world[0] / l, qy = world[1] / l, qz = world[2] / l, qw = world[3] / l;
            for (int i = 0; i < positions.Length; i += 3)
            {
                double x, y, z;
                Rotate(qx, qy, qz, qw, positions[i], positions[i + 1], positions[i + 2], out x, out y, out z);
                output[i] = (float)(x + world[4]); output[i + 1] = (float)(y + world[5]); output[i + 2] = (float)(z + world[6]);
            }
        }

        /// <summary>(x, y, z) rotated by the unit quaternion q.</summary>
        static void Rotate(double qx, double qy, double qz, double qw, double x, double y, double z, out double rx, out double ry, out double rz)
        {
            double tx = 2 * (qy * z - qz * y), ty = 2 * (qz * x - qx * z), tz = 2 * (qx * y - qy * x);
            rx = x + qw * tx + (qy * tz - qz * ty);
            ry = y + qw * ty + (qz * tx - qx * tz);
            rz = z + qw * tz + (qx * ty - qy * tx);
        }
    }
}
