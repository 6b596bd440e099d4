//! `clothcast.Decoder`: one garment stream's decoder (SOR's garments as the codec codes
//! them, DESIGN §5), for a stream read from anywhere (a file, another transport).

use std::sync::Arc;

use clothcast::codec::{self, BoneTransform, FrameKind, GarmentSetup};
use pyo3::buffer::PyBuffer;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyMemoryView};

use crate::errors;

/// Decodes one garment stream: keyframes and deltas, in order, each checked against
/// the encoder's checksum of its reconstruction (bit-exact, or refused).
///
/// `Decoder(setup)` takes the garment's setup bytes (an `asset` message's `setup`);
/// a setup that is not valid raises `CodecError`. `decode(frame, out)` writes the
/// frame's vertex positions (x, y, z per vertex, metres, the avatar's canonical
/// frame) into `out`, any writable buffer of 3 × `vertex_count` float32 (a NumPy
/// array, `array.array('f')`, …), and returns the frame's header as a dict. A frame
/// that is refused raises `CodecError` and leaves both `out` and the decoder as they
/// were: a delta whose reference the decoder does not hold raises it with code
/// `missing-reference` (ask for a keyframe).
#[pyclass(module = "clothcast")]
pub(crate) struct Decoder {
    inner: codec::Decoder,
    setup: Arc<GarmentSetup>,
    /// The last frame decoded, before it is copied out (allocated once).
    scratch: Vec<f32>,
}

#[pymethods]
impl Decoder {
    #[new]
    fn new(py: Python<'_>, setup: &[u8]) -> PyResult<Self> {
        let setup = Arc::new(GarmentSetup::from_bytes(setup).map_err(|e| errors::codec(py, &e))?);
        Ok(Self {
            inner: codec::Decoder::new(Arc::clone(&setup)),
            scratch: vec![0.0; 3 * setup.vertex_count()],
            setup,
        })
    }

    /// Vertices of the garment.
    #[getter]
    fn vertex_count(&self) -> usize {
        self.setup.vertex_count()
    }

    /// Bones of the skin (the frames carry one transform each).
    #[getter]
    fn bone_count(&self) -> u32 {
        self.setup.bones
    }

    /// The garment's triangles: a memoryview of 3 × triangles uint32 vertex indices,
    /// counter-clockwise seen from outside.
    #[getter]
    fn triangles<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        view(py, self.setup.triangles.as_flattened(), "I")
    }

    /// The setup's id (FNV-1a of its bytes): every frame names the setup it was coded
    /// with.
    #[getter]
    fn setup_id(&self) -> u32 {
        self.setup.id()
    }

    /// The number of the last frame decoded, or None before the first.
    #[getter]
    fn last_frame(&self) -> Option<u32> {
        self.inner.last_frame()
    }

    /// Decodes `frame` (bytes) into `out` (3 × vertex_count float32, writable); returns
    /// its header: `kind` ('key' or 'delta'), `frame`, `reference`, `stream`,
    /// `setup`, `vertices`, `bones`, `checksum`, `bytes`.
    fn decode<'py>(
        &mut self,
        py: Python<'py>,
        frame: &[u8],
        out: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyDict>> {
        let out = float_buffer(out, self.scratch.len(), "out")?;
        // decoded into the scratch first, so that a refused frame leaves `out` alone
        let h = self
            .inner
            .decode(frame, &mut self.scratch)
            .map_err(|e| errors::codec(py, &e))?;
        out.copy_from_slice(py, &self.scratch)?;
        let d = PyDict::new(py);
        d.set_item(
            "kind",
            match h.kind {
                FrameKind::Key => "key",
                FrameKind::Delta => "delta",
            },
        )?;
        d.set_item("frame", h.frame)?;
        d.set_item("reference", h.reference)?;
        d.set_item("stream", h.stream_id)?;
        d.set_item("setup", h.setup_id)?;
        d.set_item("vertices", h.vertices)?;
        d.set_item("bones", h.bones)?;
        d.set_item("checksum", h.checksum)?;
        d.set_item("bytes", frame.len())?;
        Ok(d)
    }

    /// The bone transforms the last decoded frame carried: one tuple (qx, qy, qz, qw,
    /// tx, ty, tz) per bone, the skinning transform from the rest pose to the frame's
    /// pose in the canonical frame (metres).
    fn bones(&self, py: Python<'_>) -> PyResult<Vec<[f32; 7]>> {
        let mut b = vec![BoneTransform::IDENTITY; self.setup.bones as usize];
        self.inner
            .bones(&mut b)
            .map_err(|e| errors::codec(py, &e))?;
        Ok(b.iter().map(flat_bone).collect())
    }

    /// Forgets the stream: the next frame must be a keyframe.
    fn reset(&mut self) {
        self.inner.reset();
    }
}

/// A bone as (qx, qy, qz, qw, tx, ty, tz).
pub(crate) fn flat_bone(b: &BoneTransform) -> [f32; 7] {
    let [x, y, z, w] = b.rotation;
    let [tx, ty, tz] = b.translation;
    [x, y, z, w, tx, ty, tz]
}

/// `obj` as a writable float32 buffer of `len` items, or a `ValueError` that says what
/// is wrong with it (`TypeError` from PyO3 when it is no float32 buffer at all).
pub(crate) fn float_buffer(
    obj: &Bound<'_, PyAny>,
    len: usize,
    what: &str,
) -> PyResult<PyBuffer<f32>> {
    let b = PyBuffer::<f32>::get(obj)?;
    if b.readonly() {
        return Err(PyValueError::new_err(format!(
            "{what}: the buffer is read-only"
        )));
    }
    if b.item_count() != len {
        return Err(PyValueError::new_err(format!(
            "{what}: {} float32, expected {len} (3 per vertex)",
            b.item_count()
        )));
    }
    Ok(b)
}

/// A new memoryview of `items` with the struct format `format` (native byte order).
pub(crate) fn view<'py, T: bytemuck::Pod>(
    py: Python<'py>,
    items: &[T],
    format: &str,
) -> PyResult<Bound<'py, PyAny>> {
    let bytes = PyBytes::new(py, bytemuck::cast_slice(items));
    PyMemoryView::from(&bytes)?.call_method1("cast", (format,))
}
