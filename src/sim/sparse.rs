//! The simulator's sparse symmetric system: a 3×3-block pattern built once per garment
//! (vertex pairs that share a triangle or a bending stencil), values refilled every
//! Newton step, and faer's supernodal Cholesky with the symbolic analysis done once and
//! the numeric factorisation redone in place (no allocation per iteration).

use faer::dyn_stack::{MemBuffer, MemStack};
use faer::sparse::linalg::cholesky::{SymbolicCholesky, factorize_symbolic_cholesky};
use faer::sparse::{SparseColMatRef, SymbolicSparseColMatRef};
use faer::{Conj, MatMut, Par, Side};

/// Why a factorisation failed.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum FactorError {
    /// The matrix is not numerically positive definite.
    #[error("system matrix is not positive definite")]
    NotPositiveDefinite,
    /// faer could not allocate its workspace.
    #[error("sparse factorisation: {0}")]
    Faer(String),
}

/// Lower triangle (CSC) of a symmetric 3n×3n matrix with a fixed block pattern.
pub(crate) struct BlockSparse {
    n: usize,
    col_ptr: Vec<usize>,
    row_idx: Vec<usize>,
    /// Values, in CSC order.
    pub(crate) values: Vec<f64>,
    /// For each vertex, its neighbours with larger index (sorted).
    upper: Vec<Vec<u32>>,
    symbolic: SymbolicCholesky<usize>,
    factor: Vec<f64>,
    factor_stack: MemBuffer,
    factored: bool,
}

impl BlockSparse {
    /// Pattern from vertex pairs (each unordered pair once or more; self pairs implied).
    pub(crate) fn new(
        vertices: usize,
        pairs: impl IntoIterator<Item = (u32, u32)>,
    ) -> Result<Self, FactorError> {
        let mut upper: Vec<Vec<u32>> = vec![Vec::new(); vertices];
        for (a, b) in pairs {
            if a != b {
                let (lo, hi) = (a.min(b), a.max(b));
                upper[lo as usize].push(hi);
            }
        }
        for u in &mut upper {
            u.sort_unstable();
            u.dedup();
        }
        let n = 3 * vertices;
        let mut col_ptr = Vec::with_capacity(n + 1);
        let mut row_idx = Vec::new();
        col_ptr.push(0);
        for v in 0..vertices {
            for b in 0..3 {
                for a in b..3 {
                    row_idx.push(3 * v + a);
                }
                for &w in &upper[v] {
                    for a in 0..3 {
                        row_idx.push(3 * w as usize + a);
                    }
                }
                col_ptr.push(row_idx.len());
            }
        }
        let sym = SymbolicSparseColMatRef::new_checked(n, n, &col_ptr, None, &row_idx);
        let symbolic =
            factorize_symbolic_cholesky(sym, Side::Lower, Default::default(), Default::default())
                .map_err(|e| FactorError::Faer(format!("{e:?}")))?;
        let factor = vec![0.0; symbolic.len_val()];
        let req = symbolic.factorize_numeric_llt_scratch::<f64>(Par::Seq, Default::default());
        let factor_stack =
            MemBuffer::try_new(req).map_err(|e| FactorError::Faer(format!("{e:?}")))?;
        let values = vec![0.0; row_idx.len()];
        Ok(Self {
            n,
            col_ptr,
            row_idx,
            values,
            upper,
            symbolic,
            factor,
            factor_stack,
            factored: false,
        })
    }

    /// Whether the block (vi, vj) is in the pattern (diagonal blocks always are).
    pub(crate) fn has_block(&self, vi: u32, vj: u32) -> bool {
        vi == vj || self.slot(vi.max(vj), vi.min(vj)).is_some()
    }

    /// This pattern with the vertex pairs `extra` added (values zero, analysed anew).
    pub(crate) fn grown(
        &self,
        extra: impl IntoIterator<Item = (u32, u32)>,
    ) -> Result<Self, FactorError> {
        let own = self
            .upper
            .iter()
            .enumerate()
            .flat_map(|(v, u)| u.iter().map(move |&w| (v as u32, w)));
        Self::new(self.n / 3, own.chain(extra).collect::<Vec<_>>())
    }

    /// Sets every value to zero.
    pub(crate) fn clear(&mut self) {
        self.values.fill(0.0);
        self.factored = false;
    }

    #[inline]
    fn slot(&self, vi: u32, vj: u32) -> Option<usize> {
        // position of neighbour vi in vj's upper list
        self.upper[vj as usize].binary_search(&vi).ok()
    }

    /// Adds the 3×3 block `m` (`m[a][b]` = entry (3vi + a, 3vj + b)) of a symmetric
    /// matrix. Each off-diagonal block needs adding once (its transpose is implied).
    ///
    /// # Panics
    /// If (vi, vj) is not in the pattern (a programming error).
    #[track_caller]
    pub(crate) fn add_block(&mut self, vi: u32, vj: u32, m: &[[f64; 3]; 3]) {
        self.factored = false;
        if vi == vj {
            for b in 0..3 {
                let base = self.col_ptr[3 * vj as usize + b];
                for a in b..3 {
                    self.values[base + (a - b)] += 0.5 * (m[a][b] + m[b][a]);
                }
            }
            return;
        }
        let (lo, hi, transpose) = if vi > vj {
            (vj, vi, false)
        } else {
            (vi, vj, true)
        };
        let Some(k) = self.slot(hi, lo) else {
            panic!("block ({vi}, {vj}) is not in the sparsity pattern");
        };
        for b in 0..3 {
            let base = self.col_ptr[3 * lo as usize + b] + (3 - b) + 3 * k;
            for a in 0..3 {
                self.values[base + a] += if transpose { m[b][a] } else { m[a][b] };
            }
        }
    }

    /// Adds `d` to every diagonal entry of vertex `v`'s block.
    pub(crate) fn add_diagonal(&mut self, v: u32, d: f64) {
        self.factored = false;
        for b in 0..3 {
            self.values[self.col_ptr[3 * v as usize + b]] += d;
        }
    }

    /// Replaces the rows and columns of the given DOFs by identity rows (pinned DOFs).
    pub(crate) fn pin(&mut self, dof: &[bool]) {
        for c in 0..self.n {
            for k in self.col_ptr[c]..self.col_ptr[c + 1] {
                let r = self.row_idx[k];
                if dof[r] || dof[c] {
                    self.values[k] = if r == c { 1.0 } else { 0.0 };
                }
            }
        }
    }

    /// y = A x (for residual checks and tests).
    #[cfg(test)]
    pub(crate) fn mul(&self, x: &[f64], y: &mut [f64]) {
        y.fill(0.0);
        for c in 0..self.n {
            for k in self.col_ptr[c]..self.col_ptr[c + 1] {
                let r = self.row_idx[k];
                let v = self.values[k];
                y[r] += v * x[c];
                if r != c {
                    y[c] += v * x[r];
                }
            }
        }
    }

    /// Numeric Cholesky factorisation of the current values (reusing the symbolic
    /// analysis and all buffers).
    pub(crate) fn factorize(&mut self) -> Result<(), FactorError> {
        let sym = SymbolicSparseColMatRef::new_checked(
            self.n,
            self.n,
            &self.col_ptr,
            None,
            &self.row_idx,
        );
        let mat = SparseColMatRef::new(sym, &self.values);
        let stack = MemStack::new(&mut self.factor_stack);
        self.symbolic
            .factorize_numeric_llt::<f64>(
                &mut self.factor,
                mat,
                Side::Lower,
                Default::default(),
                Par::Seq,
                stack,
                Default::default(),
            )
            .map_err(|_| FactorError::NotPositiveDefinite)?;
        self.factored = true;
        Ok(())
    }

    /// Solves A X = B in place for the columns of `rhs` (3n × k) with the last
    /// factorisation.
    ///
    /// # Panics
    /// If [`BlockSparse::factorize`] has not succeeded since the last change.
    #[track_caller]
    pub(crate) fn solve_in_place(&self, rhs: MatMut<'_, f64>) {
        assert!(self.factored, "solve before factorize");
        let k = rhs.ncols();
        let req = self.symbolic.solve_in_place_scratch::<f64>(k, Par::Seq);
        let mut buf = MemBuffer::new(req);
        let llt = faer::sparse::linalg::cholesky::LltRef::<'_, usize, f64>::new(
            &self.symbolic,
            &self.factor,
        );
        llt.solve_in_place_with_conj(Conj::No, rhs, Par::Seq, MemStack::new(&mut buf));
    }

    /// Solves A x = b for one right-hand side, in place.
    pub(crate) fn solve_vec(&self, b: &mut [f64]) {
        let n = b.len();
        let m = faer::MatMut::from_column_major_slice_mut(b, n, 1);
        self.solve_in_place(m);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn factor_and_solve_a_small_block_system() {
        // a chain of 4 vertices, each block 4I on the diagonal and −I between neighbours
        let mut m = BlockSparse::new(4, [(0, 1), (1, 2), (2, 3)]).expect("pattern");
        let eye = |s: f64| [[s, 0.0, 0.0], [0.0, s, 0.0], [0.0, 0.0, s]];
        for v in 0..4 {
            m.add_block(v, v, &eye(4.0));
        }
        for v in 0..3 {
            m.add_block(v + 1, v, &eye(-1.0));
        }
        m.add_block(0, 1, &[[0.0, 0.5, 0.0], [0.0, 0.0, 0.0], [0.0, 0.0, 0.0]]);
        let x: Vec<f64> = (0..12).map(|i| (i as f64 * 0.7).sin()).collect();
        let mut b = vec![0.0; 12];
        m.mul(&x, &mut b);
        m.factorize().expect("spd");
        m.solve_vec(&mut b);
        for (a, e) in b.iter().zip(&x) {
            assert!((a - e).abs() < 1e-12);
        }
        m.clear();
        m.add_diagonal(0, -1.0);
        assert_eq!(m.factorize(), Err(FactorError::NotPositiveDefinite));
    }
}
