//! The static data of one garment stream: topology, quantised skin weights, lattice
//! step, and the fixed traversal with its spatial predictors (built once by the
//! encoder's side, carried in the setup so decoders need not rebuild it).

use super::CodecError;
use super::format::{
    FORMAT_VERSION, LATTICE_LIMIT, MAX_BONES, MAX_VERTICES, NO_REF, SETUP_HEADER_LEN, SETUP_MAGIC,
    WEIGHT_ONE, word_hash,
};
use super::traversal::{hierarchical, traversal};

/// Largest triangle count a setup may declare.
const MAX_TRIANGLES: u32 = 1 << 23;

/// Encoder settings.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CodecConfig {
    /// Lattice step, metres. Rounding to the lattice moves a vertex by at most
    /// step·√3/2; the default 1 mm gives ≤ 0.87 mm.
    pub step: f32,
}

impl Default for CodecConfig {
    fn default() -> Self {
        Self { step: 0.001 }
    }
}

/// Static data of a garment stream; see the module docs of `format` for its bytes.
///
/// Invariants (checked by [`GarmentSetup::new`] and [`GarmentSetup::from_bytes`]):
/// triangle and skin indices are in range, each vertex's weights sum to
/// [`WEIGHT_ONE`], `order` is a permutation, and every predictor refers only to
/// vertices earlier in `order`.
#[derive(Clone, Debug, PartialEq)]
pub struct GarmentSetup {
    /// Lattice step, metres (finite, > 0).
    pub step: f32,
    /// Number of bones the skin refers to.
    pub bones: u32,
    /// Triangles (vertex indices).
    pub triangles: Vec<[u32; 3]>,
    /// Per vertex: 4 bone indices.
    pub joints: Vec<[u8; 4]>,
    /// Per vertex: 4 weights summing to [`WEIGHT_ONE`].
    pub weights: Vec<[u8; 4]>,
    /// Traversal: the vertex coded at each position.
    pub order: Vec<u32>,
    /// Per vertex: predictor references (vertex ids), [`NO_REF`] where absent.
    pub predictor: Vec<[u32; 3]>,
    /// Per bone: its parent, an earlier bone, or [`NO_REF`] for a root (every bone
    /// until [`GarmentSetup::with_skeleton`]). New in format version 3.
    pub bone_parents: Vec<u32>,
    /// Per bone: its joint in the rest pose (the point the bone turns about), lattice
    /// steps in the garment's frame. New in format version 3.
    pub bone_pivots: Vec<[i32; 3]>,
    /// Per vertex: the garment at the bones' bind pose, lattice steps in the frames'
    /// frame (from [`GarmentSetup::with_rest`]; all zero without a rest shape): the
    /// reference every keyframe is predicted from, as a delta from this shape and
    /// identity bones. New in format version 5.
    base: Vec<[i32; 3]>,
    /// Whether the setup carries a rest shape (else `base` is all zero).
    has_rest: bool,
    id: u32,
}

impl GarmentSetup {
    /// Builds the setup of a garment: `triangles` over `joints.len()` vertices, skin
    /// weights (any non-negative values; normalised and quantised to sum
    /// [`WEIGHT_ONE`]) on `bones` bones, with a breadth-first traversal from the
    /// topology alone (where the garment's shape is known, [`GarmentSetup::with_rest`]
    /// codes moving cloth 2–17 % smaller).
    pub fn new(
        triangles: &[[u32; 3]],
        joints: &[[u8; 4]],
        weights: &[[f32; 4]],
        bones: u32,
        config: &CodecConfig,
    ) -> Result<Self, CodecError> {
        Self::build(triangles, joints, weights, bones, config, None)
    }

    /// As [`GarmentSetup::new`], with the traversal chosen from the garment's shape and
    /// keyframes predicted from it: `rest` holds each vertex's position at the bones'
    /// bind pose (the pose whose skinning transforms are the identity), in metres in
    /// the frame the frames' positions are in. Keyframes are then coded as deltas from
    /// that shape skinned by the frame's bones (format version 5: on `bench codec`'s
    /// streams a fifth smaller than the intra prediction that setups without a rest
    /// shape use); a shape in another frame or unit costs bits, never accuracy. The
    /// traversal is coarse to fine so that most
    /// vertices are predicted by interpolating between decoded vertices on either
    /// side of them (levels from repeated maximal independent sets of the mesh graph)
    /// instead of extrapolating from the decoded side (the breadth-first traversal of
    /// [`GarmentSetup::new`]). Frames are the same format; decoders follow whichever
    /// traversal the setup carries.
    ///
    /// `rest` must hold one finite position per vertex within the lattice (±2^21 steps;
    /// refused by name otherwise).
    pub fn with_rest(
        triangles: &[[u32; 3]],
        joints: &[[u8; 4]],
        weights: &[[f32; 4]],
        bones: u32,
        config: &CodecConfig,
        rest: &[[f32; 3]],
    ) -> Result<Self, CodecError> {
        Self::build(triangles, joints, weights, bones, config, Some(rest))
    }

    fn build(
        triangles: &[[u32; 3]],
        joints: &[[u8; 4]],
        weights: &[[f32; 4]],
        bones: u32,
        config: &CodecConfig,
        rest: Option<&[[f32; 3]]>,
    ) -> Result<Self, CodecError> {
        let n = joints.len();
        if weights.len() != n {
            return Err(CodecError::Mismatch {
                what: "skin weights per vertex",
                expected: n as u64,
                found: weights.len() as u64,
            });
        }
        if n == 0 || n as u64 > u64::from(MAX_VERTICES) {
            return Err(CodecError::TooLarge {
                what: "vertex count",
                count: n as u64,
            });
        }
        if bones == 0 || bones > MAX_BONES {
            return Err(CodecError::TooLarge {
                what: "bone count",
                count: u64::from(bones),
            });
        }
        if !(config.step.is_finite() && config.step > 1e-6) {
            return Err(CodecError::Invalid {
                what: "lattice step",
            });
        }
        let mut qj = Vec::with_capacity(n);
        let mut qw = Vec::with_capacity(n);
        for (j, w) in joints.iter().zip(weights) {
            let (j, w) = quantize_weights(j, w, bones)?;
            qj.push(j);
            qw.push(w);
        }
        let mut base = vec![[0i32; 3]; n];
        let (order, predictor) = match rest {
            Some(r) => {
                if r.len() != n {
                    return Err(CodecError::Mismatch {
                        what: "rest positions per vertex",
                        expected: n as u64,
                        found: r.len() as u64,
                    });
                }
                if r.iter().flatten().any(|x| !x.is_finite()) {
                    return Err(CodecError::Invalid {
                        what: "rest position (not finite)",
                    });
                }
                for (b, p) in base.iter_mut().zip(r) {
                    for k in 0..3 {
                        let t = (f64::from(p[k]) / f64::from(config.step)).round();
                        if t.abs() >= f64::from(LATTICE_LIMIT) {
                            return Err(CodecError::Invalid {
                                what: "rest position (outside the lattice)",
                            });
                        }
                        b[k] = t as i32;
                    }
                }
                hierarchical(n, triangles, r)?
            }
            None => traversal(n, triangles)?,
        };
        let mut s = Self {
            step: config.step,
            bones,
            triangles: triangles.to_vec(),
            joints: qj,
            weights: qw,
            order,
            predictor,
            bone_parents: vec![NO_REF; bones as usize],
            bone_pivots: vec![[0; 3]; bones as usize],
            has_rest: rest.is_some(),
            base,
            id: 0,
        };
        s.id = word_hash(words(&s.to_bytes()));
        Ok(s)
    }

    /// The same setup with the skeleton the bones belong to: `parents[b]` the parent of
    /// bone b (`None` for a root; a parent must come before its child), `pivots[b]` its
    /// rest joint (metres, the garment's frame: the point the bind pose turns it
    /// about). Frames are then coded with each bone predicted from its parent
    /// (format docs), which roughly halves the bones' bits when the transforms are
    /// those of that skeleton (`bench codec`); any transforms still round-trip.
    ///
    /// Refused by name: lengths other than the bone count, a parent that is not an
    /// earlier bone, a pivot not finite or outside the lattice.
    pub fn with_skeleton(
        mut self,
        parents: &[Option<usize>],
        pivots: &[[f32; 3]],
    ) -> Result<Self, CodecError> {
        let nb = self.bones as usize;
        for (what, found) in [
            ("bone parents", parents.len()),
            ("bone pivots", pivots.len()),
        ] {
            if found != nb {
                return Err(CodecError::Mismatch {
                    what,
                    expected: nb as u64,
                    found: found as u64,
                });
            }
        }
        let mut bone_parents = Vec::with_capacity(nb);
        for (b, p) in parents.iter().enumerate() {
            match p {
                None => bone_parents.push(NO_REF),
                Some(p) if *p < b => bone_parents.push(*p as u32),
                Some(_) => {
                    return Err(CodecError::Invalid {
                        what: "bone parent (must be an earlier bone)",
                    });
                }
            }
        }
        let mut bone_pivots = Vec::with_capacity(nb);
        for p in pivots {
            let mut q = [0i32; 3];
            for k in 0..3 {
                let t = f64::from(p[k]) / f64::from(self.step);
                if !(t.is_finite() && t.abs() < f64::from(LATTICE_LIMIT)) {
                    return Err(CodecError::Invalid {
                        what: "bone pivot (not finite or outside the lattice)",
                    });
                }
                q[k] = t.round() as i32;
            }
            bone_pivots.push(q);
        }
        self.bone_parents = bone_parents;
        self.bone_pivots = bone_pivots;
        self.id = word_hash(words(&self.to_bytes()));
        Ok(self)
    }

    /// Number of vertices.
    pub fn vertex_count(&self) -> usize {
        self.joints.len()
    }

    /// The rest shape keyframes are predicted from (lattice steps per vertex), if the
    /// setup carries one ([`GarmentSetup::with_rest`]).
    pub fn rest(&self) -> Option<&[[i32; 3]]> {
        self.has_rest.then_some(&self.base[..])
    }

    /// The same setup without its rest shape (keyframes then predicted from zeros),
    /// the traversal kept: what a test compares keyframes from the rest shape with.
    #[cfg(test)]
    pub(super) fn without_rest(mut self) -> Self {
        self.base.fill([0; 3]);
        self.has_rest = false;
        self.id = word_hash(words(&self.to_bytes()));
        self
    }

    /// The reference of every keyframe: the rest shape, or all zero without one.
    pub(super) fn keyframe_base(&self) -> &[[i32; 3]] {
        &self.base
    }

    /// The setup id: FNV-1a of [`GarmentSetup::to_bytes`]; frames carry it.
    pub fn id(&self) -> u32 {
        self.id
    }

    /// The setup's wire form.
    pub fn to_bytes(&self) -> Vec<u8> {
        let n = self.vertex_count();
        let mut b = Vec::with_capacity(SETUP_HEADER_LEN + 12 * self.triangles.len() + 24 * n);
        b.extend_from_slice(&SETUP_MAGIC);
        b.extend_from_slice(&[FORMAT_VERSION, 0, 0, 0]);
        b.extend_from_slice(&self.step.to_le_bytes());
        for v in [n as u32, self.triangles.len() as u32, self.bones] {
            b.extend_from_slice(&v.to_le_bytes());
        }
        for t in &self.triangles {
            t.iter().for_each(|i| b.extend_from_slice(&i.to_le_bytes()));
        }
        for (j, w) in self.joints.iter().zip(&self.weights) {
            b.extend_from_slice(j);
            b.extend_from_slice(w);
        }
        self.order
            .iter()
            .for_each(|i| b.extend_from_slice(&i.to_le_bytes()));
        for p in &self.predictor {
            p.iter().for_each(|i| b.extend_from_slice(&i.to_le_bytes()));
        }
        for (p, j) in self.bone_parents.iter().zip(&self.bone_pivots) {
            b.extend_from_slice(&p.to_le_bytes());
            j.iter().for_each(|c| b.extend_from_slice(&c.to_le_bytes()));
        }
        b.extend_from_slice(&u32::from(self.has_rest).to_le_bytes());
        if self.has_rest {
            for p in &self.base {
                p.iter().for_each(|c| b.extend_from_slice(&c.to_le_bytes()));
            }
        }
        b
    }

    /// Parses and validates a setup (untrusted input: every count is checked against
    /// the length of `bytes` before anything is allocated, every index and invariant is
    /// checked).
    pub fn from_bytes(bytes: &[u8]) -> Result<Self, CodecError> {
        use CodecError as E;
        if bytes.is_empty() {
            return Err(E::Empty);
        }
        if bytes.len() < SETUP_HEADER_LEN {
            return Err(E::Truncated {
                what: "setup header",
            });
        }
        if bytes[0..4] != SETUP_MAGIC {
            return Err(E::BadMagic);
        }
        if bytes[4] != FORMAT_VERSION {
            return Err(E::UnsupportedVersion {
                found: bytes[4],
                supported: FORMAT_VERSION,
            });
        }
        if bytes[5..8] != [0, 0, 0] {
            return Err(E::Corrupt {
                what: "reserved setup bytes",
            });
        }
        let u32_at =
            |o: usize| u32::from_le_bytes([bytes[o], bytes[o + 1], bytes[o + 2], bytes[o + 3]]);
        let step = f32::from_bits(u32_at(8));
        let (n, t, bones) = (u32_at(12), u32_at(16), u32_at(20));
        if !(step.is_finite() && step > 1e-6) {
            return Err(E::Invalid {
                what: "lattice step",
            });
        }
        if n == 0 || n > MAX_VERTICES {
            return Err(E::TooLarge {
                what: "vertex count",
                count: u64::from(n),
            });
        }
        if t > MAX_TRIANGLES {
            return Err(E::TooLarge {
                what: "triangle count",
                count: u64::from(t),
            });
        }
        if bones == 0 || bones > MAX_BONES {
            return Err(E::TooLarge {
                what: "bone count",
                count: u64::from(bones),
            });
        }
        let (n, t) = (n as usize, t as usize);
        let nb = bones as usize;
        let skeleton_end = SETUP_HEADER_LEN + 12 * t + 8 * n + 4 * n + 12 * n + 16 * nb;
        // the rest flag, then the rest shape if the flag is 1
        if bytes.len() < skeleton_end + 4 {
            return Err(E::Truncated { what: "setup" });
        }
        let has_rest = match u32_at(skeleton_end) {
            0 => false,
            1 => true,
            _ => {
                return Err(E::Corrupt {
                    what: "setup rest flag",
                });
            }
        };
        let expected = skeleton_end + 4 + if has_rest { 12 * n } else { 0 };
        if bytes.len() < expected {
            return Err(E::Truncated { what: "setup" });
        }
        if bytes.len() > expected {
            return Err(E::TrailingBytes {
                extra: bytes.len() - expected,
            });
        }
        let mut o = SETUP_HEADER_LEN;
        let mut triangles = Vec::with_capacity(t);
        for _ in 0..t {
            let tri = [u32_at(o), u32_at(o + 4), u32_at(o + 8)];
            if tri.iter().any(|&i| i as usize >= n) {
                return Err(E::Invalid {
                    what: "triangle vertex index",
                });
            }
            triangles.push(tri);
            o += 12;
        }
        let (mut joints, mut weights) = (Vec::with_capacity(n), Vec::with_capacity(n));
        for _ in 0..n {
            let j = [bytes[o], bytes[o + 1], bytes[o + 2], bytes[o + 3]];
            let w = [bytes[o + 4], bytes[o + 5], bytes[o + 6], bytes[o + 7]];
            if w.iter().map(|&x| i64::from(x)).sum::<i64>() != WEIGHT_ONE {
                return Err(E::Invalid {
                    what: "skin weights (must sum to 255)",
                });
            }
            if j.iter().any(|&b| u32::from(b) >= bones) {
                return Err(E::Invalid {
                    what: "skin bone index",
                });
            }
            joints.push(j);
            weights.push(w);
            o += 8;
        }
        let mut order = Vec::with_capacity(n);
        let mut position = vec![u32::MAX; n];
        for k in 0..n {
            let v = u32_at(o);
            o += 4;
            if v as usize >= n || position[v as usize] != u32::MAX {
                return Err(E::Invalid {
                    what: "traversal order (not a permutation)",
                });
            }
            position[v as usize] = k as u32;
            order.push(v);
        }
        let mut predictor = Vec::with_capacity(n);
        for v in 0..n {
            let p = [u32_at(o), u32_at(o + 4), u32_at(o + 8)];
            o += 12;
            let present = p.iter().take_while(|&&r| r != NO_REF).count();
            if p[present..].iter().any(|&r| r != NO_REF) {
                return Err(E::Invalid {
                    what: "predictor (gap in references)",
                });
            }
            if p[..present]
                .iter()
                .any(|&r| r as usize >= n || position[r as usize] >= position[v])
            {
                return Err(E::Invalid {
                    what: "predictor (refers to a later vertex)",
                });
            }
            predictor.push(p);
        }
        let (mut bone_parents, mut bone_pivots) = (Vec::with_capacity(nb), Vec::with_capacity(nb));
        for b in 0..nb {
            let p = u32_at(o);
            if p != NO_REF && p as usize >= b {
                return Err(E::Invalid {
                    what: "bone parent (must be an earlier bone)",
                });
            }
            let j = [4, 8, 12].map(|k| u32_at(o + k) as i32);
            if j.iter().any(|c| c.unsigned_abs() >= LATTICE_LIMIT as u32) {
                return Err(E::Invalid {
                    what: "bone pivot (outside the lattice)",
                });
            }
            bone_parents.push(p);
            bone_pivots.push(j);
            o += 16;
        }
        o += 4;
        let mut base = vec![[0i32; 3]; n];
        if has_rest {
            for b in &mut base {
                *b = [0, 4, 8].map(|k| u32_at(o + k) as i32);
                if b.iter().any(|c| c.unsigned_abs() >= LATTICE_LIMIT as u32) {
                    return Err(E::Invalid {
                        what: "rest position (outside the lattice)",
                    });
                }
                o += 12;
            }
        }
        Ok(Self {
            step,
            bones,
            triangles,
            joints,
            weights,
            order,
            predictor,
            bone_parents,
            bone_pivots,
            base,
            has_rest,
            id: word_hash(words(bytes)),
        })
    }
}

/// Little-endian 32-bit words of a byte string (zero-padded).
pub(crate) fn words(bytes: &[u8]) -> impl Iterator<Item = u32> + '_ {
    bytes.chunks(4).map(|c| {
        let mut w = [0u8; 4];
        w[..c.len()].copy_from_slice(c);
        u32::from_le_bytes(w)
    })
}

fn quantize_weights(
    j: &[u8; 4],
    w: &[f32; 4],
    bones: u32,
) -> Result<([u8; 4], [u8; 4]), CodecError> {
    if w.iter().any(|x| !x.is_finite() || *x < 0.0) {
        return Err(CodecError::Invalid {
            what: "skin weight (negative or not finite)",
        });
    }
    let sum: f32 = w.iter().sum();
    if sum <= 0.0 {
        return Err(CodecError::Invalid {
            what: "skin weights (all zero)",
        });
    }
    let mut q = [0u8; 4];
    let mut joints = [0u8; 4];
    for i in 0..4 {
        q[i] = (w[i] / sum * WEIGHT_ONE as f32).round().clamp(0.0, 255.0) as u8;
        if q[i] > 0 {
            if u32::from(j[i]) >= bones {
                return Err(CodecError::Invalid {
                    what: "skin bone index",
                });
            }
            joints[i] = j[i];
        }
    }
    let total: i64 = q.iter().map(|&x| i64::from(x)).sum();
    let mut largest = 0;
    for i in 1..4 {
        if q[i] > q[largest] {
            largest = i;
        }
    }
    if w[largest] > 0.0 && u32::from(j[largest]) < bones {
        joints[largest] = j[largest];
    }
    q[largest] = (i64::from(q[largest]) + WEIGHT_ONE - total).clamp(0, 255) as u8;
    Ok((joints, q))
}
