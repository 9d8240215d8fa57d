//! Workflow schedules in the store: one row per (program, flow) with the
//! next tick a run starts at, so that any number of workers start each
//! tick's run exactly once. A worker that finds a tick due starts its run
//! in the transaction that advances the tick, a compare-and-swap on the
//! tick it read: of two workers racing on one tick, one advances it and
//! stores the run, the other's swap finds the tick moved and writes
//! nothing. The SQLite store's `BEGIN IMMEDIATE` and the PostgreSQL
//! store's row lock make the swap atomic.
//!
//! A schedule row is written when a worker is given the program
//! (`flowc worker PROGRAM`): the schedules it declares replace those it
//! declared before; an unchanged one keeps its next tick, so restarting
//! workers neither skips nor repeats one.

use super::postgres::PostgresStore;
use super::rows::now_text;
use super::sqlite::SqliteStore;
use super::{Claim, StoreError, StoredRun};
use rusqlite::{OptionalExtension, TransactionBehavior, params};
use serde::Serialize;

/// A schedule as stored: the workflow, when it fires, and its next tick.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ScheduleRow {
    /// The program file, absolute, as [`StoredRun::program`].
    pub program: String,
    /// The workflow's name.
    pub flow: String,
    /// The cron expression, as written.
    pub cron: String,
    /// The IANA zone it is read in.
    pub timezone: String,
    /// The next tick, in seconds since the epoch.
    pub next_at: i64,
    /// The run the last tick started, if one did.
    pub last_run: Option<String>,
}

/// What [`ScheduleStore::advance_schedule`] did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Advance {
    /// The tick moved on, and its run (if any) is stored.
    Done,
    /// Another worker moved the tick first: nothing was written.
    Taken,
    /// The run's id is taken by a run already stored: nothing was
    /// written; try again with another id.
    IdTaken,
}

/// Where schedules are kept, beside the runs they start.
pub trait ScheduleStore {
    /// Makes `schedules` the ones `program` declares, in one transaction:
    /// a new one, or one whose cron or zone changed, is stored with its
    /// `next_at`; one stored as it is keeps its next tick; one the program
    /// no longer declares is removed. Answers them as stored.
    fn sync_schedules(&self, program: &str, schedules: &[ScheduleRow]) -> Result<Vec<ScheduleRow>, StoreError>;

    /// Every schedule, by next tick.
    fn list_schedules(&self) -> Result<Vec<ScheduleRow>, StoreError>;

    /// The schedules whose tick is due by `now`, oldest first.
    fn due_schedules(&self, now: i64, limit: usize) -> Result<Vec<ScheduleRow>, StoreError> {
        let mut due: Vec<ScheduleRow> = self.list_schedules()?.into_iter().filter(|row| row.next_at <= now).collect();
        due.truncate(limit);
        Ok(due)
    }

    /// Moves the tick of `due` (as read) to `next_at` and stores `run`
    /// (new, claimed by `claim`) in the same transaction, if the stored
    /// tick is still `due.next_at`. With no run, the tick just moves on
    /// (its program could not start it).
    fn advance_schedule(
        &self,
        due: &ScheduleRow,
        next_at: i64,
        run: Option<(&StoredRun, &Claim)>,
    ) -> Result<Advance, StoreError>;

    /// The earliest next tick of any schedule.
    fn next_tick(&self) -> Result<Option<i64>, StoreError> {
        Ok(self.list_schedules()?.into_iter().map(|row| row.next_at).min())
    }
}

/// A save refused because the run's id is taken becomes [`Advance::IdTaken`].
fn id_taken(saved: Result<(), StoreError>) -> Result<Option<Advance>, StoreError> {
    match saved {
        Ok(()) => Ok(None),
        Err(StoreError::RunConflict { .. }) => Ok(Some(Advance::IdTaken)),
        Err(error) => Err(error),
    }
}

fn sqlite_row(row: &rusqlite::Row<'_>) -> rusqlite::Result<ScheduleRow> {
    Ok(ScheduleRow {
        program: row.get(0)?,
        flow: row.get(1)?,
        cron: row.get(2)?,
        timezone: row.get(3)?,
        next_at: row.get(4)?,
        last_run: row.get(5)?,
    })
}

const COLUMNS: &str = "program, flow, cron, timezone, next_at, last_run";

impl ScheduleStore for SqliteStore {
    fn sync_schedules(&self, program: &str, schedules: &[ScheduleRow]) -> Result<Vec<ScheduleRow>, StoreError> {
        let error = super::sqlite::sql_error(program);
        self.writable()?;
        let mut connection = self.connection(program)?;
        let transaction = connection.transaction_with_behavior(TransactionBehavior::Immediate).map_err(&error)?;
        let stored: Vec<String> = {
            let mut statement =
                transaction.prepare_cached("SELECT flow FROM schedules WHERE program = ?1").map_err(&error)?;
            let rows = statement.query_map([program], |row| row.get(0)).map_err(&error)?;
            rows.collect::<Result<_, _>>().map_err(&error)?
        };
        for flow in stored.iter().filter(|flow| !schedules.iter().any(|schedule| &schedule.flow == *flow)) {
            transaction
                .execute("DELETE FROM schedules WHERE program = ?1 AND flow = ?2", params![program, flow])
                .map_err(&error)?;
        }
        for schedule in schedules {
            transaction
                .execute(
                    "INSERT INTO schedules (program, flow, cron, timezone, next_at, last_run, updated_at)
                     VALUES (?1, ?2, ?3, ?4, ?5, NULL, ?6)
                     ON CONFLICT (program, flow) DO UPDATE SET cron = ?3, timezone = ?4, next_at = ?5, updated_at = ?6
                     WHERE cron <> ?3 OR timezone <> ?4",
                    params![program, schedule.flow, schedule.cron, schedule.timezone, schedule.next_at, now_text()],
                )
                .map_err(&error)?;
        }
        let rows = {
            let mut statement = transaction
                .prepare_cached(&format!("SELECT {COLUMNS} FROM schedules WHERE program = ?1 ORDER BY flow"))
                .map_err(&error)?;
            let rows = statement.query_map([program], sqlite_row).map_err(&error)?;
            rows.collect::<Result<Vec<_>, _>>().map_err(&error)?
        };
        transaction.commit().map_err(&error)?;
        Ok(rows)
    }

    fn list_schedules(&self) -> Result<Vec<ScheduleRow>, StoreError> {
        let error = super::sqlite::sql_error("*");
        let connection = self.connection("*")?;
        let mut statement = connection
            .prepare_cached(&format!("SELECT {COLUMNS} FROM schedules ORDER BY next_at, program, flow"))
            .map_err(&error)?;
        let rows = statement.query_map([], sqlite_row).map_err(&error)?;
        rows.collect::<Result<Vec<_>, _>>().map_err(&error)
    }

    fn due_schedules(&self, now: i64, limit: usize) -> Result<Vec<ScheduleRow>, StoreError> {
        let error = super::sqlite::sql_error("*");
        let connection = self.connection("*")?;
        let mut statement = connection
            .prepare_cached(&format!(
                "SELECT {COLUMNS} FROM schedules WHERE next_at <= ?1 ORDER BY next_at, program, flow LIMIT ?2"
            ))
            .map_err(&error)?;
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let rows = statement.query_map(params![now, limit], sqlite_row).map_err(&error)?;
        rows.collect::<Result<Vec<_>, _>>().map_err(&error)
    }

    fn advance_schedule(
        &self,
        due: &ScheduleRow,
        next_at: i64,
        run: Option<(&StoredRun, &Claim)>,
    ) -> Result<Advance, StoreError> {
        let error = super::sqlite::sql_error(&due.program);
        self.writable()?;
        let mut connection = self.connection(&due.program)?;
        let transaction = connection.transaction_with_behavior(TransactionBehavior::Immediate).map_err(&error)?;
        let last_run = run.map(|(stored, _)| stored.run.run.as_str());
        let moved = transaction
            .execute(
                "UPDATE schedules SET next_at = ?4, last_run = COALESCE(?5, last_run), updated_at = ?6
                 WHERE program = ?1 AND flow = ?2 AND next_at = ?3",
                params![due.program, due.flow, due.next_at, next_at, last_run, now_text()],
            )
            .map_err(&error)?;
        if moved == 0 {
            return Ok(Advance::Taken);
        }
        if let Some((stored, claim)) = run {
            let saved = super::sqlite::save_run_in(&transaction, &stored.run, stored.meta(), 0, Some(claim));
            if let Some(refused) = id_taken(saved)? {
                return Ok(refused);
            }
        }
        transaction.commit().map_err(&error)?;
        Ok(Advance::Done)
    }

    fn next_tick(&self) -> Result<Option<i64>, StoreError> {
        let connection = self.connection("*")?;
        connection
            .query_row("SELECT MIN(next_at) FROM schedules", [], |row| row.get(0))
            .optional()
            .map(Option::flatten)
            .map_err(super::sqlite::sql_error("*"))
    }
}

fn postgres_row(row: &postgres::Row) -> ScheduleRow {
    ScheduleRow {
        program: row.get(0),
        flow: row.get(1),
        cron: row.get(2),
        timezone: row.get(3),
        next_at: row.get(4),
        last_run: row.get(5),
    }
}

impl ScheduleStore for PostgresStore {
    fn sync_schedules(&self, program: &str, schedules: &[ScheduleRow]) -> Result<Vec<ScheduleRow>, StoreError> {
        let error = super::postgres::sql_error(program);
        let flows: Vec<&str> = schedules.iter().map(|schedule| schedule.flow.as_str()).collect();
        self.using(|lent| {
            let mut transaction = lent.client.transaction().map_err(&error)?;
            transaction
                .execute("DELETE FROM schedules WHERE program = $1 AND NOT (flow = ANY($2))", &[&program, &flows])
                .map_err(&error)?;
            for schedule in schedules {
                transaction
                    .execute(
                        "INSERT INTO schedules (program, flow, cron, timezone, next_at, last_run, updated_at)
                         VALUES ($1, $2, $3, $4, $5, NULL, $6)
                         ON CONFLICT (program, flow) DO UPDATE SET cron = $3, timezone = $4, next_at = $5,
                             updated_at = $6
                         WHERE schedules.cron <> $3 OR schedules.timezone <> $4",
                        &[&program, &schedule.flow, &schedule.cron, &schedule.timezone, &schedule.next_at, &now_text()],
                    )
                    .map_err(&error)?;
            }
            let rows = transaction
                .query(&format!("SELECT {COLUMNS} FROM schedules WHERE program = $1 ORDER BY flow"), &[&program])
                .map_err(&error)?;
            // A worker asleep until its next due run wakes to the new ticks.
            transaction.execute("SELECT pg_notify($1, $2)", &[&super::postgres::NEWS, &program]).map_err(&error)?;
            transaction.commit().map_err(&error)?;
            Ok(rows.iter().map(postgres_row).collect())
        })
    }

    fn list_schedules(&self) -> Result<Vec<ScheduleRow>, StoreError> {
        let error = super::postgres::sql_error("*");
        self.using(|lent| {
            let rows = lent
                .client
                .query(&format!("SELECT {COLUMNS} FROM schedules ORDER BY next_at, program, flow"), &[])
                .map_err(&error)?;
            Ok(rows.iter().map(postgres_row).collect())
        })
    }

    fn due_schedules(&self, now: i64, limit: usize) -> Result<Vec<ScheduleRow>, StoreError> {
        let error = super::postgres::sql_error("*");
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        self.using(|lent| {
            let rows = lent
                .client
                .query(
                    &format!(
                        "SELECT {COLUMNS} FROM schedules WHERE next_at <= $1 ORDER BY next_at, program, flow LIMIT $2"
                    ),
                    &[&now, &limit],
                )
                .map_err(&error)?;
            Ok(rows.iter().map(postgres_row).collect())
        })
    }

    fn advance_schedule(
        &self,
        due: &ScheduleRow,
        next_at: i64,
        run: Option<(&StoredRun, &Claim)>,
    ) -> Result<Advance, StoreError> {
        let error = super::postgres::sql_error(&due.program);
        let last_run = run.map(|(stored, _)| stored.run.run.clone());
        self.using(|lent| {
            let mut transaction = lent.client.transaction().map_err(&error)?;
            // A worker racing on the same tick waits on this row's lock,
            // then finds the tick moved: its update matches nothing.
            let moved = transaction
                .execute(
                    "UPDATE schedules SET next_at = $4, last_run = COALESCE($5, last_run), updated_at = $6
                     WHERE program = $1 AND flow = $2 AND next_at = $3",
                    &[&due.program, &due.flow, &due.next_at, &next_at, &last_run, &now_text()],
                )
                .map_err(&error)?;
            if moved == 0 {
                return Ok(Advance::Taken);
            }
            if let Some((stored, claim)) = run {
                let saved = super::postgres::save_run_in(&mut transaction, &stored.run, stored.meta(), 0, Some(claim));
                if let Some(refused) = id_taken(saved)? {
                    return Ok(refused);
                }
            }
            transaction.commit().map_err(&error)?;
            Ok(Advance::Done)
        })
    }

    fn next_tick(&self) -> Result<Option<i64>, StoreError> {
        let error = super::postgres::sql_error("*");
        self.using(|lent| {
            let row = lent.client.query_one("SELECT MIN(next_at) FROM schedules", &[]).map_err(&error)?;
            Ok(row.get(0))
        })
    }
}
