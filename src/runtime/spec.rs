//! What a request tells the model of a schema field it may fill (its type,
//! JSON schema, description, values and bounds: `FieldSpec`) and of a tool
//! it may call (`ToolSpec`), the same for the turn's calls, a workflow's
//! model steps and `flowc check --costs`.

use crate::llm::{FieldSpec, ToolSpec};

/// `field` as a request describes it; `asked`: the step asks for it alone,
/// so the whole answer may be its value.
pub(crate) fn field_spec(field: &crate::ir::Field, asked: bool) -> FieldSpec {
    let values = match &field.ty.kind {
        crate::ir::TypeKind::Enum { values } => values.clone(),
        _ => Vec::new(),
    };
    FieldSpec {
        name: field.name.clone(),
        kind: field.ty.kind_name().to_string(),
        schema: field.ty.json_schema(),
        description: field.ty.description.clone(),
        values,
        examples: field.ty.examples.clone(),
        pattern: field.ty.pattern.clone(),
        min: field.ty.min,
        max: field.ty.max,
        asked,
    }
}

/// `tool` as a request offers it: its name, description and the JSON
/// schema of its parameters.
pub(crate) fn tool_spec(tool: &crate::ir::Tool) -> ToolSpec {
    ToolSpec {
        name: tool.name.clone(),
        description: tool.description.clone(),
        parameters: crate::ir::object_schema(&tool.params),
    }
}
