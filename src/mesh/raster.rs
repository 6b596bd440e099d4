//! A small software rasteriser for previews: perspective camera, z-buffer, smooth
//! (per-vertex normal) Lambert shading with a key and a fill light. It exists so that
//! every asset the tool writes can be looked at as a PNG without a GPU or a browser.

use glam::{Vec3, Vec4};

use super::trimesh::TriMesh;

/// A pinhole camera looking from `eye` at `target` (world frame, metres).
#[derive(Copy, Clone, Debug)]
pub struct Camera {
    /// Camera position.
    pub eye: Vec3,
    /// Point looked at.
    pub target: Vec3,
    /// Vertical field of view, radians.
    pub fov_y: f32,
}

impl Camera {
    /// A camera that frames the box `[lo, hi]` seen from `direction` (from the target
    /// towards the eye), for an image of the given aspect ratio (width / height).
    pub fn framing(lo: Vec3, hi: Vec3, direction: Vec3, aspect: f32) -> Camera {
        let fov_y = 30f32.to_radians();
        let centre = 0.5 * (lo + hi);
        let back = direction.normalize();
        let right = Vec3::Y.cross(back).normalize_or(Vec3::X);
        let up = back.cross(right);
        let (mut half_w, mut half_h, mut half_d) = (0.0f32, 0.0f32, 0.0f32);
        for k in 0..8 {
            let c = Vec3::new(
                if k & 1 == 0 { lo.x } else { hi.x },
                if k & 2 == 0 { lo.y } else { hi.y },
                if k & 4 == 0 { lo.z } else { hi.z },
            ) - centre;
            half_w = half_w.max(c.dot(right).abs());
            half_h = half_h.max(c.dot(up).abs());
            half_d = half_d.max(c.dot(back).abs());
        }
        let t = (0.5 * fov_y).tan();
        let dist = (half_h / t).max(half_w / (t * aspect)) * 1.08 + half_d;
        Camera {
            eye: centre + back * dist,
            target: centre,
            fov_y,
        }
    }
}

/// An RGB image, 8 bits per channel, rows top to bottom.
#[derive(Clone, Debug)]
pub struct Image {
    /// Width in pixels.
    pub width: u32,
    /// Height in pixels.
    pub height: u32,
    /// `width × height × 3` bytes.
    pub rgb: Vec<u8>,
}

/// One mesh to draw: positions (overriding the mesh's own when given) and a colour.
pub struct DrawItem<'a> {
    /// Topology (and positions unless `positions` is given).
    pub mesh: &'a TriMesh,
    /// Positions to draw instead of `mesh.positions`.
    pub positions: Option<&'a [Vec3]>,
    /// Linear RGB albedo, 0–1.
    pub color: [f32; 3],
}

/// Renders the items with a z-buffer. Back faces are drawn too (shaded darker), so open
/// garments show their inside.
pub fn render(items: &[DrawItem<'_>], cam: &Camera, width: u32, height: u32) -> Image {
    let (w, h) = (width as usize, height as usize);
    let view = glam::camera::rh::view::look_at_mat4(cam.eye, cam.target, Vec3::Y);
    let proj = glam::camera::rh::proj::directx::perspective(
        cam.fov_y,
        width as f32 / height as f32,
        0.05,
        100.0,
    );
    let vp = proj * view;
    let mut depth = vec![f32::INFINITY; w * h];
    let mut rgb = vec![0u8; w * h * 3];
    // background: vertical gradient
    for y in 0..h {
        let t = y as f32 / h as f32;
        let c = [0.93 - 0.25 * t, 0.94 - 0.22 * t, 0.96 - 0.18 * t];
        for x in 0..w {
            for k in 0..3 {
                rgb[(y * w + x) * 3 + k] = (c[k] * 255.0) as u8;
            }
        }
    }
    let key = Vec3::new(0.4, 0.8, 0.6).normalize();
    let fill = Vec3::new(-0.6, 0.2, 0.3).normalize();
    for item in items {
        let pos = item.positions.unwrap_or(&item.mesh.positions);
        let mut normals = vec![Vec3::ZERO; pos.len()];
        item.mesh.vertex_normals_into(pos, &mut normals);
        let clip: Vec<Vec4> = pos.iter().map(|p| vp * p.extend(1.0)).collect();
        for tri in &item.mesh.triangles {
            let c = tri.map(|v| clip[v as usize]);
            if c.iter().any(|c| c.w <= 0.05) {
                continue;
            }
            let s = c.map(|c| {
                let ndc = c.truncate() / c.w;
                Vec3::new(
                    (ndc.x * 0.5 + 0.5) * w as f32,
                    (0.5 - ndc.y * 0.5) * h as f32,
                    ndc.z,
                )
            });
            let area =
                (s[1].x - s[0].x) * (s[2].y - s[0].y) - (s[2].x - s[0].x) * (s[1].y - s[0].y);
            if area.abs() < 1e-9 {
                continue;
            }
            let front = area < 0.0;
            let minx = s
                .iter()
                .map(|p| p.x)
                .fold(f32::MAX, f32::min)
                .floor()
                .max(0.0) as usize;
            let maxx = s
                .iter()
                .map(|p| p.x)
                .fold(f32::MIN, f32::max)
                .ceil()
                .min(w as f32 - 1.0) as usize;
            let miny = s
                .iter()
                .map(|p| p.y)
                .fold(f32::MAX, f32::min)
                .floor()
                .max(0.0) as usize;
            let maxy = s
                .iter()
                .map(|p| p.y)
                .fold(f32::MIN, f32::max)
                .ceil()
                .min(h as f32 - 1.0) as usize;
            if minx > maxx || miny > maxy {
                continue;
            }
            let n = tri.map(|v| normals[v as usize]);
            for y in miny..=maxy {
                for x in minx..=maxx {
                    let (px, py) = (x as f32 + 0.5, y as f32 + 0.5);
                    let w0 = ((s[1].x - px) * (s[2].y - py) - (s[2].x - px) * (s[1].y - py)) / area;
                    let w1 = ((s[2].x - px) * (s[0].y - py) - (s[0].x - px) * (s[2].y - py)) / area;
                    let w2 = 1.0 - w0 - w1;
                    if w0 < 0.0 || w1 < 0.0 || w2 < 0.0 {
                        continue;
                    }
                    let z = w0 * s[0].z + w1 * s[1].z + w2 * s[2].z;
                    let idx = y * w + x;
                    if z >= depth[idx] {
                        continue;
                    }
                    depth[idx] = z;
                    let mut nn = (n[0] * w0 + n[1] * w1 + n[2] * w2).normalize_or_zero();
                    let to_eye = (cam.eye - pos[tri[0] as usize]).normalize_or_zero();
                    if nn.dot(to_eye) < 0.0 {
                        nn = -nn;
                    }
                    let shade = 0.25 + 0.65 * nn.dot(key).max(0.0) + 0.2 * nn.dot(fill).max(0.0);
                    let shade = if front { shade } else { shade * 0.6 };
                    for k in 0..3 {
                        let v = (item.color[k] * shade).clamp(0.0, 1.0).powf(1.0 / 2.2);
                        rgb[idx * 3 + k] = (v * 255.0) as u8;
                    }
                }
            }
        }
    }
    Image { width, height, rgb }
}

impl Image {
    /// Places images one above the other (the first on top; narrower ones left-aligned
    /// on white) into one image.
    pub fn vstack(images: &[Image]) -> Image {
        let width = images.iter().map(|i| i.width).max().unwrap_or(0);
        let height: u32 = images.iter().map(|i| i.height).sum();
        let mut rgb = vec![255u8; (width * height * 3) as usize];
        let mut y0 = 0;
        for img in images {
            for y in 0..img.height {
                let src =
                    &img.rgb[(y * img.width * 3) as usize..((y + 1) * img.width * 3) as usize];
                let dst = (((y0 + y) * width) * 3) as usize;
                rgb[dst..dst + src.len()].copy_from_slice(src);
            }
            y0 += img.height;
        }
        Image { width, height, rgb }
    }

    /// Places images side by side (same height) into one image.
    pub fn hstack(images: &[Image]) -> Image {
        let height = images.iter().map(|i| i.height).max().unwrap_or(0);
        let width: u32 = images.iter().map(|i| i.width).sum();
        let mut rgb = vec![255u8; (width * height * 3) as usize];
        let mut x0 = 0;
        for img in images {
            for y in 0..img.height {
                let src =
                    &img.rgb[(y * img.width * 3) as usize..((y + 1) * img.width * 3) as usize];
                let dst = ((y * width + x0) * 3) as usize;
                rgb[dst..dst + src.len()].copy_from_slice(src);
            }
            x0 += img.width;
        }
        Image { width, height, rgb }
    }

    /// Mean and standard deviation of the luminance, 0–255 (for "not blank" checks).
    pub fn luminance_stats(&self) -> (f32, f32) {
        let n = (self.width * self.height) as f64;
        let lum: Vec<f64> = self
            .rgb
            .chunks(3)
            .map(|p| 0.299 * p[0] as f64 + 0.587 * p[1] as f64 + 0.114 * p[2] as f64)
            .collect();
        let mean = lum.iter().sum::<f64>() / n;
        let var = lum.iter().map(|l| (l - mean).powi(2)).sum::<f64>() / n;
        (mean as f32, var.sqrt() as f32)
    }
}

#[cfg(test)]
mod tests {
    use super::Image;

    fn filled(width: u32, height: u32, v: u8) -> Image {
        Image {
            width,
            height,
            rgb: vec![v; (width * height * 3) as usize],
        }
    }

    fn px(img: &Image, x: u32, y: u32) -> u8 {
        img.rgb[((y * img.width + x) * 3) as usize]
    }

    /// Stacked images keep their pixels where they were placed: side by side, then one
    /// above the other, a narrower one left-aligned on white.
    #[test]
    fn stacking_places_each_image_where_it_belongs() {
        let row = Image::hstack(&[filled(2, 3, 10), filled(3, 3, 20)]);
        assert_eq!((row.width, row.height), (5, 3));
        assert_eq!(px(&row, 1, 2), 10);
        assert_eq!(px(&row, 2, 0), 20);
        let column = Image::vstack(&[row, filled(4, 2, 30)]);
        assert_eq!((column.width, column.height), (5, 5));
        assert_eq!(px(&column, 0, 0), 10);
        assert_eq!(px(&column, 4, 2), 20);
        assert_eq!(px(&column, 3, 4), 30);
        assert_eq!(px(&column, 4, 3), 255, "white beside the narrower image");
    }
}
