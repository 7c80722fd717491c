//! The HTTP headers of 2026-07-28 requests (SEP-2243): `Mcp-Method` and `Mcp-Name` from the
//! body, `Mcp-Param-<Name>` for each tool argument whose property the tool's `inputSchema`
//! marks with `x-mcp-header`, and the encoding of values that are not plain visible ASCII.
//! Also the validation of those markings: a tool whose markings are invalid is not offered.

use serde_json::{Map, Value};

/// A header value as sent: plain visible ASCII as it is; anything else (non-ASCII, control
/// characters, a tab, leading or trailing space, or text that looks like the sentinel) as
/// `=?base64?<base64 of the UTF-8>?=`.
pub fn value(text: &str) -> String {
    let plain = text.bytes().all(|b| (0x20..=0x7e).contains(&b))
        && !text.starts_with(' ')
        && !text.ends_with(' ')
        && (!text.starts_with("=?") || !text.ends_with("?="));
    if plain { text.to_string() } else { format!("=?base64?{}?=", crate::util::base64(text.as_bytes())) }
}

/// The `x-mcp-header` markings of a tool: (header name, property), in schema order, or why
/// they are invalid (empty, not an RFC 9110 token, a case-insensitive duplicate, on a
/// property that is not a string, integer or boolean, or not reachable from the root through
/// `properties` alone).
pub fn markings(tool: &Value) -> Result<Vec<(String, String)>, String> {
    let Some(schema) = tool.get("inputSchema") else { return Ok(Vec::new()) };
    let mut found = Vec::new();
    let top = schema.get("properties").and_then(Value::as_object);
    if let Some(properties) = top {
        for (name, property) in properties {
            if let Some(header) = property.get("x-mcp-header") {
                let header = header.as_str().ok_or_else(|| format!("x-mcp-header of {name:?} is not a string"))?;
                check_name(header)?;
                match property.get("type").and_then(Value::as_str) {
                    Some("string" | "integer" | "boolean") => {}
                    _ => {
                        return Err(format!(
                            "x-mcp-header {header:?} is on {name:?}, which is not a string, integer or boolean"
                        ));
                    }
                }
                if found.iter().any(|(h, _): &(String, String)| h.eq_ignore_ascii_case(header)) {
                    return Err(format!("x-mcp-header {header:?} appears twice"));
                }
                found.push((header.to_string(), name.clone()));
            }
        }
    }
    // A marking anywhere else (inside items, a combinator, a nested object, $defs) cannot be
    // mirrored: the tool is invalid.
    let mut nested = false;
    walk(schema, true, &mut nested);
    if nested {
        return Err("an x-mcp-header is not on a top-level property".into());
    }
    Ok(found)
}

/// Looks for markings outside the root's direct properties.
fn walk(value: &Value, root: bool, nested: &mut bool) {
    match value {
        Value::Object(map) => {
            for (key, child) in map {
                if key == "x-mcp-header" && !root {
                    *nested = true;
                }
                if root && key == "properties" {
                    if let Value::Object(properties) = child {
                        for property in properties.values() {
                            if let Value::Object(fields) = property {
                                for (field, inner) in fields {
                                    if field != "x-mcp-header" {
                                        walk(inner, false, nested);
                                    }
                                }
                            }
                        }
                    }
                    continue;
                }
                walk(child, false, nested);
            }
        }
        Value::Array(items) => items.iter().for_each(|item| walk(item, false, nested)),
        _ => {}
    }
}

fn check_name(name: &str) -> Result<(), String> {
    if name.is_empty() {
        return Err("an x-mcp-header is empty".into());
    }
    let token = name.bytes().all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b));
    if !token {
        return Err(format!("x-mcp-header {:?} is not a header name token", crate::util::one_line(name)));
    }
    Ok(())
}

/// The `Mcp-Param-*` headers of a call: one for each marked argument that is present and not
/// null (integers in decimal, booleans as true/false).
pub fn params(markings: &[(String, String)], arguments: &Map<String, Value>) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for (header, property) in markings {
        let text = match arguments.get(property) {
            None | Some(Value::Null) => continue,
            Some(Value::String(s)) => value(s),
            Some(Value::Bool(b)) => b.to_string(),
            Some(Value::Number(n)) => n.to_string(),
            Some(other) => value(&other.to_string()),
        };
        out.push((format!("Mcp-Param-{header}"), text));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn values_that_are_not_plain_ascii_are_encoded() {
        assert_eq!(value("us-west1"), "us-west1");
        assert_eq!(value("us west 1"), "us west 1");
        assert_eq!(value(""), "");
        assert_eq!(value("Hello, 世界"), "=?base64?SGVsbG8sIOS4lueVjA==?=");
        for odd in [" padded ", " lead", "trail ", "line1\nline2", "\tindented", "=?base64?x?="] {
            assert!(value(odd).starts_with("=?base64?"), "{odd:?}");
        }
    }

    #[test]
    fn markings_are_validated() {
        let tool =
            |properties: Value| json!({ "name": "t", "inputSchema": { "type": "object", "properties": properties } });
        let ok = markings(&tool(json!({ "region": { "type": "string", "x-mcp-header": "Region" },
            "n": { "type": "integer", "x-mcp-header": "N" }, "q": { "type": "string" } })))
        .unwrap();
        assert_eq!(ok, [("Region".to_string(), "region".to_string()), ("N".into(), "n".into())]);
        for bad in [
            json!({ "a": { "type": "string", "x-mcp-header": "" } }),
            json!({ "a": { "type": "object", "x-mcp-header": "A" } }),
            json!({ "a": { "type": "number", "x-mcp-header": "A" } }),
            json!({ "a": { "type": "string", "x-mcp-header": "My Region" } }),
            json!({ "a": { "type": "string", "x-mcp-header": "Région" } }),
            json!({ "a": { "type": "string", "x-mcp-header": "A:B" } }),
            json!({ "a": { "type": "string", "x-mcp-header": "F" }, "b": { "type": "string", "x-mcp-header": "f" } }),
            json!({ "a": { "type": "array", "items": { "type": "string", "x-mcp-header": "A" } } }),
        ] {
            assert!(markings(&tool(bad.clone())).is_err(), "{bad}");
        }
        let args = json!({ "region": "us-west1", "n": 42, "q": "x", "gone": null });
        let marks = vec![("Region".into(), "region".into()), ("N".into(), "n".into()), ("Gone".into(), "gone".into())];
        assert_eq!(
            params(&marks, args.as_object().unwrap()),
            [("Mcp-Param-Region".to_string(), "us-west1".to_string()), ("Mcp-Param-N".into(), "42".into())]
        );
    }
}
