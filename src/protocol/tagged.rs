//! Reads a message map into the struct its `type` entry names, as if that entry were
//! not there: straight into the struct, where serde's internally tagged enums first copy
//! the whole message into a tree of owned values. On failure the same read again with
//! each value's path tracked names the field that was wrong (`shard[0]`,
//! `joints[3].rotation`), which serde's errors inside a tagged enum cannot.

use std::marker::PhantomData;

use serde::de::{DeserializeSeed, IgnoredAny, MapAccess, Visitor};
use serde::{Deserialize, Deserializer};

/// A MessagePack map read as `T` without its `type` entry; `None` if it is not
/// one (the caller then reads it the slow way, serde's, and again traced for the error).
pub(super) fn from_msgpack<'de, T: Deserialize<'de>>(bytes: &'de [u8]) -> Option<T> {
    let mut de = rmp_serde::Deserializer::from_read_ref(bytes);
    de.deserialize_map(WithoutTag::<T, false>(PhantomData)).ok()
}

/// [`from_msgpack`]'s error, naming the field where the input went wrong. The map is
/// read through a JSON value first, so that a value of the wrong type is named as
/// serde names it ("invalid type: string \"yes\", expected a boolean") rather than by
/// its MessagePack marker; only for a message already refused, so the cost is moot.
/// JSON values hold no NaN: a NaN float (which the message itself may carry) reads as
/// null there, so a message refused for another reason whose NaN comes first is named
/// at the NaN ("invalid type: null, expected f32"), a value the server would have held
/// as unusable anyway.
pub(super) fn from_msgpack_traced<T: serde::de::DeserializeOwned>(
    bytes: &[u8],
) -> Result<T, String> {
    let Entries(entries) = rmp_serde::from_slice(bytes).map_err(|e| e.to_string())?;
    let mut fields = serde_json::Map::new();
    let mut typed = false;
    for (key, value) in entries {
        if key == "type" && !typed {
            typed = true;
        } else if key == "type" || fields.contains_key(&key) {
            return Err(format!("duplicate field `{key}`"));
        } else {
            fields.insert(key, value);
        }
    }
    serde_path_to_error::deserialize(serde_json::Value::Object(fields)).map_err(named)
}

/// A map's entries in order, duplicates kept (a JSON object would keep the last).
struct Entries(Vec<(String, serde_json::Value)>);

impl<'de> Deserialize<'de> for Entries {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Read;
        impl<'de> Visitor<'de> for Read {
            type Value = Entries;

            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a message map")
            }

            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Entries, A::Error> {
                let mut entries = Vec::new();
                while let Some(entry) = map.next_entry()? {
                    entries.push(entry);
                }
                Ok(Entries(entries))
            }
        }
        d.deserialize_map(Read)
    }
}

/// A JSON object read as `T` without its `type` entry (and nothing after it).
pub(super) fn from_json<'de, T: Deserialize<'de>>(text: &'de str) -> Option<T> {
    let mut de = serde_json::Deserializer::from_str(text);
    let t = de
        .deserialize_map(WithoutTag::<T, false>(PhantomData))
        .ok()?;
    de.end().ok()?;
    Some(t)
}

/// [`from_json`]'s error, naming the field where the input went wrong (serde_json's
/// errors add the line and column).
pub(super) fn from_json_traced<'de, T: Deserialize<'de>>(text: &'de str) -> Result<T, String> {
    let mut de = serde_json::Deserializer::from_str(text);
    let t = de
        .deserialize_map(WithoutTag::<T, true>(PhantomData))
        .map_err(|e| e.to_string())?;
    de.end().map_err(|e| e.to_string())?;
    Ok(t)
}

/// A traced error as "field `a.b[2]`: what": the path alone where there is one.
fn named<E: std::fmt::Display>(e: serde_path_to_error::Error<E>) -> String {
    let path = e.path().to_string();
    if path == "." {
        e.into_inner().to_string()
    } else {
        format!("field `{path}`: {}", e.into_inner())
    }
}

/// Reads a map as `T`; `TRACED`: tracking each value's path, for the error.
struct WithoutTag<T, const TRACED: bool>(PhantomData<T>);

impl<'de, T: Deserialize<'de>, const TRACED: bool> Visitor<'de> for WithoutTag<T, TRACED> {
    type Value = T;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a message map")
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<T, A::Error> {
        let fields = serde::de::value::MapAccessDeserializer::new(Skip(map, false));
        if !TRACED {
            return T::deserialize(fields);
        }
        serde_path_to_error::deserialize(fields).map_err(|e| serde::de::Error::custom(named(e)))
    }
}

/// A map's entries without its `type` entry (a second one is an error, as in
/// serde's tagged enums, so the caller falls back to serde's error for it).
struct Skip<A>(A, bool);

impl<'de, A: MapAccess<'de>> MapAccess<'de> for Skip<A> {
    type Error = A::Error;

    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, A::Error> {
        loop {
            let Some(key) = self.0.next_key::<std::borrow::Cow<'de, str>>()? else {
                return Ok(None);
            };
            if key == "type" {
                if self.1 {
                    return Err(serde::de::Error::duplicate_field("type"));
                }
                self.1 = true;
                self.0.next_value::<IgnoredAny>()?;
                continue;
            }
            let key: serde::de::value::CowStrDeserializer<'de, A::Error> =
                serde::de::IntoDeserializer::into_deserializer(key);
            return seed.deserialize(key).map(Some);
        }
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, seed: V) -> Result<V::Value, A::Error> {
        self.0.next_value_seed(seed)
    }

    fn size_hint(&self) -> Option<usize> {
        self.0.size_hint()
    }
}
