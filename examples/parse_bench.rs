fn main() {
    let yaml = std::env::args().nth(1).as_deref() == Some("yaml");
    let text = if yaml { flowc::testgen::large_program_yaml(300, 20) } else { flowc::testgen::large_program(300, 20) };
    let file = flowc::source::SourceFile::new(if yaml { "b.yaml" } else { "b.flow" }, text);
    let (ast, _) = flowc::syntax::parse(&file);
    let (ir, _) = flowc::ir::lower::lower(&ast);
    println!("{}", ir.flows.len());
}
