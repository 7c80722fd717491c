//! Reading a member of a JSON object. Most objects nod reads are small (a tool, a schema, a
//! content block, a result: a handful of members), and for those comparing the keys in order
//! costs a fraction of hashing the one sought (serde_json's ordered map hashes with SipHash);
//! a big object is looked up by hash as before.

use serde_json::{Map, Value};

/// Up to this many members, an object is searched in order.
const SCAN: usize = 8;

pub trait Member {
    /// The member `key`: `Value::get` / `Map::get`, cheaper on small objects.
    fn member(&self, key: &str) -> Option<&Value>;
}

impl Member for Value {
    fn member(&self, key: &str) -> Option<&Value> {
        self.as_object().and_then(|map| map.member(key))
    }
}

impl Member for Map<String, Value> {
    fn member(&self, key: &str) -> Option<&Value> {
        if self.len() <= SCAN {
            // A map holds each key once: the first match is the member.
            self.iter().find_map(|(k, v)| (k == key).then_some(v))
        } else {
            self.get(key)
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::Member;

    #[test]
    fn a_member_is_what_get_finds_in_small_and_big_objects() {
        let small = json!({ "name": "echo", "inputSchema": { "type": "object" }, "n": null });
        let big: Value = (0..40).map(|i| (format!("k{i}"), json!(i))).collect::<serde_json::Map<_, _>>().into();
        for (value, keys) in
            [(&small, vec!["name", "inputSchema", "n", "missing", ""]), (&big, vec!["k0", "k39", "k7", "k8", "x"])]
        {
            for key in keys {
                assert_eq!(value.member(key), value.get(key), "{key}");
            }
        }
        assert_eq!(small.member("n"), Some(&Value::Null), "a null member is there");
        assert_eq!(json!([1, 2]).member("0"), None, "an array has no members");
        assert_eq!(json!("name").member("name"), None);
    }
}
