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
    }

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
