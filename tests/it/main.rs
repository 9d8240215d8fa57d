//! Integration tests: the real `flowc` binary and the library end to end,
//! as one test binary of modules.

mod claims;
mod compile;
mod consent;
mod fake;
mod generated;
mod grounding;
#[cfg(unix)]
mod kill;
mod limits;
mod model_steps;
mod ops;
mod providers;
mod reliability;
#[cfg(unix)]
mod repl;
#[cfg(unix)]
mod repl_stream;
mod run;
mod runtime;
mod schedules;
mod serve;
#[cfg(unix)]
mod serve_page;
#[cfg(unix)]
mod stop;
mod store;
mod store_caps;
mod store_damage;
mod store_pool;
mod store_swap;
mod store_tls;
mod support;
mod test_cmd;
#[cfg(unix)]
mod worker_grace;
mod workflows;
