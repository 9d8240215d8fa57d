//! `flowc serve`: conversations and workflows behind an HTTP API, and the
//! playground page in front of it.

pub mod page;
