//! Development preview: renders the default body from several sides into a PNG.
use clothcast::body::*;
use clothcast::mesh::*;
use clothcast::skeleton::*;
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
    let shape = BodyShape {
        height: args.get(1).and_then(|s| s.parse().ok()).unwrap_or(1.75),
        weight: args.get(2).and_then(|s| s.parse().ok()).unwrap_or(70.0),
        ..Default::default()
    };
    let body = Body::generate(&shape, &BodyOptions::default()).unwrap();
    let (lo, hi) = body.mesh.bounds().unwrap();
    let mut imgs = vec![];
    for dir in [Vec3::Z, Vec3::new(1.0, 0.2, 0.6), Vec3::X, -Vec3::Z] {
        let cam = Camera::framing(lo, hi, dir, 1.0);
        imgs.push(render(&[DrawItem { mesh: &body.mesh, positions: None, color: [0.8, 0.6, 0.5] }], &cam, 500, 500));
    }
    // torso close-up
    let tl = Vec3::new(-0.35, 0.8, -0.2); let th = Vec3::new(0.35, 1.75, 0.2);
    for dir in [Vec3::new(0.3, 0.1, 1.0), Vec3::new(-1.0, 0.1, 0.3)] {
        let cam = Camera::framing(tl, th, dir, 1.0);
        imgs.push(render(&[DrawItem { mesh: &body.mesh, positions: None, color: [0.8, 0.6, 0.5] }], &cam, 500, 500));
    }
    // a posed version
    let mut pose = Pose::rest();
    pose.set_rotation(JointId::LEFT_SHOULDER, quat_exp(Vec3::new(0.0, 0.0, -1.2)));
    pose.set_rotation(JointId::RIGHT_SHOULDER, quat_exp(Vec3::new(0.0, 0.6, 1.2)));
    pose.set_rotation(JointId::RIGHT_ELBOW, quat_exp(Vec3::new(0.0, 1.6, 0.0)));
    pose.set_rotation(JointId::LEFT_HIP, quat_exp(Vec3::new(-1.2, 0.0, 0.0)));
    pose.set_rotation(JointId::LEFT_KNEE, quat_exp(Vec3::new(1.5, 0.0, 0.0)));
    pose.set_rotation(JointId::SPINE2, quat_exp(Vec3::new(0.3, 0.3, 0.0)));
    let method = if args.get(3).map(|s| s == "dqs").unwrap_or(false) { SkinningMethod::Dqs } else { SkinningMethod::Lbs };
    let posed = body.posed_positions(&pose, method);
    let cam = Camera::framing(lo, hi, Vec3::new(1.0, 0.3, 1.0), 1.0);
    imgs.push(render(&[DrawItem { mesh: &body.mesh, positions: Some(&posed), color: [0.8, 0.6, 0.5] }], &cam, 500, 500));
    let row2 = imgs.split_off(4);
    save(&Image::hstack(&imgs), "/tmp/look/body.png");
    save(&Image::hstack(&row2), "/tmp/look/body2.png");
}
