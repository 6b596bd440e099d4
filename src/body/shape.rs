//! Body shape parameters with their supported ranges.

use crate::skeleton::Proportions;

/// Shape of the procedural body. Lengths in metres, mass in kilograms.
#[derive(Copy, Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct BodyShape {
    /// Standing height, soles to the top of the head; 1.5–2.0 m.
    pub height: f32,
    /// Body mass; 40–150 kg. Sets the girth of torso and limbs through the body mass
    /// index (girth ∝ √(BMI / 22)).
    pub weight: f32,
    /// Biacromial shoulder width; 0.30–0.50 m.
    pub shoulder_width: f32,
    /// Hip width at the greater trochanters; 0.28–0.46 m.
    pub hip_width: f32,
}

impl Default for BodyShape {
    /// An average adult: 1.75 m, 70 kg (BMI 22.9), shoulders 0.40 m, hips 0.34 m.
    fn default() -> Self {
        Self {
            height: 1.75,
            weight: 70.0,
            shoulder_width: 0.40,
            hip_width: 0.34,
        }
    }
}

/// Why a body could not be made.
#[derive(Debug, thiserror::Error, PartialEq)]
#[non_exhaustive]
pub enum BodyError {
    /// A shape parameter is outside its supported range (or not a number).
    #[error("{name} = {value} is outside the supported range {lo}–{hi}")]
    OutOfRange {
        /// Parameter name.
        name: &'static str,
        /// The value given.
        value: f32,
        /// Lowest supported value.
        lo: f32,
        /// Highest supported value.
        hi: f32,
    },
    /// The requested resolution is outside 500–100 000 vertices.
    #[error("body resolution {0} vertices is outside 500–100000")]
    Resolution(usize),
    /// Mesh generation produced an invalid mesh (a bug, reported instead of a panic).
    #[error("generated body mesh is invalid: {0}")]
    Mesh(#[from] crate::mesh::MeshError),
}

impl BodyShape {
    /// Supported ranges `(name, lo, hi)` of each parameter.
    pub const RANGES: [(&'static str, f32, f32); 4] = [
        ("height", 1.5, 2.0),
        ("weight", 40.0, 150.0),
        ("shoulder_width", 0.30, 0.50),
        ("hip_width", 0.28, 0.46),
    ];

    /// Checks every parameter against [`BodyShape::RANGES`].
    pub fn validate(&self) -> Result<(), BodyError> {
        let vals = [
            self.height,
            self.weight,
            self.shoulder_width,
            self.hip_width,
        ];
        for ((name, lo, hi), value) in Self::RANGES.into_iter().zip(vals) {
            if !(value >= lo && value <= hi) {
                return Err(BodyError::OutOfRange {
                    name,
                    value,
                    lo,
                    hi,
                });
            }
        }
        Ok(())
    }

    /// Girth factor 1.09·(BMI/22)^0.68 scaling the cross-sections of trunk and limbs.
    /// The two constants were fitted so that the generated body's volume times the
    /// density of the human body (1010 kg/m³) matches `weight` within a few percent
    /// from 50 to 110 kg at 1.75 m (checked by a test).
    pub fn girth(&self) -> f32 {
        let bmi = self.weight / (self.height * self.height);
        (bmi / 22.0).powf(0.68) * 1.09
    }

    /// Skeleton proportions implied by this shape.
    pub fn proportions(&self) -> Proportions {
        Proportions {
            height: self.height,
            shoulder_width: self.shoulder_width,
            hip_width: self.hip_width,
        }
    }
}
