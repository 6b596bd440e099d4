//! Which avatars some viewer watches, so that each tick synthesises and encodes only
//! those: in a room where every headset subscribes to the avatars near it, the server's
//! work follows what is watched, not how many performers are connected.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use super::Shared;

/// How many viewers are subscribed to every avatar, and to each avatar by name.
#[derive(Debug, Default)]
pub(super) struct Watchers {
    all: usize,
    avatars: HashMap<String, usize>,
}

/// What a tick reads of [`Watchers`] when it starts.
#[derive(Debug, PartialEq)]
pub(super) enum Watched {
    /// No viewer is subscribed.
    Nobody,
    /// Some viewer is subscribed to every avatar.
    All,
    /// The avatars named in some viewer's subscription.
    Some(HashSet<String>),
}

impl Watched {
    /// Whether `avatar` is watched.
    pub(super) fn contains(&self, avatar: &str) -> bool {
        match self {
            Watched::Nobody => false,
            Watched::All => true,
            Watched::Some(set) => set.contains(avatar),
        }
    }
}

impl Watchers {
    /// Counts a subscription (`None`: every avatar).
    pub(super) fn add(&mut self, avatars: Option<&HashSet<String>>) {
        match avatars {
            None => self.all += 1,
            Some(set) => {
                for a in set {
                    *self.avatars.entry(a.clone()).or_insert(0) += 1;
                }
            }
        }
    }

    /// Stops counting a subscription [`Watchers::add`] counted.
    pub(super) fn remove(&mut self, avatars: Option<&HashSet<String>>) {
        match avatars {
            None => self.all = self.all.saturating_sub(1),
            Some(set) => {
                for a in set {
                    if let Some(n) = self.avatars.get_mut(a) {
                        *n -= 1;
                        if *n == 0 {
                            self.avatars.remove(a);
                        }
                    }
                }
            }
        }
    }

    /// Which of the avatars `ids` are watched now (the set holds at most those ids,
    /// however many names subscriptions list).
    pub(super) fn among<'a>(&self, ids: impl Iterator<Item = &'a str>) -> Watched {
        if self.all > 0 {
            Watched::All
        } else if self.avatars.is_empty() {
            Watched::Nobody
        } else {
            Watched::Some(
                ids.filter(|id| self.avatars.contains_key(*id))
                    .map(str::to_string)
                    .collect(),
            )
        }
    }
}

/// A viewer's subscription (`None`: every avatar), counted in the server's watchers for
/// as long as it lives, so that however the connection ends it stops counting.
pub(super) struct Subscription {
    shared: Arc<Shared>,
    avatars: Option<HashSet<String>>,
    /// Whether its frames carry the body pose.
    pub(super) pose: bool,
    /// Whether its frames come in the compact form.
    pub(super) compact: bool,
    /// `[index, count]`: only the avatars in that shard (`protocol::shard_of`).
    pub(super) shard: Option<[u32; 2]>,
}

impl Subscription {
    pub(super) fn new(
        shared: &Arc<Shared>,
        avatars: Option<HashSet<String>>,
        pose: bool,
        compact: bool,
        shard: Option<[u32; 2]>,
    ) -> Self {
        // (a shard counts as the whole subscription: the avatars of the other shards
        // are made too, which is what a sharded client's other connections watch)
        if let Ok(mut w) = shared.watchers.lock() {
            w.add(avatars.as_ref());
        }
        Self {
            shared: Arc::clone(shared),
            avatars,
            pose,
            compact,
            shard,
        }
    }

    /// The avatars it names and wants (`None`: it subscribed to all, or all of a shard).
    pub(super) fn named(&self) -> Option<impl Iterator<Item = &String>> {
        let set = self.avatars.as_ref()?;
        Some(set.iter().filter(|a| self.wants(a)))
    }

    pub(super) fn wants(&self, avatar: &str) -> bool {
        self.avatars.as_ref().is_none_or(|set| set.contains(avatar))
            && self
                .shard
                .is_none_or(|[index, count]| crate::protocol::shard_of(avatar, count) == index)
    }
}

impl Drop for Subscription {
    fn drop(&mut self) {
        if let Ok(mut w) = self.shared.watchers.lock() {
            w.remove(self.avatars.as_ref());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(names: &[&str]) -> HashSet<String> {
        names.iter().map(|s| s.to_string()).collect()
    }

    const IDS: [&str; 3] = ["a", "b", "c"];

    #[test]
    fn counts_follow_subscriptions_as_they_come_and_go() {
        let mut w = Watchers::default();
        assert_eq!(w.among(IDS.into_iter()), Watched::Nobody);
        let (ab, b) = (set(&["a", "b"]), set(&["b"]));
        w.add(Some(&ab));
        w.add(Some(&b));
        assert_eq!(w.among(IDS.into_iter()), Watched::Some(set(&["a", "b"])));
        w.remove(Some(&ab));
        // "b" is still watched by the second viewer, "a" by nobody
        assert_eq!(w.among(IDS.into_iter()), Watched::Some(set(&["b"])));
        assert!(w.among(IDS.into_iter()).contains("b") && !w.among(IDS.into_iter()).contains("a"));
        // names of avatars that do not exist cost nothing per tick
        let many: HashSet<String> = (0..1000).map(|i| format!("ghost-{i}")).collect();
        w.add(Some(&many));
        assert_eq!(w.among(IDS.into_iter()), Watched::Some(set(&["b"])));
        w.remove(Some(&many));
        w.add(None);
        assert_eq!(w.among(IDS.into_iter()), Watched::All);
        assert!(w.among(IDS.into_iter()).contains("anyone"));
        w.remove(None);
        w.remove(Some(&b));
        assert_eq!(w.among(IDS.into_iter()), Watched::Nobody);
        // removing what was never added changes nothing
        w.remove(None);
        w.remove(Some(&ab));
        assert_eq!(w.among(IDS.into_iter()), Watched::Nobody);
        w.add(Some(&b));
        assert_eq!(w.among(IDS.into_iter()), Watched::Some(set(&["b"])));
    }
}
