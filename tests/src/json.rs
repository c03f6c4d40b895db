//! JSON helpers for tests that rewrite ctxpress's output the way other
//! programs do.

use serde_json::Value;

/// `v` with every object's members sorted by key (what Python's
/// `json.dumps(..., sort_keys=True)` writes).
pub fn sorted_keys(v: &Value) -> Value {
    match v {
        Value::Object(m) => {
            let mut kv: Vec<_> = m.iter().collect();
            kv.sort_by(|a, b| a.0.cmp(b.0));
            Value::Object(
                kv.into_iter()
                    .map(|(k, v)| (k.clone(), sorted_keys(v)))
                    .collect(),
            )
        }
        Value::Array(a) => Value::Array(a.iter().map(sorted_keys).collect()),
        x => x.clone(),
    }
}
