//! Finding the self-contact pairs: a grid search over the garment's triangles and
//! edges, and a cache that answers later searches from an earlier, wider one.

use glam::DVec3;

use crate::mesh::closest_on_triangle_f64;

use super::edges::segment_closest;
use super::{Contact, EDGE_PAIR, Pair, SelfContact};

/// How much farther than asked [`SelfContact::pairs_cached`] searches when it must
/// search, metres: its pairs then serve every later search of the same reach until some
/// vertex has moved half this far. (A performance setting with no effect on results:
/// of 1, 2, 4 and 8 mm measured on a bake shard, 2 mm was never the slowest.)
const PAIR_CACHE_SLACK: f64 = 0.002;

/// Pairs found within a wider reach than was asked, with the positions they were found
/// at. A pair's distance changes by at most twice the longest vertex move relative to
/// the others ([`relative_move`]), so when that is at most `drift` since, the pairs within `reach` are among these if
/// they were found within reach + 2·drift, and filtering them by the search's own test
/// gives the same pairs in the same order as a new search, without building its grid.
/// Newton's iterations search the margin and each step's reach many times over a state
/// that moves a fraction of a millimetre between them.
#[derive(Clone, Debug, Default)]
pub(crate) struct PairCache {
    /// Positions the pairs were found at (empty: none found yet).
    at: Vec<DVec3>,
    /// The reach they were found within, metres.
    reach: f64,
    /// The pairs, in (vertex, triangle) order.
    pairs: Vec<Pair>,
}

impl SelfContact {
    /// Every vertex–triangle pair at `y` closer than `reach` (metres) that is a contact
    /// (the triangle does not hold the vertex, and the pair is not excluded), sorted by
    /// vertex then triangle.
    ///
    /// Search: each triangle is binned, counting-sort style, into
    /// the cells of a uniform grid over the finite vertices' box that its own box, grown
    /// by `reach`, overlaps (so within each cell triangles stay in index order), and
    /// each vertex tests the triangles of its cell, and those spread over more than
    /// [`MAX_TRIANGLE_CELLS`] cells (a diverging state), which are tested by every
    /// vertex rather than filling memory. The result does not depend on the grid: it is
    /// every such pair whose four vertices are finite.
    pub(crate) fn pairs(&self, y: &[DVec3], triangles: &[[u32; 3]], reach: f64) -> Vec<Pair> {
        let mut out = Vec::new();
        let Some(grid) = Grid::new(y, self.cell.max(reach)) else {
            return out;
        };
        let mut spans: Vec<Option<[[usize; 3]; 2]>> = Vec::with_capacity(triangles.len());
        let mut huge = Vec::new();
        for (t, tri) in triangles.iter().enumerate() {
            let [a, b, c] = tri.map(|v| y[v as usize]);
            // a triangle with a vertex that is not finite is no contact (its box, made
            // with `min`/`max`, would ignore a NaN)
            if !(a.is_finite() && b.is_finite() && c.is_finite()) {
                spans.push(None);
                continue;
            }
            let span = grid.span(
                a.min(b).min(c) - DVec3::splat(reach),
                a.max(b).max(c) + DVec3::splat(reach),
            );
            if span.is_none() {
                huge.push(t as u32);
            }
            spans.push(span);
        }
        let binned = grid.bin(&spans);
        for (v, &p) in y.iter().enumerate() {
            if !p.is_finite() {
                continue;
            }
            for t in merged(binned.cell(grid.cell_of(p)), &huge) {
                let tri = &triangles[t as usize];
                if tri.contains(&(v as u32)) {
                    continue;
                }
                if self.excluded.binary_search(&(v as u32, t)).is_ok() {
                    continue;
                }
                if within(p, tri.map(|w| y[w as usize]), reach) {
                    out.push((v as u32, t));
                }
            }
        }
        self.edge_pairs(y, reach, &grid, &mut out);
        out
    }

    /// Appends the edge–edge contact pairs closer than `reach` at `y` (edges sharing
    /// no vertex, not excluded), ascending. Each edge is binned into the cells its box
    /// grown by `reach` overlaps, and each edge e tests the edges f > e binned in the
    /// cells its own box overlaps (any point of e within reach of f lies in one of
    /// them), and those spread over too many cells (tested by every edge).
    fn edge_pairs(&self, y: &[DVec3], reach: f64, grid: &Grid, out: &mut Vec<Pair>) {
        let ends = |e: [u32; 2]| {
            let (a, b) = (y[e[0] as usize], y[e[1] as usize]);
            (a.is_finite() && b.is_finite()).then_some((a, b))
        };
        let mut own: Vec<Option<[[usize; 3]; 2]>> = Vec::with_capacity(self.edges.len());
        let mut spans: Vec<Option<[[usize; 3]; 2]>> = Vec::with_capacity(self.edges.len());
        let mut huge = Vec::new();
        for (i, &e) in self.edges.iter().enumerate() {
            let Some((a, b)) = ends(e) else {
                own.push(None);
                spans.push(None);
                continue;
            };
            let span = grid.span(
                a.min(b) - DVec3::splat(reach),
                a.max(b) + DVec3::splat(reach),
            );
            if span.is_none() {
                huge.push(i as u32);
            }
            spans.push(span);
            own.push(grid.span(a.min(b), a.max(b)));
        }
        let binned = grid.bin(&spans);
        // the last edge each edge was tested against (each pair once, however many
        // cells the two share)
        let mut seen = vec![u32::MAX; self.edges.len()];
        let mut found = Vec::new();
        for (i, &e) in self.edges.iter().enumerate() {
            let Some((a, b)) = ends(e) else { continue };
            let i = i as u32;
            found.clear();
            let mut test = |f: u32| {
                if f <= i || seen[f as usize] == i {
                    return;
                }
                seen[f as usize] = i;
                let g = self.edges[f as usize];
                if g.contains(&e[0]) || g.contains(&e[1]) {
                    return;
                }
                let Some((c, d)) = ends(g) else { return };
                if !segments_within([a, b, c, d], reach) {
                    return;
                }
                if self.excluded.binary_search(&(EDGE_PAIR | i, f)).is_err() {
                    found.push(f);
                }
            };
            match own[i as usize] {
                Some([lo, hi]) => {
                    grid.for_each_cell(lo, hi, |cell| {
                        for &f in binned.cell(cell) {
                            test(f);
                        }
                    });
                    for &f in &huge {
                        test(f);
                    }
                }
                // an edge spread over too many cells (a diverging state) tests them all
                None => (0..self.edges.len() as u32).for_each(&mut test),
            }
            found.sort_unstable();
            out.extend(found.iter().map(|&f| (EDGE_PAIR | i, f)));
        }
    }

    /// Whether the pair's vertices are finite at `y` and the pair is closer than
    /// `reach` there (the test of every pair search).
    fn pair_within(&self, y: &[DVec3], c: Contact, reach: f64) -> bool {
        let x = c.stencil().map(|w| y[w as usize]);
        if !x.iter().all(|p| p.is_finite()) {
            return false;
        }
        match c {
            Contact::Vertex { .. } => within(x[0], [x[1], x[2], x[3]], reach),
            Contact::Edges { .. } => segments_within(x, reach),
        }
    }

    /// Every contact pair within `reach` at `y`, as [`SelfContact::pairs`] gives them,
    /// answered from `cache` where it can be: see [`PairCache`].
    pub(crate) fn pairs_cached(
        &self,
        y: &[DVec3],
        triangles: &[[u32; 3]],
        reach: f64,
        cache: &mut PairCache,
    ) -> Vec<Pair> {
        let among = self.cache_covering(y, triangles, reach, cache);
        self.pairs_among(y, triangles, among, reach)
    }

    /// The pairs of [`SelfContact::pairs_reaching`] (moves of at most `moved[v]` per
    /// vertex from a common shift, `reach` their global bound: the margin plus twice
    /// the farthest), filtered straight from `cache`: each pair's own bound lies
    /// within the global one, so the global filter of [`SelfContact::pairs_cached`]
    /// would only compute every distance twice.
    pub(crate) fn pairs_cached_reaching(
        &self,
        y: &[DVec3],
        triangles: &[[u32; 3]],
        reach: f64,
        cache: &mut PairCache,
        margin: f64,
        moved: &[f64],
    ) -> Vec<Pair> {
        let among = self.cache_covering(y, triangles, reach, cache);
        self.pairs_reaching(y, triangles, among, margin, moved)
    }

    /// `cache`'s pairs, searched anew unless they hold every pair within `reach` at `y`
    /// (see [`PairCache`]).
    fn cache_covering<'c>(
        &self,
        y: &[DVec3],
        triangles: &[[u32; 3]],
        reach: f64,
        cache: &'c mut PairCache,
    ) -> &'c [Pair] {
        let drift = if cache.at.len() == y.len() {
            relative_move(y.len(), |v| y[v] - cache.at[v])
        } else {
            f64::INFINITY
        };
        // (false for a NaN drift, from a non-finite state: it searches anew)
        let covered = reach + 2.0 * drift * (1.0 + 1e-9) + 1e-12 <= cache.reach;
        if !covered {
            let wider = reach + PAIR_CACHE_SLACK;
            cache.pairs = self.pairs(y, triangles, wider);
            cache.at.clear();
            cache.at.extend_from_slice(y);
            cache.reach = wider;
        }
        &cache.pairs
    }

    /// The pairs of `among` (in their order) within `reach` at `y`: the same pairs as
    /// [`SelfContact::pairs`] gives when `among` holds every contact pair within `reach`
    /// at `y` (pairs found within a wider reach of a state no vertex has since moved
    /// far from), by the same test, without building a grid.
    pub(crate) fn pairs_among(
        &self,
        y: &[DVec3],
        triangles: &[[u32; 3]],
        among: &[Pair],
        reach: f64,
    ) -> Vec<Pair> {
        among
            .iter()
            .copied()
            .filter(|&pair| self.pair_within(y, self.contact(pair, triangles), reach))
            .collect()
    }

    /// The pairs of `among` (in their order) that a move of vertex v by at most
    /// `moved[v]` from a common shift ([`relative_moves`]) could bring within `margin`,
    /// or through each other: those closer at `y` than `margin` plus the most one side of
    /// the pair moves plus the most the other side does (a point of a triangle or an
    /// edge moves no farther than its farthest corner). A Newton step's pairs: the
    /// global bound, twice the farthest move, takes in pairs of cloth that hardly moves
    /// wherever one vertex moves far. `among` must hold every pair within that global
    /// bound (as [`SelfContact::pairs_among`]).
    pub(crate) fn pairs_reaching(
        &self,
        y: &[DVec3],
        triangles: &[[u32; 3]],
        among: &[Pair],
        margin: f64,
        moved: &[f64],
    ) -> Vec<Pair> {
        among
            .iter()
            .copied()
            .filter(|&pair| {
                let c = self.contact(pair, triangles);
                // (a NaN move keeps the pair)
                let reach = pair_reach(c, margin, moved);
                reach.is_nan() || self.pair_within(y, c, reach)
            })
            .collect()
    }
}

/// How far vertex v's move `moves(v)` (metres; v < `n`) strays from the common part of
/// all the moves: the largest distance of a move from the centre of the moves' box.
/// Moving every vertex by one vector changes no pair's distance, so when each vertex
/// moves by `moves(v)` no pair's distance changes by more than twice this (the bound
/// the searches need: a cloth falling or carried as a whole moves far but bends
/// little). Not finite when a move is not (0 for no vertices).
pub(crate) fn relative_move(n: usize, moves: impl Fn(usize) -> DVec3) -> f64 {
    let centre = common_shift(n, &moves);
    (0..n).map(|v| moves(v).distance(centre)).fold(0.0, nan_max)
}

/// [`relative_move`], with each vertex's own distance from the common shift into `out`
/// (cleared first; metres, one per vertex): a pair's distance changes by at most the
/// largest of its one side's plus the largest of its other side's
/// ([`SelfContact::pairs_reaching`]).
pub(crate) fn relative_moves(n: usize, moves: impl Fn(usize) -> DVec3, out: &mut Vec<f64>) -> f64 {
    let centre = common_shift(n, &moves);
    out.clear();
    out.extend((0..n).map(|v| moves(v).distance(centre)));
    out.iter().copied().fold(0.0, nan_max)
}

/// The centre of the box of the moves (NaN components ignored, as `min`/`max` do;
/// a move that is not finite still shows in its own distance from it).
fn common_shift(n: usize, moves: &impl Fn(usize) -> DVec3) -> DVec3 {
    let (mut lo, mut hi) = (DVec3::splat(f64::INFINITY), DVec3::splat(f64::NEG_INFINITY));
    for v in 0..n {
        let m = moves(v);
        lo = lo.min(m);
        hi = hi.max(m);
    }
    (lo + hi) * 0.5
}

/// How close a pair must be for moves of at most `moved[v]` per vertex from a common
/// shift (metres, [`relative_moves`]) to bring it within `margin`, or through itself:
/// the margin plus the farthest move of one side plus that of the other (a point of a
/// triangle or an edge moves no farther than its farthest corner), with the slack of
/// the global bound for rounding. NaN if a move is.
pub(super) fn pair_reach(c: Contact, margin: f64, moved: &[f64]) -> f64 {
    let most = |w: &[u32]| w.iter().map(|&w| moved[w as usize]).fold(0.0, nan_max);
    let sides = match c {
        Contact::Vertex { v, tri } => most(&[v]) + most(&tri),
        Contact::Edges { e, f, .. } => most(&e) + most(&f),
    };
    margin + sides * (1.0 + 1e-9) + 1e-12
}

/// A lower bound of a pair's distance at its stencil's points `x`, metres: the gap
/// between the vertex and the triangle's box, or between the two edges' boxes.
pub(super) fn box_gap(c: Contact, x: [DVec3; 4]) -> f64 {
    let outside = match c {
        Contact::Vertex { .. } => {
            (x[1].min(x[2]).min(x[3]) - x[0]).max(x[0] - x[1].max(x[2]).max(x[3]))
        }
        Contact::Edges { .. } => {
            (x[0].min(x[1]) - x[2].max(x[3])).max(x[2].min(x[3]) - x[0].max(x[1]))
        }
    };
    outside.max(DVec3::ZERO).length()
}

/// The larger of `m` and `d`, or NaN if `d` is (not `f64::max`, which passes over a
/// NaN).
fn nan_max(m: f64, d: f64) -> f64 {
    if d > m || d.is_nan() { d } else { m }
}

/// Most cells one triangle may be binned into; a triangle spread over more (a
/// diverging state) is tested against every vertex instead.
const MAX_TRIANGLE_CELLS: usize = 4096;

/// Most cells of the search grid: a state spread wider (a diverging one) gets coarser
/// cells, which costs time but not correctness.
const MAX_GRID_CELLS: usize = 1 << 21;

/// Items binned into a [`Grid`]'s cells, counting-sort style: cell c holds
/// `entries[start[c]..start[c + 1]]`, in item order.
struct Binned {
    start: Vec<u32>,
    entries: Vec<u32>,
}

impl Binned {
    fn cell(&self, c: usize) -> &[u32] {
        &self.entries[self.start[c] as usize..self.start[c + 1] as usize]
    }
}

/// A uniform grid of cubic cells over a box: cell (i, j, k) holds points with
/// `origin + h·(i, j, k) ≤ p < origin + h·(i + 1, j + 1, k + 1)`; points outside the box
/// are clamped into its border cells.
struct Grid {
    origin: DVec3,
    /// Cell edge, metres.
    h: f64,
    dims: [usize; 3],
}

impl Grid {
    /// A grid of cells at least `h` wide over the finite points of `y`, or `None` when
    /// none is finite.
    fn new(y: &[DVec3], h: f64) -> Option<Self> {
        let (lo, hi) =
            y.iter()
                .filter(|p| p.is_finite())
                .fold(None, |acc: Option<(DVec3, DVec3)>, &p| match acc {
                    None => Some((p, p)),
                    Some((lo, hi)) => Some((lo.min(p), hi.max(p))),
                })?;
        let mut h = if h.is_finite() && h > 0.0 { h } else { 1.0 };
        loop {
            let n = ((hi - lo) / h).floor() + DVec3::ONE;
            let cells = n.element_product();
            if cells.is_finite() && cells <= MAX_GRID_CELLS as f64 {
                return Some(Self {
                    origin: lo,
                    h,
                    dims: [n.x as usize, n.y as usize, n.z as usize],
                });
            }
            h *= 2.0;
        }
    }

    fn cells(&self) -> usize {
        self.dims.iter().product()
    }

    fn coords(&self, p: DVec3) -> [usize; 3] {
        let c = ((p - self.origin) / self.h).floor();
        // clamped into the grid (`as` saturates a huge value; NaN.max(0) is 0)
        let at = |x: f64, n: usize| (x.max(0.0) as usize).min(n - 1);
        [
            at(c.x, self.dims[0]),
            at(c.y, self.dims[1]),
            at(c.z, self.dims[2]),
        ]
    }

    fn cell_of(&self, p: DVec3) -> usize {
        let [i, j, k] = self.coords(p);
        (i * self.dims[1] + j) * self.dims[2] + k
    }

    /// The cell range covering the box `lo..hi`, or `None` if it is not finite or spans
    /// more than [`MAX_TRIANGLE_CELLS`] cells.
    fn span(&self, lo: DVec3, hi: DVec3) -> Option<[[usize; 3]; 2]> {
        if !(lo.is_finite() && hi.is_finite()) {
            return None;
        }
        let (a, b) = (self.coords(lo), self.coords(hi));
        let cells: usize = (0..3).map(|i| b[i] - a[i] + 1).product();
        (cells <= MAX_TRIANGLE_CELLS).then_some([a, b])
    }

    /// Item i binned into the cells of `spans[i]` (none where it is `None`).
    fn bin(&self, spans: &[Option<[[usize; 3]; 2]>]) -> Binned {
        let mut start = vec![0u32; self.cells() + 1];
        for &[lo, hi] in spans.iter().flatten() {
            self.for_each_cell(lo, hi, |cell| start[cell + 1] += 1);
        }
        for i in 1..start.len() {
            start[i] += start[i - 1];
        }
        let mut fill = start.clone();
        let mut entries = vec![0u32; start[self.cells()] as usize];
        for (i, span) in spans.iter().enumerate() {
            if let Some([lo, hi]) = *span {
                self.for_each_cell(lo, hi, |cell| {
                    entries[fill[cell] as usize] = i as u32;
                    fill[cell] += 1;
                });
            }
        }
        Binned { start, entries }
    }

    fn for_each_cell(&self, lo: [usize; 3], hi: [usize; 3], mut f: impl FnMut(usize)) {
        for i in lo[0]..=hi[0] {
            for j in lo[1]..=hi[1] {
                let row = (i * self.dims[1] + j) * self.dims[2];
                for k in lo[2]..=hi[2] {
                    f(row + k);
                }
            }
        }
    }
}

/// Whether the segments (x₀, x₁) and (x₂, x₃) are closer than `reach` (metres): their
/// boxes first, then their nearest points (the edge–edge test of every pair search).
pub(super) fn segments_within(x: [DVec3; 4], reach: f64) -> bool {
    boxes_within(x, reach) && segment_gap(x) < reach
}

/// Whether the boxes of the segments (x₀, x₁) and (x₂, x₃) are closer than `reach`
/// (metres): a necessary condition of [`segments_within`], without the nearest points.
pub(super) fn boxes_within(x: [DVec3; 4], reach: f64) -> bool {
    let outside = (x[0].min(x[1]) - x[2].max(x[3]))
        .max(x[2].min(x[3]) - x[0].max(x[1]))
        .max(DVec3::ZERO);
    outside.length_squared() < reach * reach
}

/// Distance between the segments (x₀, x₁) and (x₂, x₃), metres (infinite for a
/// degenerate or non-finite one).
pub(super) fn segment_gap(x: [DVec3; 4]) -> f64 {
    match segment_closest(x[0], x[1], x[2], x[3]) {
        Some((s, t, _, _)) => x[0].lerp(x[1], s).distance(x[2].lerp(x[3], t)),
        None => f64::INFINITY,
    }
}

/// Whether the point `p` is closer than `reach` (metres) to the triangle `[a, b, c]`:
/// the triangle's box first (most of a grid cell's triangles are out of reach), then
/// its nearest point. The one test of every pair search, so that searches agree.
fn within(p: DVec3, [a, b, c]: [DVec3; 3], reach: f64) -> bool {
    let outside = (a.min(b).min(c) - p)
        .max(p - a.max(b).max(c))
        .max(DVec3::ZERO);
    if outside.length_squared() >= reach * reach {
        return false;
    }
    let (q, _, _) = closest_on_triangle_f64(p, a, b, c);
    p.distance_squared(q) < reach * reach
}

/// The union of two ascending lists without repeats, ascending.
fn merged<'a>(a: &'a [u32], b: &'a [u32]) -> impl Iterator<Item = u32> + 'a {
    let (mut i, mut j) = (0, 0);
    std::iter::from_fn(move || {
        let (x, y) = (a.get(i).copied(), b.get(j).copied());
        let next = match (x, y) {
            (Some(x), Some(y)) => x.min(y),
            (Some(v), None) | (None, Some(v)) => v,
            (None, None) => return None,
        };
        i += usize::from(x == Some(next));
        j += usize::from(y == Some(next));
        Some(next)
    })
}
