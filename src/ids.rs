//! The typed indices by which the IR ([`crate::ir`]) and the expressions in
//! it ([`crate::expr`]) refer to flows, steps, fields, context keys, tools
//! and signals. They live apart from both so that each can name them
//! without depending on the other; `crate::ir` re-exports them.
#![warn(missing_docs)]

use serde::Serialize;

macro_rules! index_type {
    ($(#[$meta:meta])* $name:ident) => {
        $(#[$meta])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, serde::Deserialize)]
        #[serde(transparent)]
        pub struct $name(pub u32);

        impl $name {
            /// The index into the list the id points into.
            pub fn index(self) -> usize {
                self.0 as usize
            }

            /// The id of the item at `index` of its list.
            pub fn from_index(index: usize) -> $name {
                $name(u32::try_from(index).unwrap_or(u32::MAX))
            }
        }
    };
}

index_type!(
    /// A schema field: an index into [`Program::fields`](crate::ir::Program::fields).
    FieldId
);
index_type!(
    /// A context key: an index into [`Program::context`](crate::ir::Program::context).
    ContextId
);
index_type!(
    /// A tool: an index into [`Program::tools`](crate::ir::Program::tools).
    ToolId
);
index_type!(
    /// A signal: an index into [`Program::signals`](crate::ir::Program::signals).
    SignalId
);
index_type!(
    /// A flow: an index into [`Program::flows`](crate::ir::Program::flows).
    FlowId
);
index_type!(
    /// A step: an index into its flow's [`Flow::steps`](crate::ir::Flow::steps).
    StepId
);
