//! The bake: chooses example poses (clip frames and joint-limit samples; weighted
//! K-means, Wu §3.6, or SOR's greedy MCMC sampler, SOR §6) and builds the example
//! database with the simulator and the SOR rig. Resumable, shardable, and a cached
//! default database for the default body and T-shirt.

mod default_db;
mod kmeans;
mod pipeline;
mod poses;

pub use default_db::{
    DEFAULT_CLIP, DEFAULT_CLIP_NAME, DEFAULT_EXAMPLES, default_database, default_database_path,
};
pub use kmeans::{Chosen, joint_weights, representatives};
pub use pipeline::{
    BakeConfig, BakeError, Baker, GUARD_CLEARANCE, Progress, Sampler, Shard, merge, nearest_start,
    part_path,
};
pub use poses::{Rng, clip_poses, limit_samples, pose_coordinates};
