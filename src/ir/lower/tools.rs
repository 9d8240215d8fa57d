//! Tool declarations: each tool's one implementation (`http`, `exec`,
//! `builtin`), its templates typed against its params (`invalid_tool`).

use super::*;

impl Lowerer {
    pub(super) fn tool(&mut self, tool: &ast::ToolDecl, params: Vec<Field>, returns: Option<Vec<Field>>) -> Tool {
        let param_locals: Vec<(String, Type)> =
            params.iter().map(|param| (param.name.clone(), param.ty.to_type())).collect();
        let implementation = match tool.implementations.as_slice() {
            [] => {
                self.diagnostics.push(
                    Diagnostic::new(
                        Code::InvalidTool,
                        format!("the tool `{}` has no implementation", tool.name.value),
                    )
                    .at(tool.name.span, "needs one of `http`, `exec` or `builtin`")
                    .with_help("give it one of `http`, `exec` (a program and its arguments) or `builtin` (now, uuid or echo)"),
                );
                None
            }
            [only] => self.tool_impl(only, &param_locals),
            [first, second, ..] => {
                self.diagnostics.push(
                    Diagnostic::new(
                        Code::InvalidTool,
                        format!("the tool `{}` has more than one implementation", tool.name.value),
                    )
                    .at(second.span(), "a second implementation")
                    .with_label(first.span(), "the first")
                    .with_help("a tool has exactly one of `http`, `exec` or `builtin`"),
                );
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
                        self.diagnostics.push(
                            Diagnostic::new(Code::InvalidTool, format!("unknown HTTP method `{}`", http.method.value))
                                .at(http.method.span, "not an HTTP method flowc sends")
                                .with_help("use GET, POST, PUT, PATCH or DELETE"),
                        );
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
                    self.diagnostics.push(
                        Diagnostic::new(Code::InvalidTool, "`exec` needs a program to run")
                            .at(exec.span, "no program given")
                            .with_help("write `exec: [./tools/script.sh]`: the program, then its arguments"),
                    );
                    return None;
                }
                let timeout_ms =
                    exec.timeout.as_ref().and_then(|text| self.duration(text)).unwrap_or(DEFAULT_TOOL_TIMEOUT_MS);
                Some(ToolImpl::Exec {
                    command: exec.command.iter().map(|part| part.value.clone()).collect(),
                    timeout_ms,
                })
            }
            ast::ToolImpl::Builtin { name, .. } => {
                let builtin = match name.value.as_str() {
                    "now" => Builtin::Now,
                    "uuid" => Builtin::Uuid,
                    "echo" => Builtin::Echo,
                    other => {
                        let help = match did_you_mean(other, ["now", "uuid", "echo"]) {
                            Some(close) => format!("did you mean `{close}`?"),
                            None => "the builtins are now, uuid and echo".to_string(),
                        };
                        self.diagnostics.push(
                            Diagnostic::new(Code::InvalidTool, format!("unknown builtin `{other}`"))
                                .at(name.span, "not a builtin tool")
                                .with_help(help),
                        );
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
        let mut diagnostics = std::mem::take(&mut self.diagnostics);
        let typed = Checker {
            scope: Scope { symbols: &self.symbols, fields_visible: false, locals: params, env_allowed, steps: None },
            diagnostics: &mut diagnostics,
        }
        .template(template);
        self.diagnostics = diagnostics;
        typed
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
