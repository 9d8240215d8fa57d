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
                    self.schema_error(decl.name.span, SchemaProblem::ListWithoutItems);
                    TypeKind::Unknown
                }
            },
            "object" => match &decl.fields {
                Some(fields) => TypeKind::Object { fields: self.declarations(&fields.value, IdKind::Field) },
                None => {
                    self.schema_error(decl.name.span, SchemaProblem::ObjectWithoutFields);
                    TypeKind::Unknown
                }
            },
            _ => {
                self.report(SchemaError::UnknownType { name: name.to_string(), span: decl.name.span });
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
            self.schema_error(span, SchemaProblem::EnumWithoutValues);
            return TypeKind::Unknown;
        };
        let mut seen: HashMap<&str, Span> = HashMap::new();
        for value in &values.value {
            if let Some(first) = seen.insert(&value.value, value.span) {
                self.report(SchemaError::RepeatedEnumValue { value: value.value.clone(), span: value.span, first });
            } else if value.value.is_empty() {
                self.schema_error(value.span, SchemaProblem::EmptyEnumValue);
            }
        }
        TypeKind::Enum { values: values.value.iter().map(|value| value.value.clone()).collect() }
    }

    pub(super) fn check_options(&mut self, decl: &ast::TypeExpr, kind: &TypeKind) {
        let numeric_or_list =
            matches!(kind, TypeKind::Int | TypeKind::Float | TypeKind::List { .. } | TypeKind::Unknown);
        for bound in [&decl.min, &decl.max].into_iter().flatten() {
            if !numeric_or_list {
                self.schema_error(bound.span, SchemaProblem::BoundOnNonNumeric);
            }
        }
        if let (Some(min), Some(max)) = (&decl.min, &decl.max)
            && min.value.as_f64() > max.value.as_f64()
        {
            self.report(SchemaError::MinAboveMax { min: min.span, max: max.span });
        }
        if let Some(pattern) = &decl.pattern {
            if !matches!(kind, TypeKind::String | TypeKind::Unknown) {
                self.schema_error(pattern.span, SchemaProblem::PatternOnNonString);
            } else if let Err(error) = regex::Regex::new(&pattern.value) {
                let detail = error.to_string().lines().last().unwrap_or("invalid").trim().to_string();
                self.report(SchemaError::InvalidPattern { detail, span: pattern.span });
            }
        }
        if let Some(values) = &decl.values
            && !matches!(kind, TypeKind::Enum { .. } | TypeKind::Unknown)
        {
            self.schema_error(values.span, SchemaProblem::ValuesOnNonEnum);
        }
        if let Some(items) = &decl.items
            && !matches!(kind, TypeKind::List { .. } | TypeKind::Unknown)
        {
            self.schema_error(items.span, SchemaProblem::ItemsOnNonList);
        }
        if let Some(fields) = &decl.fields
            && !matches!(kind, TypeKind::Object { .. } | TypeKind::Unknown)
        {
            self.schema_error(fields.span, SchemaProblem::FieldsOnNonObject);
        }
    }

    fn schema_error(&mut self, span: Span, problem: SchemaProblem) {
        self.report(SchemaError::InvalidSchema { problem, span });
    }
}
