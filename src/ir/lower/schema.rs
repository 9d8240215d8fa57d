//! Declared types: schema fields, context keys, tool params and returns,
//! with their constraints (`unknown_type`, `invalid_schema`).

use super::*;

impl Lowerer {
    pub(super) fn declarations(&mut self, decls: &[ast::FieldDecl], kind: IdKind) -> Vec<Field> {
        self.unique(decls, |decl| &decl.name, kind)
            .into_iter()
            .map(|decl| Field { name: decl.name.value.clone(), ty: self.value_type(&decl.ty), span: decl.name.span })
            .collect()
    }

    pub(super) fn value_type(&mut self, decl: &ast::TypeExpr) -> ValueType {
        const TYPE_NAMES: &[&str] = &["string", "int", "float", "bool", "date", "datetime", "enum", "list", "object"];
        let name = decl.name.value.as_str();
        let kind = match name {
            "string" => TypeKind::String,
            "int" => TypeKind::Int,
            "float" => TypeKind::Float,
            "bool" => TypeKind::Bool,
            "date" => TypeKind::Date,
            "datetime" => TypeKind::DateTime,
            "enum" => self.enum_values(decl),
            "list" => match &decl.items {
                Some(items) => TypeKind::List { items: Box::new(self.value_type(items)) },
                None => {
                    self.schema_error(
                        decl.name.span,
                        "a list needs `items`",
                        "say what the list holds: `list(string)` in .flow, `items: string` in YAML",
                    );
                    TypeKind::Unknown
                }
            },
            "object" => {
                match &decl.fields {
                    Some(fields) => TypeKind::Object { fields: self.declarations(&fields.value, IdKind::Field) },
                    None => {
                        self.schema_error(decl.name.span, "an object needs `fields`", "declare its fields: `object { name: string }` in .flow, `fields: { name: string }` in YAML");
                        TypeKind::Unknown
                    }
                }
            }
            _ => {
                let help = match did_you_mean(name, TYPE_NAMES.iter().copied()) {
                    Some(close) => format!("did you mean `{close}`?"),
                    None => format!("the types are {}", TYPE_NAMES.join(", ")),
                };
                self.diagnostics.push(
                    Diagnostic::new(Code::UnknownType, format!("unknown type `{name}`"))
                        .at(decl.name.span, "not a type")
                        .with_help(help),
                );
                TypeKind::Unknown
            }
        };
        self.check_options(decl, &kind);
        ValueType {
            kind,
            description: decl.description.as_ref().map(|text| text.value.clone()),
            min: decl.min.as_ref().map(|number| number.value.as_f64()),
            max: decl.max.as_ref().map(|number| number.value.as_f64()),
            pattern: decl.pattern.as_ref().map(|text| text.value.clone()),
            examples: decl.examples.iter().map(|text| text.value.clone()).collect(),
        }
    }

    pub(super) fn enum_values(&mut self, decl: &ast::TypeExpr) -> TypeKind {
        let Some(values) = decl.values.as_ref().filter(|values| !values.value.is_empty()) else {
            let span = decl.values.as_ref().map_or(decl.name.span, |values| values.span);
            self.schema_error(
                span,
                "an enum needs at least one value",
                "list its values: `enum(free, pro)` in .flow, `values: [free, pro]` in YAML",
            );
            return TypeKind::Unknown;
        };
        let mut seen: HashMap<&str, Span> = HashMap::new();
        for value in &values.value {
            if let Some(first) = seen.insert(&value.value, value.span) {
                self.diagnostics.push(
                    Diagnostic::new(Code::InvalidSchema, format!("the enum value `{}` is listed twice", value.value))
                        .at(value.span, "listed again here")
                        .with_label(first, "first listed here")
                        .with_help("remove the repeated value"),
                );
            } else if value.value.is_empty() {
                self.schema_error(value.span, "an enum value cannot be empty", "remove the empty value");
            }
        }
        TypeKind::Enum { values: values.value.iter().map(|value| value.value.clone()).collect() }
    }

    pub(super) fn check_options(&mut self, decl: &ast::TypeExpr, kind: &TypeKind) {
        let numeric_or_list =
            matches!(kind, TypeKind::Int | TypeKind::Float | TypeKind::List { .. } | TypeKind::Unknown);
        for bound in [&decl.min, &decl.max].into_iter().flatten() {
            if !numeric_or_list {
                self.schema_error(
                    bound.span,
                    "`min`/`max` apply to numbers and lists",
                    "remove it, or use `pattern` for strings",
                );
            }
        }
        if let (Some(min), Some(max)) = (&decl.min, &decl.max)
            && min.value.as_f64() > max.value.as_f64()
        {
            self.diagnostics.push(
                Diagnostic::new(Code::InvalidSchema, "`min` is greater than `max`")
                    .at(min.span, "the lower bound")
                    .with_label(max.span, "the upper bound")
                    .with_help("swap the bounds"),
            );
        }
        if let Some(pattern) = &decl.pattern {
            if !matches!(kind, TypeKind::String | TypeKind::Unknown) {
                self.schema_error(pattern.span, "`pattern` applies to strings", "remove it");
            } else if let Err(error) = regex::Regex::new(&pattern.value) {
                let detail = error.to_string().lines().last().unwrap_or("invalid").trim().to_string();
                self.diagnostics.push(
                    Diagnostic::new(Code::InvalidSchema, format!("`pattern` is not a valid regex: {detail}"))
                        .at(pattern.span, "this regex")
                        .with_help("patterns use Rust regex syntax (like RE2: no look-around or backreferences)"),
                );
            }
        }
        if let Some(values) = &decl.values
            && !matches!(kind, TypeKind::Enum { .. } | TypeKind::Unknown)
        {
            self.schema_error(values.span, "`values` apply to enums", "use `type: enum` or remove `values`");
        }
        if let Some(items) = &decl.items
            && !matches!(kind, TypeKind::List { .. } | TypeKind::Unknown)
        {
            self.schema_error(items.span, "`items` apply to lists", "use `type: list` or remove `items`");
        }
        if let Some(fields) = &decl.fields
            && !matches!(kind, TypeKind::Object { .. } | TypeKind::Unknown)
        {
            self.schema_error(fields.span, "`fields` apply to objects", "use `type: object` or remove `fields`");
        }
    }

    pub(super) fn schema_error(&mut self, span: Span, message: &str, help: &str) {
        self.diagnostics.push(Diagnostic::new(Code::InvalidSchema, message).at(span, "here").with_help(help));
    }
}
