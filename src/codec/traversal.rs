//! The traversal a setup carries: the order decoders visit the vertices in and each
//! vertex's predictor references, breadth-first from the topology alone or coarse to
//! fine from the garment's rest shape.

use std::collections::HashMap;

use super::CodecError;
use super::format::NO_REF;

/// Breadth-first traversal over vertex adjacency (neighbours in index order, components
/// in order of their lowest vertex) and, per vertex, the best predictor available from
/// vertices already traversed: a parallelogram across an edge of a traversed triangle,
/// else up to two traversed neighbours.
pub(super) fn traversal(
    n: usize,
    triangles: &[[u32; 3]],
) -> Result<(Vec<u32>, Vec<[u32; 3]>), CodecError> {
    let neighbours = neighbours(n, triangles)?;
    let mut incident: Vec<Vec<u32>> = vec![Vec::new(); n];
    let mut opposite: HashMap<(u32, u32), Vec<u32>> = HashMap::new();
    for (ti, t) in triangles.iter().enumerate() {
        for k in 0..3 {
            let (a, b, c) = (t[k], t[(k + 1) % 3], t[(k + 2) % 3]);
            incident[a as usize].push(ti as u32);
            opposite.entry((b.min(c), b.max(c))).or_default().push(a);
        }
    }
    let order = breadth_first(&neighbours);
    let mut done = vec![false; n];
    let mut predictor = vec![[super::format::NO_REF; 3]; n];
    for &v in &order {
        let vi = v as usize;
        predictor[vi] = choose_predictor(
            v,
            &incident[vi],
            triangles,
            &opposite,
            &neighbours[vi],
            &done,
        );
        done[vi] = true;
    }
    Ok((order, predictor))
}

/// Each vertex's neighbours over `triangles` (ascending, no repeats); refuses a
/// triangle index out of range.
fn neighbours(n: usize, triangles: &[[u32; 3]]) -> Result<Vec<Vec<u32>>, CodecError> {
    let mut neighbours: Vec<Vec<u32>> = vec![Vec::new(); n];
    for t in triangles {
        if t.iter().any(|&i| i as usize >= n) {
            return Err(CodecError::Invalid {
                what: "triangle vertex index",
            });
        }
        for k in 0..3 {
            neighbours[t[k] as usize].extend([t[(k + 1) % 3], t[(k + 2) % 3]]);
        }
    }
    for l in &mut neighbours {
        l.sort_unstable();
        l.dedup();
    }
    Ok(neighbours)
}

/// Breadth-first order over `neighbours` (neighbours in their order, components in
/// order of their lowest vertex).
fn breadth_first(neighbours: &[Vec<u32>]) -> Vec<u32> {
    let n = neighbours.len();
    let mut queued = vec![false; n];
    let mut order = Vec::with_capacity(n);
    let mut queue = std::collections::VecDeque::new();
    for start in 0..n {
        if queued[start] {
            continue;
        }
        queued[start] = true;
        queue.push_back(start as u32);
        while let Some(v) = queue.pop_front() {
            order.push(v);
            for &u in &neighbours[v as usize] {
                if !queued[u as usize] {
                    queued[u as usize] = true;
                    queue.push_back(u);
                }
            }
        }
    }
    order
}

fn choose_predictor(
    v: u32,
    incident: &[u32],
    triangles: &[[u32; 3]],
    opposite: &HashMap<(u32, u32), Vec<u32>>,
    neighbours: &[u32],
    done: &[bool],
) -> [u32; 3] {
    for &t in incident {
        let tri = triangles[t as usize];
        let k = tri.iter().position(|&x| x == v).unwrap_or(0);
        let (a, b) = (tri[(k + 1) % 3], tri[(k + 2) % 3]);
        if !(done[a as usize] && done[b as usize]) {
            continue;
        }
        if let Some(&c) = opposite
            .get(&(a.min(b), a.max(b)))
            .and_then(|cs| cs.iter().find(|&&c| c != v && done[c as usize]))
        {
            return [a, b, c];
        }
    }
    let mut refs = neighbours.iter().copied().filter(|&u| done[u as usize]);
    match (refs.next(), refs.next()) {
        (Some(a), Some(b)) => [a, b, NO_REF],
        (Some(a), None) => [a, NO_REF, NO_REF],
        _ => [NO_REF; 3],
    }
}

/// Most candidates a vertex keeps per level (the nearest, by rest distance): bounds the
/// work per vertex whatever the mesh's degrees.
const MAX_CANDIDATES: usize = 12;

/// A level with at most this many vertices is the coarsest: each of its vertices is
/// predicted from any earlier one of them.
const COARSEST: usize = 32;

/// The coarse-to-fine traversal of [`GarmentSetup::with_rest`](super::GarmentSetup::with_rest) and its predictors.
///
/// Levels: the vertices left out of a maximal independent set of the mesh graph (taken
/// greedily in breadth-first order) are the finest level; the set itself, with an edge
/// between two of its vertices that share a neighbour, is the next graph, and so on
/// until at most [`COARSEST`] vertices remain. The traversal runs from the coarsest
/// level to the finest, each level in breadth-first order, so patches hold vertices of
/// one level, which move alike. Every vertex of a finer level has decoded neighbours in
/// the coarser ones all around it: its references a, b are the pair among its decoded
/// neighbours (at its level's graph) whose midpoint lies nearest to it at rest, so the
/// mean predicts its offset by interpolation (the quantisation noise of two references
/// averaged, against three times one reference's for a parallelogram); c is added where
/// a + b − c lies nearer still (keyframes code with the parallelogram, delta patches
/// choose). Costs O(n · MAX_CANDIDATES²).
pub(super) fn hierarchical(
    n: usize,
    triangles: &[[u32; 3]],
    rest: &[[f32; 3]],
) -> Result<(Vec<u32>, Vec<[u32; 3]>), CodecError> {
    let mut graph = neighbours(n, triangles)?;
    let bfs = breadth_first(&graph);
    let mut rank = vec![0u32; n];
    for (i, &v) in bfs.iter().enumerate() {
        rank[v as usize] = i as u32;
    }
    let x = |v: u32| rest[v as usize].map(f64::from);
    let d2 = |a: [f64; 3], b: [f64; 3]| (0..3).map(|k| (a[k] - b[k]).powi(2)).sum::<f64>();
    // keeps the MAX_CANDIDATES nearest to v
    let nearest = |v: u32, mut l: Vec<u32>| {
        l.sort_unstable();
        l.dedup();
        if l.len() > MAX_CANDIDATES {
            let xv = x(v);
            l.sort_by(|&a, &b| d2(x(a), xv).total_cmp(&d2(x(b), xv)).then(a.cmp(&b)));
            l.truncate(MAX_CANDIDATES);
            l.sort_unstable();
        }
        l
    };
    for v in 0..n {
        graph[v] = nearest(v as u32, std::mem::take(&mut graph[v]));
    }
    // per vertex: its level (0 finest) and its candidate references
    let mut level = vec![0u32; n];
    let mut candidates: Vec<Vec<u32>> = vec![Vec::new(); n];
    let mut alive = bfs;
    let mut chosen = vec![false; n];
    let mut blocked = vec![false; n];
    for l in 0.. {
        let coarsest = |alive: &[u32], level: &mut [u32], candidates: &mut [Vec<u32>]| {
            for &v in alive {
                level[v as usize] = l;
                candidates[v as usize] = nearest(v, alive.to_vec());
            }
        };
        if alive.len() <= COARSEST {
            coarsest(&alive, &mut level, &mut candidates);
            break;
        }
        for &v in &alive {
            if !blocked[v as usize] {
                chosen[v as usize] = true;
                for &u in &graph[v as usize] {
                    blocked[u as usize] = true;
                }
            }
        }
        let next: Vec<u32> = alive
            .iter()
            .copied()
            .filter(|&v| chosen[v as usize])
            .collect();
        if next.len() == alive.len() {
            // no edges left among them (separate pieces): one level
            coarsest(&alive, &mut level, &mut candidates);
            break;
        }
        let mut coarser: Vec<Vec<u32>> = vec![Vec::new(); n];
        for &u in &next {
            let two_hops = graph[u as usize]
                .iter()
                .flat_map(|&w| graph[w as usize].iter().copied())
                .filter(|&w| w != u && chosen[w as usize])
                .collect();
            coarser[u as usize] = nearest(u, two_hops);
        }
        for &v in &alive {
            if !chosen[v as usize] {
                level[v as usize] = l;
                candidates[v as usize] = std::mem::take(&mut graph[v as usize]);
            }
        }
        for &v in &alive {
            chosen[v as usize] = false;
            blocked[v as usize] = false;
        }
        graph = coarser;
        alive = next;
    }
    let mut order: Vec<u32> = (0..n as u32).collect();
    order.sort_by_key(|&v| (std::cmp::Reverse(level[v as usize]), rank[v as usize]));
    let mut position = vec![0u32; n];
    for (i, &v) in order.iter().enumerate() {
        position[v as usize] = i as u32;
    }
    let mut predictor = vec![[NO_REF; 3]; n];
    for &v in &order {
        let decoded: Vec<u32> = candidates[v as usize]
            .iter()
            .copied()
            .filter(|&u| position[u as usize] < position[v as usize])
            .collect();
        let xv = x(v);
        let mut pair: Option<(f64, u32, u32)> = None;
        for (i, &a) in decoded.iter().enumerate() {
            for &b in &decoded[i + 1..] {
                let (xa, xb) = (x(a), x(b));
                let e = d2([0, 1, 2].map(|k| 0.5 * (xa[k] + xb[k])), xv);
                if pair.is_none_or(|p| e < p.0) {
                    pair = Some((e, a, b));
                }
            }
        }
        predictor[v as usize] = match pair {
            Some((mid, a, b)) => {
                let (xa, xb) = (x(a), x(b));
                let c = decoded
                    .iter()
                    .copied()
                    .filter(|&c| c != a && c != b)
                    .map(|c| {
                        let xc = x(c);
                        (d2([0, 1, 2].map(|k| xa[k] + xb[k] - xc[k]), xv), c)
                    })
                    .min_by(|p, q| p.0.total_cmp(&q.0));
                match c {
                    Some((e, c)) if e < mid => [a, b, c],
                    _ => [a, b, NO_REF],
                }
            }
            None => [decoded.first().copied().unwrap_or(NO_REF), NO_REF, NO_REF],
        };
    }
    Ok((order, predictor))
}
