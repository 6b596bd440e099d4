// A Unity component that shows every avatar a clothcast server streams: its body, a
// SkinnedMeshRenderer whose bones are set from the bones each garment frame carries
// (Unity skins it, on the GPU where the platform does), and its garments, decoded in
// place, as dynamic meshes under this GameObject.
//
// Setup: copy clients/csharp/Clothcast/*.cs into the project's Assets (any folder),
// and this file too; add the component to an empty GameObject; set the URL (and the
// viewer token where the server has one); optionally assign materials (the fallback
// uses the built-in render pipeline's "Standard" shader). Play.
//
// clothcast's frame is right-handed (+Y up, metres); Unity's is left-handed (+Y up,
// metres): positions are mirrored through the XY plane (z → −z) and triangles wound
// the other way, so shapes come out the same, not mirrored.
//
// Written against Unity 2021 LTS's API (Mesh, MeshFilter, MeshRenderer,
// SkinnedMeshRenderer, Material).
// This repository's CI has no Unity: clients/csharp/test.sh compiles this file against
// the Unity members it uses, declared as Unity documents them
// (tests/unity-api/UnityEngine.cs), which catches mistakes in this file but does not
// run it. The library it calls is what the tests run.

using System;
using System.Collections.Generic;
using Clothcast;
using UnityEngine;
using UnityEngine.Rendering;

public class ClothcastStream : MonoBehaviour
{
    [Tooltip("The server's WebSocket endpoint")]
    public string url = "ws://127.0.0.1:8470/ws";
    [Tooltip("Viewer token (empty where the server runs without tokens)")]
    public string token = "";
    public Material bodyMaterial;
    public Material garmentMaterial;

    ClothcastClient client;
    readonly Dictionary<string, Shown> shown = new Dictionary<string, Shown>();

    /// <summary>What the scene shows of one avatar.</summary>
    sealed class Shown
    {
        public GameObject root;
        /// <summary>The body's bones: one Transform a joint, children of root, set each
        /// frame to the joint's rest → posed motion (the body mesh's bind poses are
        /// identities, so Unity poses a vertex at Σ weight · bone · rest).</summary>
        public Transform[] bones;
        /// <summary>Scratch: 7 floats a bone (Skinning.BoneTransforms).</summary>
        public float[] transforms;
        public Piece[] garments;
    }

    /// <summary>One dynamic mesh and the arrays it is filled from.</summary>
    sealed class Piece
    {
        public Mesh mesh;
        public float[] world;
        public Vector3[] vertices;
    }

    void Start()
    {
        // decoding on the network thread: Update() only hands the arrays over
        client = new ClothcastClient(new Uri(url), new ClientOptions { Token = string.IsNullOrEmpty(token) ? null : token, DecodeOnNetworkThread = true });
        client.AvatarAdded += Add;
        client.FrameReceived += Show;
        client.AvatarGone += Remove;
        client.Error += e => Debug.LogWarning("clothcast: " + e.Message);
        client.Closed += c => Debug.Log("clothcast: connection closed (" + c + ")" + (c.RetryIn.HasValue ? ", reconnecting" : ""));
        client.Start();
    }

    void Update()
    {
        // raises the events above, on this (the main) thread
        client.Poll();
    }

    void OnDestroy()
    {
        if (client != null) client.Dispose();
    }

    Material Fallback(Material m, Color color)
    {
        if (m != null) return m;
        var made = new Material(Shader.Find("Standard"));
        made.color = color;
        return made;
    }

    Piece Make(Transform parent, string name, int vertices, int[] triangles, Material material)
    {
        var go = new GameObject(name);
        go.transform.SetParent(parent, false);
        var mesh = new Mesh { name = name };
        if (vertices > 65535) mesh.indexFormat = IndexFormat.UInt32;
        mesh.MarkDynamic();
        mesh.vertices = new Vector3[vertices];
        // the other winding for the mirrored frame
        mesh.triangles = Rewound(triangles);
        go.AddComponent<MeshFilter>().sharedMesh = mesh;
        go.AddComponent<MeshRenderer>().sharedMaterial = material;
        return new Piece { mesh = mesh, world = new float[3 * vertices], vertices = new Vector3[vertices] };
    }

    /// <summary>The triangles wound the other way, for the mirrored frame.</summary>
    static int[] Rewound(int[] triangles)
    {
        var tris = new int[triangles.Length];
        for (int t = 0; t < triangles.Length; t += 3)
        {
            tris[t] = triangles[t];
            tris[t + 1] = triangles[t + 2];
            tris[t + 2] = triangles[t + 1];
        }
        return tris;
    }

    /// <summary>The body as a SkinnedMeshRenderer under <paramref name="parent"/>: its
    /// rest mesh (mirrored), four influences a vertex, identity bind poses, and a bone
    /// Transform a joint; returns the bones.</summary>
    Transform[] MakeBody(Transform parent, GarmentAsset a, Material material)
    {
        int n = a.BodyPositions.Length / 3, joints = a.Parents.Length;
        var bones = new Transform[joints];
        var bindposes = new Matrix4x4[joints];
        for (int j = 0; j < joints; j++)
        {
            var bone = new GameObject("joint " + j);
            bone.transform.SetParent(parent, false);
            bones[j] = bone.transform;
            bindposes[j] = Matrix4x4.identity;
        }
        var vertices = new Vector3[n];
        var weights = new BoneWeight[n];
        for (int v = 0; v < n; v++)
        {
            vertices[v] = new Vector3(a.BodyPositions[3 * v], a.BodyPositions[3 * v + 1], -a.BodyPositions[3 * v + 2]);
            var w = new BoneWeight();
            w.boneIndex0 = a.BodyJoints[4 * v]; w.weight0 = a.BodyWeights[4 * v];
            w.boneIndex1 = a.BodyJoints[4 * v + 1]; w.weight1 = a.BodyWeights[4 * v + 1];
            w.boneIndex2 = a.BodyJoints[4 * v + 2]; w.weight2 = a.BodyWeights[4 * v + 2];
            w.boneIndex3 = a.BodyJoints[4 * v + 3]; w.weight3 = a.BodyWeights[4 * v + 3];
            weights[v] = w;
        }
        var mesh = new Mesh { name = "body" };
        if (n > 65535) mesh.indexFormat = IndexFormat.UInt32;
        mesh.vertices = vertices;
        mesh.triangles = Rewound(a.BodyTriangles);
        mesh.boneWeights = weights;
        mesh.bindposes = bindposes;
        mesh.RecalculateNormals();
        mesh.RecalculateBounds();
        var go = new GameObject("body");
        go.transform.SetParent(parent, false);
        var skin = go.AddComponent<SkinnedMeshRenderer>();
        skin.sharedMesh = mesh;
        skin.bones = bones;
        skin.quality = SkinQuality.Bone4;
        // the avatar walks away from its rest bounds
        skin.updateWhenOffscreen = true;
        skin.sharedMaterial = material;
        return bones;
    }

    void Add(RemoteAvatar av)
    {
        Remove(av.Id);
        var root = new GameObject("clothcast " + av.Id);
        root.transform.SetParent(transform, false);
        var a = av.Asset;
        var s = new Shown
        {
            root = root,
            bones = MakeBody(root.transform, a, Fallback(bodyMaterial, new Color(0.8f, 0.65f, 0.55f))),
            transforms = new float[7 * a.Parents.Length],
            garments = new Piece[1 + av.Layers.Length],
        };
        var cloth = Fallback(garmentMaterial, new Color(0.2f, 0.4f, 0.8f));
        s.garments[0] = Make(root.transform, a.Garment, a.Setup.VertexCount, a.Setup.Triangles, cloth);
        for (int k = 0; k < av.Layers.Length; k++)
        {
            var l = av.Layers[k].Asset;
            s.garments[k + 1] = Make(root.transform, l.Garment, l.Setup.VertexCount, l.Setup.Triangles, cloth);
        }
        shown[av.Id] = s;
    }

    static void Fill(Piece p)
    {
        var w = p.world;
        for (int i = 0; i < p.vertices.Length; i++) p.vertices[i] = new Vector3(w[3 * i], w[3 * i + 1], -w[3 * i + 2]);
        p.mesh.vertices = p.vertices;
        p.mesh.RecalculateNormals();
        p.mesh.RecalculateBounds();
    }

    void Show(RemoteAvatar av)
    {
        Shown s;
        if (!shown.TryGetValue(av.Id, out s)) return;
        // the body's bones from the bones the garment frame carries, mirrored into
        // Unity's frame; Unity skins the body
        if (av.Bones.Length == s.transforms.Length)
        {
            Skinning.BoneTransforms(av.Bones, av.World, s.transforms);
            Skinning.MirrorZ(s.transforms);
            var t = s.transforms;
            for (int j = 0; j < s.bones.Length; j++)
            {
                s.bones[j].localPosition = new Vector3(t[7 * j + 4], t[7 * j + 5], t[7 * j + 6]);
                s.bones[j].localRotation = new Quaternion(t[7 * j], t[7 * j + 1], t[7 * j + 2], t[7 * j + 3]);
            }
        }
        Skinning.ToWorld(av.Garment, av.World, s.garments[0].world);
        Fill(s.garments[0]);
        for (int k = 0; k < av.Layers.Length; k++)
        {
            Skinning.ToWorld(av.Layers[k].Garment, av.World, s.garments[k + 1].world);
            Fill(s.garments[k + 1]);
        }
    }

    void Remove(string id)
    {
        Shown s;
        if (!shown.TryGetValue(id, out s)) return;
        Destroy(s.root);
        shown.Remove(id);
    }
}
