//! Wavefront OBJ: positions and faces (polygons are fan-triangulated); normals and
//! texture coordinates are accepted and ignored on read.

use std::io::{BufRead, Write};

use glam::Vec3;

use super::{MAX_ELEMENTS, MeshIoError};
use crate::mesh::TriMesh;

/// Reads an OBJ mesh from a reader (`name` is used in errors). Faces with more than three
/// corners are fan-triangulated; negative (relative) indices are resolved; `v/vt/vn`
/// corners use the position index only.
pub fn read_obj(reader: impl BufRead, name: &str) -> Result<TriMesh, MeshIoError> {
    let mut positions = Vec::new();
    let mut triangles = Vec::new();
    let mut corners: Vec<u32> = Vec::new();
    for (i, line) in reader.lines().enumerate() {
        let lineno = i + 1;
        let line = line.map_err(|e| MeshIoError::Io {
            path: name.to_string(),
            source: e,
        })?;
        let err = |m: String| MeshIoError::Obj {
            line: lineno,
            message: m,
        };
        let mut it = line.split_whitespace();
        match it.next() {
            Some("v") => {
                let mut c = [0f32; 3];
                for (k, slot) in c.iter_mut().enumerate() {
                    let tok = it
                        .next()
                        .ok_or_else(|| err(format!("vertex has {k} coordinates, expected 3")))?;
                    *slot = tok
                        .parse()
                        .map_err(|_| err(format!("bad number {tok:?}")))?;
                    if !slot.is_finite() {
                        return Err(err(format!("non-finite coordinate {tok:?}")));
                    }
                }
                if positions.len() >= MAX_ELEMENTS {
                    return Err(MeshIoError::TooLarge {
                        path: name.to_string(),
                        what: "vertex count",
                        limit: MAX_ELEMENTS,
                    });
                }
                positions.push(Vec3::from(c));
            }
            Some("f") => {
                corners.clear();
                for tok in it {
                    let idx = tok.split('/').next().unwrap_or("");
                    let k: i64 = idx
                        .parse()
                        .map_err(|_| err(format!("bad face index {tok:?}")))?;
                    let resolved = if k > 0 {
                        k - 1
                    } else if k < 0 {
                        positions.len() as i64 + k
                    } else {
                        return Err(err("face index 0 (OBJ indices start at 1)".into()));
                    };
                    if resolved < 0 || resolved as usize >= positions.len() {
                        return Err(err(format!(
                            "face index {k} refers to a vertex not yet defined ({} so far)",
                            positions.len()
                        )));
                    }
                    corners.push(resolved as u32);
                }
                if corners.len() < 3 {
                    return Err(err(format!(
                        "face has {} corners, needs at least 3",
                        corners.len()
                    )));
                }
                for k in 1..corners.len() - 1 {
                    triangles.push([corners[0], corners[k], corners[k + 1]]);
                }
                if triangles.len() > MAX_ELEMENTS {
                    return Err(MeshIoError::TooLarge {
                        path: name.to_string(),
                        what: "triangle count",
                        limit: MAX_ELEMENTS,
                    });
                }
            }
            _ => {}
        }
    }
    if triangles.is_empty() {
        return Err(MeshIoError::NoTriangles(name.to_string()));
    }
    Ok(TriMesh::new(positions, triangles))
}

/// Writes positions, per-vertex normals and triangles as OBJ.
pub fn write_obj(mut w: impl Write, mesh: &TriMesh, comment: &str) -> std::io::Result<()> {
    writeln!(w, "# {comment}")?;
    for p in &mesh.positions {
        writeln!(w, "v {:.6} {:.6} {:.6}", p.x, p.y, p.z)?;
    }
    for n in mesh.vertex_normals() {
        writeln!(w, "vn {:.5} {:.5} {:.5}", n.x, n.y, n.z)?;
    }
    for t in &mesh.triangles {
        let [a, b, c] = t.map(|v| v + 1);
        writeln!(w, "f {a}//{a} {b}//{b} {c}//{c}")?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mesh::trimesh::test_shapes::octahedron;

    #[test]
    fn round_trip_and_polygons() {
        let m = octahedron();
        let mut buf = Vec::new();
        write_obj(&mut buf, &m, "test").expect("write");
        let back = read_obj(&buf[..], "mem").expect("read");
        assert_eq!(back.triangles, m.triangles);
        for (a, b) in back.positions.iter().zip(&m.positions) {
            assert!((*a - *b).length() < 1e-5);
        }
        let quad = "v 0 0 0\nv 1 0 0\nv 1 1 0\nv 0 1 0\nf 1/1/1 2/2/2 3/3/3 -1\n";
        let q = read_obj(quad.as_bytes(), "quad").expect("quad");
        assert_eq!(q.triangles, vec![[0, 1, 2], [0, 2, 3]]);
    }

    #[test]
    fn hostile_obj_is_refused_with_line_numbers() {
        let cases = [
            ("v 0 0\n", 1),
            ("v 0 0 nan\nf 1 1 1\n", 1),
            ("v 0 0 0\nv 1 0 0\nf 1 2 7\n", 3),
            ("v 0 0 0\nf 0 1 1\n", 2),
            ("v 0 0 0\nv 1 0 0\nf 1 2\n", 3),
            ("v 0 0 0\nf a b c\n", 2),
        ];
        for (text, line) in cases {
            match read_obj(text.as_bytes(), "bad") {
                Err(MeshIoError::Obj { line: l, .. }) => assert_eq!(l, line, "{text:?}"),
                other => panic!("{text:?}: expected an OBJ error, got {other:?}"),
            }
        }
        assert!(matches!(
            read_obj("v 0 0 0\n".as_bytes(), "x"),
            Err(MeshIoError::NoTriangles(_))
        ));
    }
}
