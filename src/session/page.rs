//! A listing page read item by item from its text (`catalog::list_pages`, for a one-shot
//! listing): each item becomes a value, is handed on and freed before the next is read, so
//! its small allocations come from what the one before it freed. Read whole, a page of 100
//! tools was a tree of some 3,000 allocations made at once and freed at once, and glibc's
//! slow paths took a quarter of the time of a listing of 1,000 tools.
//!
//! Apart from the order of the work, the page means what its value would mean: the same
//! items (each read by `Value`'s own deserializer), the last `nextCursor` and `resultType` of
//! an object that names one twice, the same depth limit, and what the page holds besides is
//! read as a value too (and dropped), so that what a value cannot hold (a number past f64, a
//! lone surrogate, nesting past the limit) fails the page on both roads. Two things differ:
//! a page that names its items twice is refused, where a value would keep the last array (by
//! then the first array's items were handed on); and items are handed on one at a time, so a
//! tool marked unusable marks itself alone, where a page read whole marks every tool of the
//! page with its name (`Listing::unusable` is by name).

use std::fmt;

use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::Value;

use super::{Call, Session};
use crate::dispatch::{CallError, Finished};

/// An answer as `Session::wait_answer` gives it.
pub(super) enum Answer {
    Value(Value),
    /// `frame[span]` is the result's JSON, checked to be JSON.
    Text {
        frame: String,
        span: std::ops::Range<usize>,
    },
}

impl Session {
    /// Waits for a call as `wait` does, except that a plain answer of an
    /// initialize-era session comes back as the text it arrived as, for the caller to read
    /// as it goes (a listing page, `catalog`). Such an answer has not been settled: the
    /// caller applies what `settle` would (`ResultKind`, and the result's shape).
    pub(super) fn wait_answer(&self, mut call: Call) -> Result<Answer, CallError> {
        loop {
            let finished = call.pending.wait_finished(|_| {});
            if !self.is_modern()
                && let Finished::Text { frame, span, .. } = finished
            {
                return Ok(Answer::Text { frame, span });
            }
            if let Some(result) = self.settle(&mut call, finished.into_result()) {
                return result.map(Answer::Value);
            }
        }
    }
}

/// What a page said besides its items.
#[derive(Debug, Default)]
pub struct Page {
    /// The items member was there and an array.
    pub listed: bool,
    pub next_cursor: Option<Value>,
    pub result_type: Option<Value>,
}

/// Why a page could not be read, in the order the whole-page road finds it.
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
            Unread::NotAnObject => super::envelope::NOT_AN_OBJECT,
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
        // Not an object: as a value would be refused, which tells JSON it cannot hold first.
        Err(_) if !object && readable(text) => Err(Unread::NotAnObject),
        Err(_) => Err(Unread::Unreadable),
    }
}

/// Whether a value can hold `text` (a rare road: a result that is no object).
fn readable(text: &str) -> bool {
    serde_json::from_str::<Value>(text).is_ok()
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
                // Read as a value would read it (`IgnoredAny` lets through what a value cannot
                // hold), then dropped.
                Member::Other => drop(map.next_value::<Value>()?),
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
        // The rest are read as values all the same, and dropped (see `Member::Other`).
        while seq.next_element::<Value>()?.is_some() {}
        Ok(true)
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<bool, A::Error> {
        while map.next_entry::<String, Value>()?.is_some() {}
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
    use serde::de::IgnoredAny;
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
            // A name written with an escape is the same name; a resultType named twice.
            r#"{"t\u006fols":[{"name":"e"}],"resultType":"x","resultType":"complete"}"#,
            r#"{"tools":[{"big":18446744073709551616,"neg":-0,"min":-9223372036854775808}]}"#,
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
        let nested = |open: &str, close: &str| open.repeat(200) + &close.repeat(200);
        let unreadable = [
            r#"{"tools":[{"n":1e999}]}"#.to_string(),
            format!(r#"{{"tools":[{}]}}"#, nested("[", "]")),
            // Where the page holds more than its items, and where the items are no array.
            r#"{"tools":[{"name":"a"}],"_meta":{"n":1e999}}"#.to_string(),
            r#"{"_meta":"\ud800","tools":[]}"#.to_string(),
            format!(r#"{{"tools":[],"_meta":{}1{}}}"#, r#"{"a":"#.repeat(200), "}".repeat(200)),
            r#"{"tools":{"a":1e999}}"#.to_string(),
            // A result that is no object, and no value either.
            "[1e999]".to_string(),
            r#""\ud800""#.to_string(),
        ];
        for text in unreadable {
            assert!(serde_json::from_str::<IgnoredAny>(&text).is_ok(), "JSON as the worker checks it: {text}");
            assert!(serde_json::from_str::<Value>(&text).is_err(), "{text}");
            assert_eq!(items(&text).unwrap_err(), Unread::Unreadable, "{text}");
        }
    }

    #[test]
    fn items_past_the_last_one_wanted_are_read_as_values_too() {
        let text = r#"{"tools":[{"name":"a"},{"n":1e999}]}"#;
        assert_eq!(read(text, "tools", &mut |_| false).unwrap_err(), Unread::Unreadable);
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
