//! Python bindings of clothcast (the module `clothcast`): the garment stream decoder
//! ([`decoder::Decoder`], bit-exact with the server's encoder, decoding into a caller's
//! float32 buffer) and a viewer client ([`viewer::Viewer`]) that connects to a server,
//! subscribes, reconnects, and keeps every avatar's latest decoded garments, bones and
//! posed body for a Python program to read when it likes (a Blender live link, a capture
//! pipeline, a notebook). The network and the decoding run on a thread of the client's
//! own, without the GIL; Python only ever reads the latest state.
//!
//! Frames and units are the protocol's (DESIGN §5): garments and bodies in the
//! avatar's canonical frame (metres, +Y up, facing +Z), placed in the world by each
//! frame's rigid `world` transform (rotation x, y, z, w, then translation).

use clothcast::skeleton::JointId;
use pyo3::prelude::*;

mod decoder;
mod errors;
mod viewer;

/// The module `clothcast`.
#[pymodule]
#[pyo3(name = "clothcast")]
fn clothcast_module(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<decoder::Decoder>()?;
    m.add_class::<viewer::Viewer>()?;
    let py = m.py();
    m.add("CodecError", py.get_type::<errors::CodecError>())?;
    m.add("ClientError", py.get_type::<errors::ClientError>())?;
    m.add("FORMAT_VERSION", clothcast::codec::format::FORMAT_VERSION)?;
    m.add("PROTOCOL_VERSION", clothcast::protocol::PROTOCOL_VERSION)?;
    // the canonical skeleton's joints, in bone order (the order of `bones()`)
    let names: Vec<&str> = JointId::all().map(JointId::name).collect();
    m.add("JOINT_NAMES", names)?;
    Ok(())
}
