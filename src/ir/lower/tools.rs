//! Tool declarations: each tool's one implementation (`http`, `exec`,
//! `builtin`), its templates typed against its params (`invalid_tool`).

use super::*;

impl Lowerer {
    pub(super) fn tool(&mut self, tool: &ast::ToolDecl, params: Vec<Field>, returns: Option<Vec<Field>>) -> Tool {
        let param_locals: Vec<(String, Type)> =
            params.iter().map(|param| (param.name.clone(), param.ty.to_type())).collect();
        let implementation = match tool.implementations.as_slice() {
            [] => {
                self.report(ToolError::NoImplementation { tool: tool.name.value.clone(), span: tool.name.span });
                None
            }
            [only] => self.tool_impl(only, &param_locals),
            [first, second, ..] => {
                self.report(ToolError::TwoImplementations {
                    tool: tool.name.value.clone(),
                    first: first.span(),
                    second: second.span(),
                });
                self.tool_impl(first, &param_locals)
            }
        };
        Tool {
            name: tool.name.value.clone(),
            description: tool.description.as_ref().map(|text| text.value.clone()),
            params,
            returns,
            implementation,
            span: tool.name.span,
        }
    }

    pub(super) fn tool_impl(&mut self, implementation: &ast::ToolImpl, params: &[(String, Type)]) -> Option<ToolImpl> {
        match implementation {
            ast::ToolImpl::Http(http) => {
                let method = match http.method.value.to_ascii_uppercase().as_str() {
                    "GET" => HttpMethod::Get,
                    "POST" => HttpMethod::Post,
                    "PUT" => HttpMethod::Put,
                    "PATCH" => HttpMethod::Patch,
                    "DELETE" => HttpMethod::Delete,
                    _ => {
                        self.report(ToolError::UnknownHttpMethod {
                            method: http.method.value.clone(),
                            span: http.method.span,
                        });
                        return None;
                    }
                };
                let url = self.tool_template(&http.url, params, false);
                let headers = http
                    .headers
                    .iter()
                    .map(|(name, value)| (name.value.clone(), self.tool_template(value, params, true)))
                    .collect();
                let body = http.body.as_ref().map(|body| self.body(body, params));
                let timeout_ms =
                    http.timeout.as_ref().and_then(|text| self.duration(text)).unwrap_or(DEFAULT_TOOL_TIMEOUT_MS);
                Some(ToolImpl::Http { method, url, headers, body, timeout_ms })
            }
            ast::ToolImpl::Exec(exec) => {
                if exec.command.is_empty() || exec.command.iter().all(|part| part.value.trim().is_empty()) {
                    self.report(ToolError::ExecWithoutProgram { span: exec.span });
                    return None;
                }
                let timeout_ms =
                    exec.timeout.as_ref().and_then(|text| self.duration(text)).unwrap_or(DEFAULT_TOOL_TIMEOUT_MS);
                Some(ToolImpl::Exec {
                    command: exec.command.iter().map(|part| part.value.clone()).collect(),
                    timeout_ms,
                    env: exec.env.iter().map(|name| name.value.clone()).collect(),
                })
            }
            ast::ToolImpl::Builtin { name, .. } => {
                let builtin = match name.value.as_str() {
                    "now" => Builtin::Now,
                    "uuid" => Builtin::Uuid,
                    "echo" => Builtin::Echo,
                    other => {
                        self.report(ToolError::UnknownBuiltin { name: other.to_string(), span: name.span });
                        return None;
                    }
                };
                Some(ToolImpl::Builtin { builtin })
            }
        }
    }

    pub(super) fn tool_template(
        &mut self,
        template: &ast::Template,
        params: &[(String, Type)],
        env_allowed: bool,
    ) -> Template {
        let scope = Scope { symbols: &self.symbols, fields_visible: false, locals: params, env_allowed, steps: None };
        typed_in(scope, &mut self.errors, |checker| checker.template(template))
    }

    pub(super) fn body(&mut self, body: &ast::BodyValue, params: &[(String, Type)]) -> Body {
        match body {
            ast::BodyValue::Null(_) => Body::Null,
            ast::BodyValue::Bool(value) => Body::Bool(value.value),
            ast::BodyValue::Number(number) => Body::Number(match number.value {
                ast::Number::Int(value) => value.into(),
                ast::Number::Float(value) => serde_json::Number::from_f64(value).unwrap_or_else(|| 0.into()),
            }),
            ast::BodyValue::String(template) => Body::String(self.tool_template(template, params, false)),
            ast::BodyValue::List(items) => Body::List(items.value.iter().map(|item| self.body(item, params)).collect()),
            ast::BodyValue::Object(members) => Body::Object(
                members.value.iter().map(|(name, value)| (name.value.clone(), self.body(value, params))).collect(),
            ),
        }
    }
}
