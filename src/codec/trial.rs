//! The encoder's trials: for each vertex of a patch, in traversal order, the
//! prediction of one mode, the lattice point coded for it (within the tolerance, as
//! the effort chooses) and its residual and hints; scalar, and with a vertex's three
//! axes in SIMD lanes where the CPU has AVX2 (the same points).

use super::coder::predict_in;
use super::encoder::Effort;
use super::format::{LATTICE_LIMIT, NO_REF, SPATIAL_MEAN, SPATIAL_NONE, SPATIAL_PARALLELOGRAM};
use super::setup::GarmentSetup;

/// How far, as a fraction of the tolerance, [`Effort::Fast`] codes a vertex whose
/// prediction missed the tolerance ball from its true position, towards the
/// prediction. On the ball's edge (1.0) the residual is smallest now, but the vertex
/// needs another correction the next time it moves the same way; pulled in, it pays a
/// little more once and then rides on the prediction longer. 0.4 codes walking cloth
/// in ~5 % fewer bits than 1.0 (and 0.0, the nearest lattice point, in ~2 % more;
/// `bench codec`).
const PULL: f64 = 0.4;

/// Picks the lattice point coded for a vertex whose true position is `x` (lattice
/// units) when the decoder will predict `p`: `p` itself when it lies within `r` of `x`
/// (the residual is then zero: this is what keeps still and rigidly moving cloth from
/// paying for rounding noise); else, with [`Effort::Fast`], the lattice point nearest
/// to the point [`PULL`]·`r` from `x` towards `p` if that is inside the ball, with
/// [`Effort::Small`] the result of [`snap_search`]; else the nearest lattice point to
/// `x` (always within `r`, see [`Encoder::set_tolerance`](super::encoder::Encoder::set_tolerance)).
#[inline(always)]
fn snap(p: [i64; 3], x: [f64; 3], r: f64, effort: Effort) -> [i32; 3] {
    let d = [p[0] as f64 - x[0], p[1] as f64 - x[1], p[2] as f64 - x[2]];
    let len2 = d[0] * d[0] + d[1] * d[1] + d[2] * d[2];
    let lim = f64::from(LATTICE_LIMIT - 1);
    let inside = |q: [f64; 3]| q.iter().all(|c| c.abs() < lim);
    if len2 <= r * r {
        let q = p.map(|c| c as f64);
        if inside(q) {
            return p.map(|c| c as i32);
        }
    }
    if effort == Effort::Small {
        if let Some(q) = snap_search(p, x, r * r).filter(|q| inside(*q)) {
            return q.map(|c| c as i32);
        }
    } else if len2 > 0.0 {
        let t = PULL * r * inverse_sqrt(len2);
        let q: [f64; 3] = std::array::from_fn(|k| round(x[k] + d[k] * t));
        let e2: f64 = (0..3).map(|k| (q[k] - x[k]).powi(2)).sum();
        if e2 <= r * r && inside(q) {
            return q.map(|c| c as i32);
        }
    }
    x.map(|c| round(c) as i32)
}

/// Bits, roughly, that a residual axis `e` costs over a zero one: 1 for ±1, then 3
/// more per doubling of |e|.
#[inline]
fn axis_cost(e: i64) -> f64 {
    let log2 = 63 - (e.unsigned_abs() | 1).leading_zeros();
    if e == 0 { 0.0 } else { f64::from(1 + 3 * log2) }
}

/// [`Effort::Small`]'s choice for a vertex whose prediction `p` missed the ball of
/// squared radius `r2` around `x`: of the corners of the lattice cell around `x` that
/// lie inside the ball, the one whose residual costs least ([`axis_cost`]), plus one
/// bit for lying on the ball's edge rather than at its centre (a point near the edge
/// needs its next correction sooner). The weights were tuned on `bench codec`. `None`
/// when no corner is inside (r below step·√3/2, which [`Encoder::set_tolerance`](super::encoder::Encoder::set_tolerance)
/// refuses; or the exact keyframe of [`Encoder::keyframe`](super::encoder::Encoder::keyframe), r = 0).
#[inline]
fn snap_search(p: [i64; 3], x: [f64; 3], r2: f64) -> Option<[f64; 3]> {
    // per axis, the cell's two lattice coordinates: squared distance to x and the
    // residual's cost
    let fl = x.map(floor);
    let mut dist = [[0.0; 2]; 3];
    let mut cost = [[0.0; 2]; 3];
    for k in 0..3 {
        let e = fl[k] as i64 - p[k];
        let below = x[k] - fl[k];
        dist[k] = [below * below, (1.0 - below) * (1.0 - below)];
        cost[k] = [axis_cost(e), axis_cost(e + 1)];
    }
    // without a branch per corner (which corners are inside is a coin toss)
    let inv_r2 = 1.0 / r2.max(f64::MIN_POSITIVE);
    let (mut best, mut at) = (f64::INFINITY, 0usize);
    for corner in 0..8usize {
        let (a, b, c) = (corner & 1, (corner >> 1) & 1, corner >> 2);
        let l2 = dist[0][a] + dist[1][b] + dist[2][c];
        let v = cost[0][a] + cost[1][b] + cost[2][c] + l2 * inv_r2;
        let v = if l2 <= r2 { v } else { f64::INFINITY };
        let better = v < best;
        best = if better { v } else { best };
        at = if better { corner } else { at };
    }
    best.is_finite()
        .then(|| std::array::from_fn(|k| fl[k] + ((at >> k) & 1) as f64))
}

/// 1/√x to about 12 bits (x > 0): the direction towards the prediction need not be
/// exact (where the pulled point lands is checked against the ball), and the hardware
/// estimate spares the encoder's inner loop a square root and a division on its
/// critical path.
#[inline]
fn inverse_sqrt(x: f64) -> f64 {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{_mm_cvtss_f32, _mm_rsqrt_ss, _mm_set_ss};
        // SAFETY: SSE is part of every x86_64 target's baseline, so these instructions
        // exist on any machine this code runs on; they only touch registers.
        unsafe { f64::from(_mm_cvtss_f32(_mm_rsqrt_ss(_mm_set_ss(x as f32)))) }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        1.0 / x.sqrt()
    }
}

/// Largest integer ≤ `x` (|x| < 2^22 here), without a libm call (see [`round`]).
#[inline]
fn floor(x: f64) -> f64 {
    let n = round(x);
    if n > x { n - 1.0 } else { n }
}

/// Nearest integer (ties to even) of a lattice coordinate (|x| < 2^22 here), without
/// the libm call `f64::round` compiles to on baseline x86-64; encoder-only (which
/// nearby lattice point is coded is the encoder's choice, not part of the format).
#[inline]
fn round(x: f64) -> f64 {
    const MAGIC: f64 = 6_755_399_441_055_744.0; // 1.5 · 2^52
    (x + MAGIC) - MAGIC
}

/// Chooses and stores the coded lattice points of `vertices` (in traversal order) for
/// one prediction mode, their residuals into `residual` and their prediction hints
/// into `hints` (the same order).
#[allow(clippy::too_many_arguments, reason = "the encoder's disjoint buffers")]
pub(super) fn trial(
    setup: &GarmentSetup,
    vertices: &[u32],
    base: &[[i32; 3]],
    spatial: u32,
    target: &[[f64; 3]],
    r: f64,
    effort: Effort,
    wide: bool,
    q_new: &mut [[i32; 3]],
    residual: &mut [[i32; 3]],
    hints: &mut [[u8; 3]],
) {
    debug_assert_eq!(vertices.len(), residual.len());
    debug_assert_eq!(vertices.len(), hints.len());
    let t = Trial {
        setup,
        vertices,
        target,
        r,
        effort,
    };
    #[cfg(target_arch = "x86_64")]
    if wide && effort != Effort::Small {
        // SAFETY: `wide` is set only where the CPU has AVX2
        unsafe {
            match spatial {
                SPATIAL_NONE => t.run_wide::<SPATIAL_NONE>(base, q_new, residual, hints),
                SPATIAL_MEAN => t.run_wide::<SPATIAL_MEAN>(base, q_new, residual, hints),
                _ => t.run_wide::<SPATIAL_PARALLELOGRAM>(base, q_new, residual, hints),
            }
        }
        return;
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = wide;
    match spatial {
        SPATIAL_NONE => t.run::<SPATIAL_NONE>(base, q_new, residual, hints),
        SPATIAL_MEAN => t.run::<SPATIAL_MEAN>(base, q_new, residual, hints),
        _ => t.run::<SPATIAL_PARALLELOGRAM>(base, q_new, residual, hints),
    }
}

/// The read-only inputs of a [`trial`].
struct Trial<'a> {
    setup: &'a GarmentSetup,
    vertices: &'a [u32],
    target: &'a [[f64; 3]],
    r: f64,
    effort: Effort,
}

impl Trial<'_> {
    #[inline(always)]
    fn run<const SP: u32>(
        &self,
        base: &[[i32; 3]],
        q_new: &mut [[i32; 3]],
        residual: &mut [[i32; 3]],
        hints: &mut [[u8; 3]],
    ) {
        for ((&v, e), h) in self.vertices.iter().zip(residual).zip(hints) {
            let v = v as usize;
            let (p, hint) = predict_in::<SP>(v, &self.setup.predictor[v], base, q_new);
            *h = hint;
            let q = snap(p, self.target[v], self.r, self.effort);
            q_new[v] = q;
            *e = std::array::from_fn(|k| (i64::from(q[k]) - p[k]) as i32);
        }
    }
}

#[cfg(target_arch = "x86_64")]
impl Trial<'_> {
    /// [`Trial::run`] for [`Effort::Fast`] and [`Effort::Fastest`] with a vertex's three
    /// axes in SIMD lanes (the fourth lane zero): the offsets, prediction and hints in
    /// 32-bit integer lanes (every value below 2^25), the snapping in 64-bit float
    /// lanes, each sum taken in the scalar code's order, so the points and residuals
    /// are the scalar code's bit for bit.
    ///
    /// # Safety
    /// The CPU must support AVX2.
    #[target_feature(enable = "avx2")]
    unsafe fn run_wide<const SP: u32>(
        &self,
        base: &[[i32; 3]],
        q_new: &mut [[i32; 3]],
        residual: &mut [[i32; 3]],
        hints: &mut [[u8; 3]],
    ) {
        use std::arch::x86_64::*;
        let r = self.r;
        let r2 = r * r;
        let lim = _mm256_set1_pd(f64::from(LATTICE_LIMIT - 1));
        let sign = _mm256_set1_pd(-0.0);
        let magic = _mm256_set1_pd(6_755_399_441_055_744.0);
        // x, y by one 8-byte load, z inserted: the fourth lane zero
        let lanes = |a: &[i32; 3]| {
            // SAFETY: reads the 8 bytes of x and y, inside the array
            _mm_insert_epi32::<2>(unsafe { _mm_loadl_epi64(a.as_ptr().cast()) }, a[2])
        };
        // x, y by one 8-byte store, z extracted
        let store = |to: &mut [i32; 3], v: __m128i| {
            // SAFETY: writes the 8 bytes of x and y, inside the array
            unsafe { _mm_storel_epi64(to.as_mut_ptr().cast(), v) };
            to[2] = _mm_extract_epi32::<2>(v);
        };
        let inside = |q: __m256d| {
            _mm256_movemask_pd(_mm256_cmp_pd::<_CMP_LT_OQ>(_mm256_andnot_pd(sign, q), lim)) == 0xf
        };
        let sum3 = |v: __m256d| {
            let lo = _mm256_castpd256_pd128(v);
            let hi = _mm256_extractf128_pd::<1>(v);
            (_mm_cvtsd_f64(lo) + _mm_cvtsd_f64(_mm_unpackhi_pd(lo, lo))) + _mm_cvtsd_f64(hi)
        };
        // the hint of two offsets: 2 · min(bit length of |a − b|, 4), plus one for the
        // odd sum of a mean
        let hint = |oa: __m128i, ob: __m128i, mean: bool| {
            let d = _mm_abs_epi32(_mm_sub_epi32(oa, ob));
            let c = _mm_add_epi32(
                _mm_add_epi32(
                    _mm_cmpgt_epi32(d, _mm_setzero_si128()),
                    _mm_cmpgt_epi32(d, _mm_set1_epi32(1)),
                ),
                _mm_add_epi32(
                    _mm_cmpgt_epi32(d, _mm_set1_epi32(3)),
                    _mm_cmpgt_epi32(d, _mm_set1_epi32(7)),
                ),
            );
            // c is −class per lane
            let mut h = _mm_sub_epi32(_mm_setzero_si128(), _mm_add_epi32(c, c));
            if mean {
                h = _mm_add_epi32(h, _mm_and_si128(_mm_add_epi32(oa, ob), _mm_set1_epi32(1)));
            }
            [
                _mm_cvtsi128_si32(h) as u8,
                _mm_extract_epi32::<1>(h) as u8,
                _mm_extract_epi32::<2>(h) as u8,
            ]
        };
        for ((&v, e), h) in self.vertices.iter().zip(residual).zip(hints) {
            let v = v as usize;
            let refs = &self.setup.predictor[v];
            let off = |u: u32| {
                let u = u as usize;
                _mm_sub_epi32(lanes(&q_new[u]), lanes(&base[u]))
            };
            let zero = _mm_setzero_si128();
            let (s, hv): (__m128i, [u8; 3]) = match SP {
                SPATIAL_NONE => (zero, [0; 3]),
                SPATIAL_MEAN => match (refs[0], refs[1]) {
                    (NO_REF, _) => (zero, [0; 3]),
                    (a, NO_REF) => (off(a), [0; 3]),
                    (a, b) => {
                        let (oa, ob) = (off(a), off(b));
                        (
                            _mm_srai_epi32::<1>(_mm_add_epi32(oa, ob)),
                            hint(oa, ob, true),
                        )
                    }
                },
                _ => match (refs[0], refs[1], refs[2]) {
                    (NO_REF, _, _) => (zero, [0; 3]),
                    (a, NO_REF, _) => (off(a), [0; 3]),
                    (a, b, NO_REF) => {
                        let (oa, ob) = (off(a), off(b));
                        (
                            _mm_srai_epi32::<1>(_mm_add_epi32(oa, ob)),
                            hint(oa, ob, true),
                        )
                    }
                    (a, b, c) => {
                        let (oa, ob, oc) = (off(a), off(b), off(c));
                        (
                            _mm_sub_epi32(_mm_add_epi32(oa, ob), oc),
                            hint(oa, ob, false),
                        )
                    }
                },
            };
            *h = hv;
            let p = _mm_add_epi32(lanes(&base[v]), s);
            let x = self.target[v];
            let pd = _mm256_cvtepi32_pd(p);
            let xd = _mm256_set_pd(0.0, x[2], x[1], x[0]);
            let d = _mm256_sub_pd(pd, xd);
            let len2 = sum3(_mm256_mul_pd(d, d));
            let q = 'snap: {
                if len2 <= r2 && inside(pd) {
                    break 'snap p;
                }
                if len2 > 0.0 {
                    let t = PULL * r * inverse_sqrt(len2);
                    let m = _mm256_add_pd(xd, _mm256_mul_pd(d, _mm256_set1_pd(t)));
                    let q = _mm256_sub_pd(_mm256_add_pd(m, magic), magic);
                    let eq = _mm256_sub_pd(q, xd);
                    if sum3(_mm256_mul_pd(eq, eq)) <= r2 && inside(q) {
                        break 'snap _mm256_cvtpd_epi32(q);
                    }
                }
                _mm256_cvtpd_epi32(_mm256_sub_pd(_mm256_add_pd(xd, magic), magic))
            };
            store(&mut q_new[v], q);
            store(e, _mm_sub_epi32(q, p));
        }
    }
}
