// Skinning: the bone transforms an engine's skinned mesh takes (BoneTransforms, and
// MirrorZ for Unity's left-handed frame) pose a point exactly as the bone matrices the
// body posing and the web client use.

using System;
using Clothcast;

static class SkinningTests
{
    static float[] RandomMotions(Random r, int n)
    {
        var m = new float[7 * n];
        for (int j = 0; j < n; j++)
        {
            double x = r.NextDouble() * 2 - 1, y = r.NextDouble() * 2 - 1, z = r.NextDouble() * 2 - 1, w = r.NextDouble() * 2 - 1;
            double l = Math.Sqrt(x * x + y * y + z * z + w * w);
            m[7 * j] = (float)(x / l); m[7 * j + 1] = (float)(y / l); m[7 * j + 2] = (float)(z / l); m[7 * j + 3] = (float)(w / l);
            for (int k = 4; k < 7; k++) m[7 * j + k] = (float)(r.NextDouble() * 4 - 2);
        }
        return m;
    }

    /// <summary>R p + t for the rigid transform at <paramref name="o"/>.</summary>
    static double[] Apply(float[] t, int o, double px, double py, double pz)
    {
        double qx = t[o], qy = t[o + 1], qz = t[o + 2], qw = t[o + 3];
        double ux = 2 * (qy * pz - qz * py), uy = 2 * (qz * px - qx * pz), uz = 2 * (qx * py - qy * px);
        return new[]
        {
            px + qw * ux + (qy * uz - qz * uy) + t[o + 4],
            py + qw * uy + (qz * ux - qx * uz) + t[o + 5],
            pz + qw * uz + (qx * uy - qy * ux) + t[o + 6],
        };
    }

    public static void Register(Harness h)
    {
        h.Test("bone transforms, mirrored for Unity, pose points as the bone matrices do", () =>
        {
            var r = new Random(7);
            for (int round = 0; round < 20; round++)
            {
                const int n = 22;
                var bones = RandomMotions(r, n);
                var world = RandomMotions(r, 1);
                var matrices = new float[16 * n];
                Skinning.BoneMatrices(bones, world, matrices);
                var transforms = new float[7 * n];
                Skinning.BoneTransforms(bones, world, transforms);
                var mirrored = (float[])transforms.Clone();
                Skinning.MirrorZ(mirrored);
                for (int j = 0; j < n; j++)
                {
                    double px = r.NextDouble() * 2 - 1, py = r.NextDouble() * 2, pz = r.NextDouble() - 0.5;
                    int m = 16 * j;
                    double mx = matrices[m] * px + matrices[m + 4] * py + matrices[m + 8] * pz + matrices[m + 12];
                    double my = matrices[m + 1] * px + matrices[m + 5] * py + matrices[m + 9] * pz + matrices[m + 13];
                    double mz = matrices[m + 2] * px + matrices[m + 6] * py + matrices[m + 10] * pz + matrices[m + 14];
                    var a = Apply(transforms, 7 * j, px, py, pz);
                    Harness.True(Math.Abs(a[0] - mx) < 1e-5 && Math.Abs(a[1] - my) < 1e-5 && Math.Abs(a[2] - mz) < 1e-5,
                        "bone " + j + ": the transform puts a point at (" + a[0] + ", " + a[1] + ", " + a[2] + "), the matrix at (" + mx + ", " + my + ", " + mz + ")");
                    // the mirrored transform takes the mirrored point to the mirror of the posed one
                    var b = Apply(mirrored, 7 * j, px, py, -pz);
                    Harness.True(Math.Abs(b[0] - mx) < 1e-5 && Math.Abs(b[1] - my) < 1e-5 && Math.Abs(b[2] + mz) < 1e-5,
                        "bone " + j + ": the mirrored transform puts the mirrored point at (" + b[0] + ", " + b[1] + ", " + b[2] + "), not (" + mx + ", " + my + ", " + (-mz) + ")");
                }
            }
        });

        h.Test("bone transforms refuse arrays of the wrong size", () =>
        {
            var bones = new float[7 * 3];
            var world = new float[] { 0, 0, 0, 1, 0, 0, 0 };
            foreach (var bad in new Action[]
            {
                () => Skinning.BoneTransforms(new float[8], world, new float[7]),
                () => Skinning.BoneTransforms(bones, new float[6], new float[21]),
                () => Skinning.BoneTransforms(bones, world, new float[20]),
                () => Skinning.MirrorZ(new float[8]),
            })
            {
                bool threw = false;
                try { bad(); } catch (ArgumentException) { threw = true; }
                Harness.True(threw, "a wrong size is refused");
            }
        });
    }
}
