// The members of Unity's API that unity/ClothcastStream.cs uses, declared with the
// signatures Unity's scripting reference gives them (UnityEngine 2021 LTS), and no
// behaviour: test.sh compiles the component against them so that a typo or a wrong
// type in it fails here. It is a compile check only; nothing here runs, and Unity
// itself is not available to this repository's CI.

namespace UnityEngine
{
    public class Object
    {
        public string name { get; set; }
        public static void Destroy(Object obj) { }
    }

    public class Component : Object
    {
        public Transform transform { get { return null; } }
        public GameObject gameObject { get { return null; } }
    }

    public class Behaviour : Component { }

    public class MonoBehaviour : Behaviour { }

    public class Transform : Component
    {
        public void SetParent(Transform parent, bool worldPositionStays) { }
        public Vector3 localPosition { get; set; }
        public Quaternion localRotation { get; set; }
    }

    public struct Quaternion
    {
        public float x, y, z, w;
        public Quaternion(float x, float y, float z, float w) { this.x = x; this.y = y; this.z = z; this.w = w; }
    }

    public struct Matrix4x4
    {
        public static Matrix4x4 identity { get { return new Matrix4x4(); } }
    }

    public struct BoneWeight
    {
        public int boneIndex0 { get; set; }
        public int boneIndex1 { get; set; }
        public int boneIndex2 { get; set; }
        public int boneIndex3 { get; set; }
        public float weight0 { get; set; }
        public float weight1 { get; set; }
        public float weight2 { get; set; }
        public float weight3 { get; set; }
    }

    public enum SkinQuality { Auto = 0, Bone1 = 1, Bone2 = 2, Bone4 = 4 }

    public sealed class GameObject : Object
    {
        public GameObject(string name) { }
        public Transform transform { get { return null; } }
        public T AddComponent<T>() where T : Component { return null; }
    }

    public struct Vector3
    {
        public float x, y, z;
        public Vector3(float x, float y, float z) { this.x = x; this.y = y; this.z = z; }
    }

    public struct Color
    {
        public float r, g, b, a;
        public Color(float r, float g, float b) { this.r = r; this.g = g; this.b = b; a = 1; }
    }

    public sealed class Shader : Object
    {
        public static Shader Find(string name) { return null; }
    }

    public class Material : Object
    {
        public Material(Shader shader) { }
        public Color color { get; set; }
    }

    public sealed class Mesh : Object
    {
        public Rendering.IndexFormat indexFormat { get; set; }
        public Vector3[] vertices { get; set; }
        public int[] triangles { get; set; }
        public BoneWeight[] boneWeights { get; set; }
        public Matrix4x4[] bindposes { get; set; }
        public void MarkDynamic() { }
        public void RecalculateNormals() { }
        public void RecalculateBounds() { }
    }

    public sealed class MeshFilter : Component
    {
        public Mesh sharedMesh { get; set; }
    }

    public class Renderer : Component
    {
        public Material sharedMaterial { get; set; }
    }

    public sealed class MeshRenderer : Renderer { }

    public class SkinnedMeshRenderer : Renderer
    {
        public Mesh sharedMesh { get; set; }
        public Transform[] bones { get; set; }
        public SkinQuality quality { get; set; }
        public bool updateWhenOffscreen { get; set; }
    }

    public static class Debug
    {
        public static void Log(object message) { }
        public static void LogWarning(object message) { }
    }

    [System.AttributeUsage(System.AttributeTargets.Field)]
    public class PropertyAttribute : System.Attribute { }

    public class TooltipAttribute : PropertyAttribute
    {
        public TooltipAttribute(string tooltip) { }
    }
}

namespace UnityEngine.Rendering
{
    public enum IndexFormat { UInt16 = 0, UInt32 = 1 }
}
