//! Development preview: renders the default body and garments into PNGs under /tmp/look.
use clothcast::body::*;
use clothcast::garment::*;
use clothcast::mesh::*;
use glam::Vec3;

fn save(img: &Image, path: &str) {
    let f = std::fs::File::create(path).unwrap();
    let mut enc = png::Encoder::new(std::io::BufWriter::new(f), img.width, img.height);
    enc.set_color(png::ColorType::Rgb);
    enc.set_depth(png::BitDepth::Eight);
    enc.write_header().unwrap().write_image_data(&img.rgb).unwrap();
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let body = Body::default_body().unwrap();
    let mut cfg = GarmentConfig::builtin(args.get(1).map(|s| s.as_str()).unwrap_or("tshirt")).unwrap();
    if args.iter().any(|a| a == "long") { cfg.sleeves = Sleeves::Long; }
    if args.iter().any(|a| a == "shorts") { cfg.length = Legs::Shorts; }
    let t = std::time::Instant::now();
    let g = Garment::generate(&body, &cfg).unwrap();
    let topo = Topology::build(&g.mesh).unwrap();
    eprintln!("garment {} verts, {} loops, {:?}", g.vertex_count(), topo.boundary_loops(&g.mesh).len(), t.elapsed());
    let (lo, hi) = body.mesh.bounds().unwrap();
    let mut imgs = vec![];
    for dir in [Vec3::Z, Vec3::new(1.0, 0.3, 0.6), Vec3::new(-0.3, 0.5, -1.0)] {
        let cam = Camera::framing(lo, hi, dir, 1.0);
        imgs.push(render(&[DrawItem { mesh: &body.mesh, positions: None, color: [0.8, 0.6, 0.5] }, DrawItem { mesh: &g.mesh, positions: None, color: [0.2, 0.4, 0.8] }], &cam, 600, 600));
    }
    save(&Image::hstack(&imgs), "/tmp/look/garment.png");
}
