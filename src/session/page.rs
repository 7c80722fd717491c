//! A listing page read item by item from its text (`catalog::list_pages`, for a one-shot
//! listing): each item becomes a value, is handed on and freed before the next is read, so
//! its small allocations come from what the one before it freed. Read whole, a page of 100
//! tools was a tree of some 3,000 allocations made at once and freed at once, and glibc's
//! slow paths took a quarter of the time of a listing of 1,000 tools.
//!
//! Apart from the order of the work, the page means what its value would mean: the same
//! items (each read by `Value`'s own deserializer), the last `nextCursor` and `resultType` of
//! an object that names one twice, the same depth limit. One thing differs: a page that
//! names its items twice is refused, where a value would keep the last array; by then the
//! first array's items were handed on.

use std::fmt;

use serde::de::{self, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::Value;

/// What a page said besides its items.
#[derive(Debug, Default)]
pub struct Page {
    /// The items member was there and an array.
    pub listed: bool,
    pub next_cursor: Option<Value>,
    pub result_type: Option<Value>,
}

/// Why a page could not be read.
#[derive(Debug, PartialEq, Eq)]
pub enum Unread {
    NotAnObject,
    /// The items member came twice.
    Twice,
    /// Not JSON a value can hold (a number past f64, nesting past serde_json's limit).
    Unreadable,
}

impl Unread {
    /// Why, as a call's answer is said to be invalid (`CallError::Invalid`).
    pub fn why(&self) -> &'static str {
        match self {
            Unread::NotAnObject => "is not a JSON object",
            Unread::Twice => "names its items twice",
            Unread::Unreadable => crate::dispatch::UNREADABLE,
        }
    }
}

/// Reads the page `text` (a JSON result), handing each element of its `key` array to
/// `on_item`, which says whether it wants more: once it does not, the rest are passed over.
pub fn read(text: &str, key: &str, on_item: &mut dyn FnMut(Value) -> bool) -> Result<Page, Unread> {
    let mut deserializer = serde_json::Deserializer::from_str(text);
    let mut twice = false;
    let mut object = false;
    let page = PageSeed { key, on_item, twice: &mut twice, object: &mut object }.deserialize(&mut deserializer);
    match page {
        Ok(page) => {
            deserializer.end().map_err(|_| Unread::Unreadable)?;
            Ok(page)
        }
        Err(_) if twice => Err(Unread::Twice),
        Err(_) if !object => Err(Unread::NotAnObject),
        Err(_) => Err(Unread::Unreadable),
    }
}

struct PageSeed<'a> {
    key: &'a str,
    on_item: &'a mut dyn FnMut(Value) -> bool,
    twice: &'a mut bool,
    object: &'a mut bool,
}

impl<'de> DeserializeSeed<'de> for PageSeed<'_> {
    type Value = Page;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Page, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for PageSeed<'_> {
    type Value = Page;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a listing page")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Page, A::Error> {
        *self.object = true;
        let mut page = Page::default();
        while let Some(member) = map.next_key_seed(MemberSeed(self.key))? {
            match member {
                Member::Items => {
                    if page.listed {
                        *self.twice = true;
                        return Err(de::Error::custom("the items member twice"));
                    }
                    page.listed = map.next_value_seed(ItemsSeed(&mut *self.on_item))?;
                }
                Member::NextCursor => page.next_cursor = Some(map.next_value()?),
                Member::ResultType => page.result_type = Some(map.next_value()?),
                Member::Other => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(page)
    }
}

enum Member {
    Items,
    NextCursor,
    ResultType,
    Other,
}

/// A member's name, classified without keeping it.
struct MemberSeed<'a>(&'a str);

impl<'de> DeserializeSeed<'de> for MemberSeed<'_> {
    type Value = Member;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Member, D::Error> {
        deserializer.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for MemberSeed<'_> {
    type Value = Member;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a member name")
    }

    fn visit_str<E: de::Error>(self, name: &str) -> Result<Member, E> {
        Ok(match name {
            _ if name == self.0 => Member::Items,
            "nextCursor" => Member::NextCursor,
            "resultType" => Member::ResultType,
            _ => Member::Other,
        })
    }
}

/// The items member: each element of an array to `on_item`; anything else is passed over
/// and read as "not an array" (`false`).
struct ItemsSeed<'a>(&'a mut dyn FnMut(Value) -> bool);

impl<'de> DeserializeSeed<'de> for ItemsSeed<'_> {
    type Value = bool;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<bool, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for ItemsSeed<'_> {
    type Value = bool;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<bool, A::Error> {
        let mut wanted = true;
        while wanted {
            match seq.next_element::<Value>()? {
                Some(item) => wanted = (self.0)(item),
                None => return Ok(true),
            }
        }
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(true)
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<bool, A::Error> {
        while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
        Ok(false)
    }

    fn visit_bool<E>(self, _: bool) -> Result<bool, E> {
        Ok(false)
    }

    fn visit_i64<E>(self, _: i64) -> Result<bool, E> {
        Ok(false)
    }

    fn visit_u64<E>(self, _: u64) -> Result<bool, E> {
        Ok(false)
    }

    fn visit_f64<E>(self, _: f64) -> Result<bool, E> {
        Ok(false)
    }

    fn visit_str<E>(self, _: &str) -> Result<bool, E> {
        Ok(false)
    }

    fn visit_unit<E>(self) -> Result<bool, E> {
        Ok(false)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// The page's items, read one by one, and what else it said.
    fn items(text: &str) -> Result<(Vec<Value>, Page), Unread> {
        let mut items = Vec::new();
        let page = read(text, "tools", &mut |item| {
            items.push(item);
            true
        })?;
        Ok((items, page))
    }

    #[test]
    fn a_page_reads_as_its_value_would() {
        let pages = [
            r#"{"tools":[{"name":"a","inputSchema":{"type":"object","b":1,"a":2}},{"name":"b"}],"nextCursor":"2"}"#,
            r#"{"nextCursor":"1","tools":[],"nextCursor":null,"resultType":"complete","x":{"y":[1,2]}}"#,
            r#"{"tools":[{"name":"x","name":"y","n":1.5e3,"s":"\u00e9\n"}],"resultType":7}"#,
            r#"{"tools":{"name":"not an array"}}"#,
            r#"{"tools":"no","nextCursor":3}"#,
            r#"{"other":[{"tools":[1]}]}"#,
        ];
        for text in pages {
            let value: Value = serde_json::from_str(text).unwrap();
            let (read, page) = items(text).unwrap();
            let want = value.get("tools").and_then(Value::as_array);
            assert_eq!(page.listed, want.is_some(), "{text}");
            assert_eq!(read, want.cloned().unwrap_or_default(), "{text}");
            // Member order inside an item is kept, as a value keeps it.
            assert_eq!(
                read.iter().map(|i| serde_json::to_string(i).unwrap()).collect::<Vec<_>>(),
                want.map(|w| w.iter().map(|i| serde_json::to_string(i).unwrap()).collect::<Vec<_>>())
                    .unwrap_or_default(),
            );
            assert_eq!(page.next_cursor.as_ref(), value.get("nextCursor"), "{text}");
            assert_eq!(page.result_type.as_ref(), value.get("resultType"), "{text}");
        }
    }

    #[test]
    fn what_a_value_cannot_hold_is_refused_as_it_would_be() {
        assert_eq!(items("[1,2]").unwrap_err(), Unread::NotAnObject);
        assert_eq!(items(r#""page""#).unwrap_err(), Unread::NotAnObject);
        assert_eq!(items(r#"{"tools":[],"tools":[]}"#).unwrap_err(), Unread::Twice);
        assert_eq!(items(r#"{"tools":[{"n":1e999}]}"#).unwrap_err(), Unread::Unreadable);
        let deep = format!(r#"{{"tools":[{}{}]}}"#, "[".repeat(200), "]".repeat(200));
        assert!(serde_json::from_str::<Value>(&deep).is_err());
        assert_eq!(items(&deep).unwrap_err(), Unread::Unreadable);
    }

    #[test]
    fn once_no_more_are_wanted_the_rest_are_passed_over() {
        let text = json!({ "tools": [{"name": "a"}, {"name": "b"}, {"name": "c"}], "nextCursor": "n" }).to_string();
        let mut taken = Vec::new();
        let page = read(&text, "tools", &mut |item| {
            taken.push(item);
            taken.len() < 2
        })
        .unwrap();
        assert_eq!(taken, vec![json!({"name": "a"}), json!({"name": "b"})]);
        assert_eq!(page.next_cursor, Some(json!("n")));
    }
}
