//! JSON Schema checks with the `jsonschema` crate (no network: `$ref`s to other documents are
//! never fetched). A tool's input and output schemas must be JSON Schema 2020-12 (the default
//! when `$schema` is absent) or Draft 7, and valid against their meta-schema (SCH-2); a tool
//! whose schema fails is unusable, with the reason, while the server's other tools stay
//! usable. Elicitation answers nod makes up (`--elicit defaults`) are checked against the
//! requested schema before they are sent (ELI-10).

use serde_json::Value;

use crate::json::Member;

/// The dialects nod accepts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dialect {
    Draft7,
    Draft202012,
}

/// The dialect a schema declares, or why nod cannot use it.
pub fn dialect(schema: &Value) -> Result<Dialect, String> {
    match schema.member("$schema") {
        None => Ok(Dialect::Draft202012),
        Some(Value::String(uri)) => {
            let uri = uri.trim_end_matches('#');
            let uri = uri.strip_prefix("https://").or_else(|| uri.strip_prefix("http://")).unwrap_or(uri);
            match uri {
                "json-schema.org/draft/2020-12/schema" => Ok(Dialect::Draft202012),
                "json-schema.org/draft-07/schema" => Ok(Dialect::Draft7),
                _ => Err(format!(
                    "its schema declares the dialect {}; nod accepts JSON Schema 2020-12 and Draft 7",
                    shown(schema["$schema"].as_str().unwrap_or(""))
                )),
            }
        }
        Some(_) => Err("its schema has a $schema that is not a string".into()),
    }
}

/// Why a tool's schema (`inputSchema` or `outputSchema`) makes the tool unusable, if it does.
pub fn problem(which: &str, schema: &Value) -> Option<String> {
    let dialect = match dialect(schema) {
        Ok(dialect) => dialect,
        Err(why) => return Some(format!("{which}: {why}")),
    };
    // Most tools' schemas use a handful of keywords whose values are easy to check: those are
    // valid without building a meta-schema validator (about a millisecond a process); anything
    // else gets the full check.
    if plainly_valid(schema, 0) {
        return None;
    }
    let checked = match dialect {
        Dialect::Draft7 => jsonschema::draft7::meta::validate(schema).map_err(|e| e.to_string()),
        Dialect::Draft202012 => jsonschema::draft202012::meta::validate(schema).map_err(|e| e.to_string()),
    };
    checked.err().map(|why| format!("{which} is not a valid schema: {}", shown(&why)))
}

/// The simple types of JSON Schema.
const TYPES: [&str; 7] = ["null", "boolean", "object", "array", "number", "string", "integer"];

/// Keywords that hold no constraint the meta-schema checks, or one that `plainly_valid` checks
/// itself. A schema with any other keyword the meta-schema knows goes to the full check.
const PLAIN: [&str; 27] = [
    "$schema",
    "$ref",
    "$defs",
    "definitions",
    "$comment",
    "title",
    "description",
    "default",
    "examples",
    "type",
    "enum",
    "const",
    "properties",
    "required",
    "items",
    "additionalProperties",
    "anyOf",
    "oneOf",
    "allOf",
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "minLength",
    "maxLength",
    "minItems",
    "maxItems",
];

/// Every keyword of the 2020-12 and Draft 7 vocabularies (and their meta-data): an unknown
/// keyword constrains nothing, a known one not in `PLAIN` sends the schema to the full check.
const KNOWN: [&str; 28] = [
    "$id",
    "$anchor",
    "$dynamicRef",
    "$dynamicAnchor",
    "$vocabulary",
    "not",
    "if",
    "then",
    "else",
    "dependentSchemas",
    "dependentRequired",
    "dependencies",
    "prefixItems",
    "contains",
    "minContains",
    "maxContains",
    "uniqueItems",
    "patternProperties",
    "propertyNames",
    "unevaluatedItems",
    "unevaluatedProperties",
    "multipleOf",
    "pattern",
    "minProperties",
    "maxProperties",
    "format",
    "readOnly",
    "contentEncoding",
];

/// Whether `schema` is valid against its meta-schema for reasons this function can see: only
/// `PLAIN` keywords (and unknown ones), each with a value of the right shape. `false` means
/// "check it fully", not "invalid".
fn plainly_valid(schema: &Value, depth: usize) -> bool {
    let map = match schema {
        Value::Bool(_) => return true,
        Value::Object(map) => map,
        _ => return false,
    };
    if depth > 32 {
        return false;
    }
    let sub = |value: &Value| plainly_valid(value, depth + 1);
    let count = |value: &Value| value.as_u64().is_some();
    map.iter().all(|(key, value)| match key.as_str() {
        "$schema" | "$ref" | "$comment" | "title" | "description" => value.is_string(),
        "default" | "const" => true,
        "examples" => value.is_array(),
        "type" => match value {
            Value::String(kind) => TYPES.contains(&kind.as_str()),
            Value::Array(kinds) => {
                !kinds.is_empty()
                    && kinds
                        .iter()
                        .enumerate()
                        .all(|(i, k)| k.as_str().is_some_and(|k| TYPES.contains(&k)) && !kinds[..i].contains(k))
            }
            _ => false,
        },
        "enum" => value.is_array(),
        "properties" | "$defs" | "definitions" => value.as_object().is_some_and(|m| m.values().all(sub)),
        "required" => value
            .as_array()
            .is_some_and(|names| names.iter().enumerate().all(|(i, n)| n.is_string() && !names[..i].contains(n))),
        "items" | "additionalProperties" => sub(value),
        "anyOf" | "oneOf" | "allOf" => value.as_array().is_some_and(|all| !all.is_empty() && all.iter().all(sub)),
        "minimum" | "maximum" | "exclusiveMinimum" | "exclusiveMaximum" => value.is_number(),
        "minLength" | "maxLength" | "minItems" | "maxItems" => count(value),
        other => !KNOWN.contains(&other) && !PLAIN.contains(&other),
    })
}

/// Checks `instance` against `schema` (formats included). On failure, the field that is
/// wrong (its JSON pointer, or "the answer") and why.
pub fn check_instance(schema: &Value, instance: &Value) -> Result<(), (String, String)> {
    let draft = match dialect(schema) {
        Ok(Dialect::Draft7) => jsonschema::Draft::Draft7,
        Ok(Dialect::Draft202012) => jsonschema::Draft::Draft202012,
        Err(why) => return Err(("the schema".into(), why)),
    };
    let validator = jsonschema::options()
        .with_draft(draft)
        .should_validate_formats(true)
        .build(schema)
        .map_err(|e| ("the schema".to_string(), shown(&e.to_string())))?;
    match validator.validate(instance) {
        Ok(()) => Ok(()),
        Err(error) => {
            let path = error.instance_path().to_string();
            let field = path.trim_start_matches('/').split('/').next().unwrap_or("").to_string();
            let field = if field.is_empty() { "the answer".to_string() } else { field };
            Err((field, shown(&error.to_string())))
        }
    }
}

/// Server text in a message: one line, bounded.
fn shown(text: &str) -> String {
    let line = crate::util::one_line(text);
    match line.char_indices().nth(200) {
        Some((cut, _)) => format!("{}…", &line[..cut]),
        None => line,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn the_plain_check_agrees_with_the_meta_schema_and_sends_the_rest_to_it() {
        let plain = [
            json!({ "type": "object", "properties": { "a": { "type": "string", "description": "x" } }, "required": ["a"] }),
            json!({ "type": "object", "properties": { "q": { "anyOf": [{ "type": "string" }, { "type": "null" }], "default": null, "title": "Q" },
                "m": { "$ref": "#/$defs/M" } }, "$defs": { "M": { "enum": ["a", "b"], "type": "string" } }, "additionalProperties": false }),
            json!({ "type": ["string", "null"], "x-mcp-header": "Name" }),
            json!({ "type": "array", "items": { "type": "integer", "minimum": 0 }, "maxItems": 3 }),
        ];
        for schema in &plain {
            assert!(plainly_valid(schema, 0), "{schema}");
            assert!(jsonschema::draft202012::meta::validate(schema).is_ok(), "{schema}");
        }
        // Not plainly valid: wrong shapes (the full check rejects them) and keywords left to it.
        let invalid = [
            json!({ "type": "strng" }),
            json!({ "type": "object", "required": "a" }),
            json!({ "properties": { "a": { "type": 3 } } }),
            json!({ "minLength": -1 }),
            json!({ "required": ["a", "a"] }),
        ];
        for schema in &invalid {
            assert!(!plainly_valid(schema, 0), "{schema}");
            assert!(problem("inputSchema", schema).is_some(), "{schema}");
        }
        let full = json!({ "type": "string", "pattern": "^a+$" });
        assert!(!plainly_valid(&full, 0) && problem("inputSchema", &full).is_none());
    }

    #[test]
    fn dialects() {
        assert_eq!(dialect(&json!({ "type": "object" })), Ok(Dialect::Draft202012));
        assert_eq!(dialect(&json!({ "$schema": "http://json-schema.org/draft-07/schema#" })), Ok(Dialect::Draft7));
        assert_eq!(
            dialect(&json!({ "$schema": "https://json-schema.org/draft/2020-12/schema" })),
            Ok(Dialect::Draft202012)
        );
        assert!(dialect(&json!({ "$schema": "http://json-schema.org/draft-04/schema#" })).is_err());
    }

    #[test]
    fn schema_problems() {
        assert_eq!(
            problem("inputSchema", &json!({ "type": "object", "properties": { "a": { "type": "string" } } })),
            None
        );
        assert!(problem("inputSchema", &json!({ "type": "object", "properties": { "a": { "type": 5 } } })).is_some());
        assert!(
            problem("inputSchema", &json!({ "$schema": "http://json-schema.org/draft-04/schema#", "type": "object" }))
                .unwrap()
                .contains("draft-04")
        );
        // A remote $ref is neither fetched nor a problem in itself.
        assert_eq!(
            problem(
                "inputSchema",
                &json!({ "type": "object", "properties": { "a": { "$ref": "https://example.com/a.json" } } })
            ),
            None
        );
    }

    #[test]
    fn instances() {
        let schema = json!({ "type": "object", "properties": {
            "email": { "type": "string", "format": "email" },
            "n": { "type": "integer", "minimum": 1, "maximum": 5 },
        }, "required": ["n"] });
        assert_eq!(check_instance(&schema, &json!({ "n": 3, "email": "a@b.example" })), Ok(()));
        assert_eq!(check_instance(&schema, &json!({ "n": 9 })).unwrap_err().0, "n");
        assert_eq!(check_instance(&schema, &json!({ "n": 1, "email": "nope" })).unwrap_err().0, "email");
        assert_eq!(check_instance(&schema, &json!({})).unwrap_err().0, "the answer");
    }
}
