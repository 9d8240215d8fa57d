//! A workflow's `schedule`: a cron string (read in UTC), or a mapping
//! `{ cron: "0 9 * * MON", timezone: Europe/Paris }`.

use super::super::values::Entry;
use super::Builder;
use crate::syntax::ast::ScheduleDecl;

const SCHEDULE_KEYS: &[&str] = &["cron", "timezone"];

impl Builder<'_, '_> {
    pub(super) fn schedule(&mut self, entry: Entry<'_>) -> Option<ScheduleDecl> {
        let span = self.values.span(entry.value);
        if !self.values.is_mapping(entry.value) {
            let cron = self.values.text(entry, "a cron expression such as \"0 9 * * MON\"")?;
            return Some(ScheduleDecl { cron, timezone: None, span });
        }
        let keys = self.values.keyed(entry, SCHEDULE_KEYS, "a flow's `schedule`", "`{ cron: \"0 9 * * MON\" }`")?;
        let Some(cron) = keys.get("cron") else {
            let help =
                "write `schedule: { cron: \"0 9 * * MON\", timezone: Europe/Paris }`, or just the cron string for UTC";
            self.values.missing_key(span, "a flow's `schedule`", "cron", help);
            return None;
        };
        let cron = self.values.text(cron, "a cron expression such as \"0 9 * * MON\"")?;
        let timezone = keys.get("timezone").and_then(|zone| self.values.text(zone, "a time zone such as Europe/Paris"));
        Some(ScheduleDecl { cron, timezone, span })
    }
}
