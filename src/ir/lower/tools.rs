//! Tool declarations: each tool's one implementation (`http`, `exec`,
//! `builtin`), its templates typed against its params (`invalid_tool`),
//! and an http tool's url scheme (`invalid_url`).

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
                if let Some(scheme) = url_scheme_problem(&http.url) {
                    self.report(ToolError::UrlScheme { scheme, span: http.url.span });
                    return None;
                }
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
                for name in exec.env.iter().filter(|name| !is_variable_name(&name.value)) {
                    self.report(ToolError::EnvName { name: name.value.clone(), span: name.span });
                }
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

/// Whether `name` can name an environment variable a tool is given:
/// `[A-Za-z_][A-Za-z0-9_]*`, what shells and most programs accept (a `=`
/// or a space could never be one; a dash or a dot is refused by shells).
pub(crate) fn is_variable_name(name: &str) -> bool {
    let mut characters = name.chars();
    characters.next().is_some_and(|first| first.is_ascii_alphabetic() || first == '_')
        && characters.all(|character| character.is_ascii_alphanumeric() || character == '_')
}

/// What is wrong with the scheme of an http tool's url, when its text shows
/// it: `Some(Some(scheme))` for a scheme other than http or https (`file:`,
/// `ftp:`, or `localhost:` for a url missing its scheme), `Some(None)` for
/// a url with no scheme at all. A url that starts with a value is checked
/// when the tool runs.
fn url_scheme_problem(url: &ast::Template) -> Option<Option<String>> {
    let leading = match url.parts.first() {
        Some(ast::TemplatePart::Text(text)) => text.trim_start(),
        Some(ast::TemplatePart::Expr(_)) => return None,
        None => "",
    };
    let scheme_end = leading.find(['/', '?', '#', ':']);
    match scheme_end.map(|end| (end, leading.as_bytes().get(end))) {
        Some((end, Some(b':'))) => {
            let scheme = leading.get(..end).unwrap_or_default();
            let is_scheme = scheme.chars().next().is_some_and(|first| first.is_ascii_alphabetic())
                && scheme.chars().all(|character| character.is_ascii_alphanumeric() || "+-.".contains(character));
            match scheme.to_ascii_lowercase().as_str() {
                "http" | "https" => None,
                _ if is_scheme => Some(Some(scheme.to_string())),
                _ => Some(None),
            }
        }
        // The text ends before any `:` and a value follows: it may hold
        // the rest of the scheme.
        None if url.parts.len() > 1 => None,
        _ => Some(None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn problem(text: &str) -> Option<Option<String>> {
        let source = crate::source::SourceFile::new("t.flow", format!("tool t() {{ http GET \"{text}\" }}"));
        let (program, _) = crate::syntax::parse(&source);
        let Some(tool) = program.tools.first() else {
            panic!("no tool in {text}");
        };
        let Some(ast::ToolImpl::Http(http)) = tool.implementations.first() else {
            panic!("no http in {text}");
        };
        url_scheme_problem(&http.url)
    }

    #[test]
    fn only_http_and_https_urls_pass() {
        assert_eq!(problem("https://api.example.com/x"), None);
        assert_eq!(problem("HTTP://127.0.0.1:8080/x?y=1"), None);
        assert_eq!(problem("{{base}}/customers"), None);
        assert_eq!(problem("file:///etc/passwd"), Some(Some("file".to_string())));
        assert_eq!(problem("ftp://host/x"), Some(Some("ftp".to_string())));
        assert_eq!(problem("localhost:8080/x"), Some(Some("localhost".to_string())));
        assert_eq!(problem("/customers/{{id}}"), Some(None));
        assert_eq!(problem("api.example.com"), Some(None));
    }
}
