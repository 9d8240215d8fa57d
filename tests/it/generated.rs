//! The generated benchmark programs: both syntaxes compile to the same IR
//! with no diagnostic, so the front-end benchmark compares equal input.

use flowc::source::SourceFile;

#[test]
fn generated_programs_are_the_same_in_both_syntaxes() {
    let flow_text = flowc::testgen::large_program(3, 12);
    let yaml_text = flowc::testgen::large_program_yaml(3, 12);
    let from_flow = flowc::pipeline::compile(&SourceFile::new("g.flow", flow_text));
    let from_yaml = flowc::pipeline::compile(&SourceFile::new("g.yaml", yaml_text));
    assert_eq!(from_flow.diagnostics, vec![], "the .flow program checks clean");
    assert_eq!(from_yaml.diagnostics, vec![], "the YAML program checks clean");
    assert_eq!(ir_json(&from_flow.ir), ir_json(&from_yaml.ir));
}

fn ir_json(program: &flowc::ir::Program) -> String {
    let mut json = Vec::new();
    flowc::source::write_json(program, false, true, &mut json).expect("the IR serializes");
    String::from_utf8(json).expect("JSON is UTF-8")
}
