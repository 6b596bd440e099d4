//! Carrying a coarse garment's motion onto a finer mesh of the same garment (the
//! 12 500-vertex sequences and databases of `bench codec` and `bench synth`).

use glam::Vec3;

use crate::mesh::{MeshQuery, TriMesh};

/// Per fine vertex (at rest): the closest coarse triangle, barycentric coordinates in
/// it, and the offset along its normal, metres.
pub(crate) struct Binding {
    tri: Vec<[u32; 3]>,
    bary: Vec<Vec3>,
    offset: Vec<f32>,
}

fn tri_normal(p: &[Vec3], t: [u32; 3]) -> Vec3 {
    (p[t[1] as usize] - p[t[0] as usize])
        .cross(p[t[2] as usize] - p[t[0] as usize])
        .normalize_or_zero()
}

impl Binding {
    /// Binds `fine` rest positions to the `coarse` rest mesh.
    pub(crate) fn new(coarse: &TriMesh, fine: &[Vec3]) -> anyhow::Result<Self> {
        let q = MeshQuery::build(coarse)?;
        let (mut tri, mut bary, mut offset) = (Vec::new(), Vec::new(), Vec::new());
        for p in fine {
            let h = q.closest(*p);
            let t = coarse.triangles[h.triangle as usize];
            tri.push(t);
            bary.push(h.bary);
            offset.push((*p - h.point).dot(tri_normal(&coarse.positions, t)));
        }
        Ok(Self { tri, bary, offset })
    }

    /// The fine vertex `v` for coarse positions `coarse`.
    pub(crate) fn point(&self, coarse: &[Vec3], v: usize) -> Vec3 {
        let (t, b) = (self.tri[v], self.bary[v]);
        coarse[t[0] as usize] * b.x
            + coarse[t[1] as usize] * b.y
            + coarse[t[2] as usize] * b.z
            + self.offset[v] * tri_normal(coarse, t)
    }

    /// All fine vertices for coarse positions `coarse`, as flat floats into `out`.
    pub(crate) fn apply(&self, coarse: &[Vec3], out: &mut Vec<f32>) {
        out.clear();
        for v in 0..self.tri.len() {
            out.extend_from_slice(&self.point(coarse, v).to_array());
        }
    }

    /// The coarse vertex with the largest barycentric weight for each fine vertex.
    pub(crate) fn dominant(&self) -> Vec<usize> {
        self.tri
            .iter()
            .zip(&self.bary)
            .map(|(t, b)| {
                let k = if b.x >= b.y && b.x >= b.z {
                    0
                } else if b.y >= b.z {
                    1
                } else {
                    2
                };
                t[k] as usize
            })
            .collect()
    }
}
